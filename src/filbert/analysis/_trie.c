/* The loops of trie.py's Trie that numpy cannot do in bulk.

   matches(): the fuzzy prefix search, depth first: the dynamic programming of optimal
   string alignment (edits and transpositions of neighbours) between the query and every
   start of a path, one row per character of the path, with Ukkonen's cut-off. A keystroke
   costs well under a microsecond per trie position visited. Asked for, it also finds the
   nodes whose whole path is within the errors (the row's last cell where the node's edge
   ends), walking on below a prefix match while such a path may still come.

   nodes(): the compact trie's nodes from the sorted phrases' common prefixes, with a stack
   of the nodes on the current phrase's path (as a suffix tree is built from an LCP array). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    int32_t *nodes;
    int8_t *dists;
    Py_ssize_t found, capacity;
} Found;

typedef struct {
    const void *chars;      /* edge labels' character ids, uint16 or uint32 */
    int wide;               /* chars are uint32 */
    const int32_t *label;   /* node v's edge is chars[label[v]:label[v + 1]] */
    const int32_t *first_child; /* children of v: first_child[v]:first_child[v + 1] */
    const int32_t *query;
    Py_ssize_t m;
    int *rows;              /* row of depth d: rows[d * (m + 1) : (d + 1) * (m + 1)] */
    int64_t *path;          /* path[d]: the character at depth d (1-based) */
    int errors;
    int whole;              /* also find the whole paths within `errors` */
    Found prefix, full;     /* the prefix matches; the whole paths */
} Search;

static int64_t char_at(const Search *s, int32_t p) {
    return s->wide ? ((const uint32_t *)s->chars)[p] : ((const uint16_t *)s->chars)[p];
}

static int report(Found *f, int32_t node, int dist) {
    if (f->found == f->capacity) {
        Py_ssize_t capacity = f->capacity ? 2 * f->capacity : 64;
        int32_t *nodes = PyMem_Realloc(f->nodes, capacity * sizeof(int32_t));
        if (nodes == NULL) return -1;
        f->nodes = nodes;
        int8_t *dists = PyMem_Realloc(f->dists, capacity);
        if (dists == NULL) return -1;
        f->dists = dists;
        f->capacity = capacity;
    }
    f->nodes[f->found] = node;
    f->dists[f->found++] = (int8_t)dist;
    return 0;
}

/* Row d + 1 from row d (and d - 1) for path character c; returns the row's least cell. */
static int next_row(Search *s, Py_ssize_t d, int64_t c) {
    Py_ssize_t w = s->m + 1;
    const int *prev = s->rows + d * w;
    int *row = s->rows + (d + 1) * w;
    const int *before = d ? s->rows + (d - 1) * w : NULL;
    s->path[d + 1] = c;
    row[0] = (int)(d + 1);
    int least = row[0];
    for (Py_ssize_t j = 1; j < w; j++) {
        int cost = prev[j - 1] + (c != s->query[j - 1]);
        if (prev[j] + 1 < cost) cost = prev[j] + 1;         /* a path character too many */
        if (row[j - 1] + 1 < cost) cost = row[j - 1] + 1;   /* a query character too many */
        if (before && j > 1 && c == s->query[j - 2] && s->path[d] == s->query[j - 1]
            && before[j - 2] + 1 < cost)
            cost = before[j - 2] + 1;                       /* neighbours transposed */
        row[j] = cost;
        if (cost < least) least = cost;
    }
    return least;
}

/* Follow node v's edge from depth d, then its children; prefix matches closer than
   `bound` count. Returns -1 on a memory error. */
static int visit(Search *s, int32_t v, Py_ssize_t d, int bound) {
    int at_end = 0;
    for (int32_t p = s->label[v]; p < s->label[v + 1]; p++, d++) {
        int least = next_row(s, d, char_at(s, p));
        at_end = s->rows[(d + 1) * (s->m + 1) + s->m];
        if (at_end <= bound) {
            if (report(&s->prefix, v, at_end) < 0) return -1;
            bound = at_end - 1;
        }
        /* no later row has a cell below this row's least; a whole path more than `errors`
           longer than the query is too far */
        int whole_later = s->whole && least <= s->errors && d + 1 < s->m + s->errors;
        if (least > bound && !whole_later) {
            int node_end = p + 1 == s->label[v + 1];
            return node_end && s->whole && at_end <= s->errors ? report(&s->full, v, at_end)
                                                               : 0;
        }
    }
    if (s->whole && at_end <= s->errors && report(&s->full, v, at_end) < 0) return -1;
    for (int32_t u = s->first_child[v]; u < s->first_child[v + 1]; u++)
        if (visit(s, u, d, bound) < 0) return -1;
    return 0;
}

