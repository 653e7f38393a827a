/* matches(): the fuzzy prefix search of trie.py's Trie, depth first.

   The same dynamic programming as Trie.matches in numpy (optimal string alignment: edits
   and transpositions of neighbours, between the query and every start of a path), one row
   per character of the path, with Ukkonen's cut-off; but walked depth first in C, so a
   keystroke costs a few microseconds per trie position visited instead of a few numpy
   calls per depth. The numpy version stays the reference (trie.py); both report the same
   (node, distance) pairs, in another order. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    const void *chars;      /* edge labels' character ids, uint16 or uint32 */
    int wide;               /* chars are uint32 */
    const int32_t *label;   /* node v's edge is chars[label[v]:label[v + 1]] */
    const int32_t *first_child; /* children of v: first_child[v]:first_child[v + 1] */
    const int32_t *query;
    Py_ssize_t m;
    int *rows;              /* row of depth d: rows[d * (m + 1) : (d + 1) * (m + 1)] */
    int64_t *path;          /* path[d]: the character at depth d (1-based) */
    int32_t *nodes;         /* found: node, distance */
    int8_t *dists;
    Py_ssize_t found, capacity;
} Search;

static int64_t char_at(const Search *s, int32_t p) {
    return s->wide ? ((const uint32_t *)s->chars)[p] : ((const uint16_t *)s->chars)[p];
}

static int report(Search *s, int32_t node, int dist) {
    if (s->found == s->capacity) {
        Py_ssize_t capacity = s->capacity ? 2 * s->capacity : 64;
        int32_t *nodes = PyMem_Realloc(s->nodes, capacity * sizeof(int32_t));
        if (nodes == NULL) return -1;
        s->nodes = nodes;
        int8_t *dists = PyMem_Realloc(s->dists, capacity);
        if (dists == NULL) return -1;
        s->dists = dists;
        s->capacity = capacity;
    }
    s->nodes[s->found] = node;
    s->dists[s->found++] = (int8_t)dist;
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

/* Follow node v's edge from depth d, then its children; matches closer than `bound`
   count. Returns -1 on a memory error. */
static int visit(Search *s, int32_t v, Py_ssize_t d, int bound) {
    for (int32_t p = s->label[v]; p < s->label[v + 1]; p++, d++) {
        int least = next_row(s, d, char_at(s, p));
        int at_end = s->rows[(d + 1) * (s->m + 1) + s->m];
        if (at_end <= bound) {
            if (report(s, v, at_end) < 0) return -1;
            bound = at_end - 1;
        }
        if (least > bound) return 0; /* no later row has a cell below this row's least */
    }
    for (int32_t u = s->first_child[v]; u < s->first_child[v + 1]; u++)
        if (visit(s, u, d, bound) < 0) return -1;
    return 0;
}

static PyObject *matches(PyObject *module, PyObject *args) {
    Py_buffer chars, label, first_child, query;
    int wide, errors;
    if (!PyArg_ParseTuple(args, "y*py*y*y*i", &chars, &wide, &label, &first_child, &query,
                          &errors))
        return NULL;
    Search s = {chars.buf, wide, label.buf, first_child.buf, query.buf,
                query.len / (Py_ssize_t)sizeof(int32_t), NULL, NULL, NULL, NULL, 0, 0};
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
        if (report(&s, 0, (int)s.m) < 0) goto nomemory;
        bound = (int)s.m - 1;
    }
    for (int32_t u = s.first_child[0]; u < s.first_child[1]; u++)
        if (visit(&s, u, 0, bound) < 0) goto nomemory;
    /* (y# makes None of a NULL buffer) */
    result = Py_BuildValue("(y#y#)", s.found ? (const char *)s.nodes : "",
                           s.found * (Py_ssize_t)sizeof(int32_t),
                           s.found ? (const char *)s.dists : "", s.found);
    goto done;
nomemory:
    PyErr_NoMemory();
done:
    PyMem_Free(s.rows);
    PyMem_Free(s.path);
    PyMem_Free(s.nodes);
    PyMem_Free(s.dists);
    PyBuffer_Release(&chars);
    PyBuffer_Release(&label);
    PyBuffer_Release(&first_child);
    PyBuffer_Release(&query);
    return result;
}

static PyMethodDef methods[] = {
    {"matches", matches, METH_VARARGS,
     "matches(chars, wide, label, first_child, query, errors) -> (int32 nodes, int8 "
     "distances) as bytes: Trie.matches, depth first."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "filbert.suggest._fuzzy",
    "Fuzzy prefix search of the suggestion trie.", -1, methods,
};

PyMODINIT_FUNC PyInit__fuzzy(void) { return PyModule_Create(&module); }