static PyObject *matches(PyObject *module, PyObject *args) {
    Py_buffer chars, label, first_child, query;
    int wide, errors, whole;
    if (!PyArg_ParseTuple(args, "y*py*y*y*ip", &chars, &wide, &label, &first_child, &query,
                          &errors, &whole))
        return NULL;
    Search s = {chars.buf, wide, label.buf, first_child.buf, query.buf,
                query.len / (Py_ssize_t)sizeof(int32_t), NULL, NULL, errors, whole,
                {NULL, NULL, 0, 0}, {NULL, NULL, 0, 0}};
    Py_ssize_t depths = s.m + errors + 2, w = s.m + 1;
    PyObject *result = NULL;
    s.rows = PyMem_Malloc(depths * w * sizeof(int));
    s.path = PyMem_Malloc(depths * sizeof(int64_t));
    if (s.rows == NULL || s.path == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < w; j++) s.rows[j] = (int)j;
    int bound = errors;
    if (s.m <= errors) { /* the empty path is close enough: every phrase matches */
        if (report(&s.prefix, 0, (int)s.m) < 0) goto nomemory;
        bound = (int)s.m - 1;
    }
    for (int32_t u = s.first_child[0]; u < s.first_child[1]; u++)
        if (visit(&s, u, 0, bound) < 0) goto nomemory;
    /* (y# makes None of a NULL buffer) */
    result = Py_BuildValue(
        "(y#y#y#y#)", s.prefix.found ? (const char *)s.prefix.nodes : "",
        s.prefix.found * (Py_ssize_t)sizeof(int32_t),
        s.prefix.found ? (const char *)s.prefix.dists : "", s.prefix.found,
        s.full.found ? (const char *)s.full.nodes : "",
        s.full.found * (Py_ssize_t)sizeof(int32_t),
        s.full.found ? (const char *)s.full.dists : "", s.full.found);
    goto done;
nomemory:
    PyErr_NoMemory();
done:
    PyMem_Free(s.rows);
    PyMem_Free(s.path);
    PyMem_Free(s.prefix.nodes);
    PyMem_Free(s.prefix.dists);
    PyMem_Free(s.full.nodes);
    PyMem_Free(s.full.dists);
    PyBuffer_Release(&chars);
    PyBuffer_Release(&label);
    PyBuffer_Release(&first_child);
    PyBuffer_Release(&query);
    return result;
}

/* nodes(lcp, lengths): int64 arrays of n phrases -> (lo, hi, depth, parent), int32 bytes. */
static PyObject *nodes(PyObject *module, PyObject *args) {
    Py_buffer lcp_buf, lengths_buf;
    if (!PyArg_ParseTuple(args, "y*y*", &lcp_buf, &lengths_buf)) return NULL;
    const int64_t *lcp = lcp_buf.buf, *lengths = lengths_buf.buf;
    Py_ssize_t n = lengths_buf.len / (Py_ssize_t)sizeof(int64_t), size = 2 * n + 2, count = 1;
    PyObject *result = NULL;
    int32_t *lo = PyMem_Malloc(size * sizeof(int32_t)), *hi = PyMem_Malloc(size * sizeof(int32_t));
    int32_t *depth = PyMem_Malloc(size * sizeof(int32_t));
    int32_t *parent = PyMem_Malloc(size * sizeof(int32_t));
    int32_t *stack = PyMem_Malloc(size * sizeof(int32_t));
    if (!lo || !hi || !depth || !parent || !stack) {
        PyErr_NoMemory();
        goto done;
    }
    lo[0] = 0, hi[0] = (int32_t)n, depth[0] = 0, parent[0] = 0; /* the root */
    Py_ssize_t top = 0;
    stack[0] = 0;
    for (Py_ssize_t i = 0; i <= n; i++) {
        int64_t shared = (i > 0 && i < n) ? lcp[i] : 0;
        int32_t last = -1;
        while (depth[stack[top]] > shared) { /* close the nodes phrase i is not under */
            int32_t v = stack[top--];
            hi[v] = (int32_t)i;
            if (last >= 0) parent[last] = v;
            last = v;
        }
        if (depth[stack[top]] < shared) { /* phrases i - 1 and i part here: a branch */
            lo[count] = lo[last], hi[count] = -1, depth[count] = (int32_t)shared;
            parent[count] = -1;
            stack[++top] = (int32_t)count++;
        }
        if (last >= 0) parent[last] = stack[top];
        if (i < n) { /* phrase i's own node, closed when a later phrase leaves it */
            lo[count] = (int32_t)i, hi[count] = -1, depth[count] = (int32_t)lengths[i];
            parent[count] = -1;
            stack[++top] = (int32_t)count++;
        }
    }
    Py_ssize_t bytes = count * (Py_ssize_t)sizeof(int32_t);
    result = Py_BuildValue("(y#y#y#y#)", (char *)lo, bytes, (char *)hi, bytes, (char *)depth,
                           bytes, (char *)parent, bytes);
done:
    PyMem_Free(lo);
    PyMem_Free(hi);
    PyMem_Free(depth);
    PyMem_Free(parent);
    PyMem_Free(stack);
    PyBuffer_Release(&lcp_buf);
    PyBuffer_Release(&lengths_buf);
    return result;
}

static PyMethodDef methods[] = {
    {"matches", matches, METH_VARARGS,
     "matches(chars, wide, label, first_child, query, errors, whole) -> (int32 nodes, "
     "int8 distances, and the same of the whole paths if asked) as bytes: Trie.matches."},
    {"nodes", nodes, METH_VARARGS,
     "nodes(lcp, lengths) -> (lo, hi, depth, parent) as int32 bytes: the compact trie's "
     "nodes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "filbert.suggest._trie",
    "The suggestion trie's loops: fuzzy prefix search and node building.", -1, methods,
};

PyMODINIT_FUNC PyInit__trie(void) { return PyModule_Create(&module); }
