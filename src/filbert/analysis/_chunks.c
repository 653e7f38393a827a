/* Chunks(compute, longest): an analyzer's memo of chunks (runs of non-space characters, as
   str.split() finds them) → compute(chunk), their marked tokens.

   tokens(text, limit): the values of the text's chunks, joined by spaces (empty ones left
   out), each computed on first sight and kept when the chunk has at most `longest`
   characters. A memo that reaches `limit` entries starts again empty: bounded memory.

   A chunk is looked up by hashing its characters where they are in the text, so a chunk
   seen before costs no object: str.split() and a dict made a str of every chunk, which
   was half of the time it took to analyze a page. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    Py_uhash_t hash;
    PyObject *key; /* NULL: an empty slot */
    PyObject *value;
} Entry;

typedef struct {
    PyObject_HEAD
    PyObject *compute;
    Py_ssize_t longest;
    Entry *entries;
    size_t size; /* a power of two */
    size_t used;
} Chunks;

static Py_uhash_t hash_of(int kind, const void *data, Py_ssize_t start, Py_ssize_t end) {
    Py_uhash_t hash = 14695981039346656037ull; /* FNV-1a over the code points */
    for (Py_ssize_t i = start; i < end; i++) {
        hash = (hash ^ PyUnicode_READ(kind, data, i)) * 1099511628211ull;
    }
    return hash;
}

static int same(PyObject *key, int kind, const void *data, Py_ssize_t start, Py_ssize_t end) {
    if (PyUnicode_GET_LENGTH(key) != end - start) {
        return 0;
    }
    int key_kind = PyUnicode_KIND(key);
    const void *key_data = PyUnicode_DATA(key);
    for (Py_ssize_t i = 0; i < end - start; i++) {
        if (PyUnicode_READ(key_kind, key_data, i) != PyUnicode_READ(kind, data, start + i)) {
            return 0;
        }
    }
    return 1;
}

/* The slot of the chunk text[start:end]: its entry, or the empty slot it would take. */
static Entry *find(Chunks *self, Py_uhash_t hash, int kind, const void *data, Py_ssize_t start,
                   Py_ssize_t end) {
    size_t mask = self->size - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        Entry *entry = &self->entries[i];
        if (entry->key == NULL ||
            (entry->hash == hash && same(entry->key, kind, data, start, end))) {
            return entry;
        }
    }
}

static void clear_entries(Chunks *self) {
    for (size_t i = 0; i < self->size; i++) {
        Py_CLEAR(self->entries[i].key);
        Py_CLEAR(self->entries[i].value);
    }
    self->used = 0;
}

/* Twice the slots, the entries moved over; -1 when out of memory. */
static int grow(Chunks *self) {
    size_t size = self->size * 2;
    Entry *entries = PyMem_Calloc(size, sizeof(Entry));
    if (entries == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < self->size; i++) {
        Entry *old = &self->entries[i];
        if (old->key != NULL) {
            size_t j = old->hash & (size - 1);
            while (entries[j].key != NULL) {
                j = (j + 1) & (size - 1);
            }
            entries[j] = *old;
        }
    }
    PyMem_Free(self->entries);
    self->entries = entries;
    self->size = size;
    return 0;
}

/* compute(text[start:end]), kept if the chunk is short enough; a new reference. */
static PyObject *computed(Chunks *self, PyObject *text, Py_uhash_t hash, Py_ssize_t start,
                          Py_ssize_t end, Py_ssize_t limit) {
    PyObject *chunk = PyUnicode_Substring(text, start, end);
    if (chunk == NULL) {
        return NULL;
    }
    PyObject *value = PyObject_CallOneArg(self->compute, chunk);
    if (value != NULL && !PyUnicode_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "Chunks: compute() must return a str");
        Py_CLEAR(value);
    }
    if (value == NULL || end - start > self->longest) {
        Py_DECREF(chunk);
        return value;
    }
    if ((Py_ssize_t)self->used >= limit) {
        clear_entries(self);
    }
    if ((self->used + 1) * 3 >= self->size * 2 && grow(self) < 0) {
        Py_DECREF(chunk);
        Py_DECREF(value);
        return NULL;
    }
    /* found again: compute() may have run Python code that changed the memo */
    Entry *entry = find(self, hash, PyUnicode_KIND(text), PyUnicode_DATA(text), start, end);
    if (entry->key == NULL) {
        entry->hash = hash;
        entry->key = chunk;
        entry->value = Py_NewRef(value);
        self->used++;
    } else {
        Py_DECREF(chunk);
    }
    return value;
}

static PyObject *tokens(Chunks *self, PyObject *args) {
    PyObject *text;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "Un:tokens", &text, &limit)) {
        return NULL;
    }
    PyObject *found = PyList_New(0);
    if (found == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0;
    while (i < n) {
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        while (i < n && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i))) {
            i++;
        }
        if (i == n) {
            break;
        }
        Py_ssize_t start = i;
        while (i < n && !Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i))) {
            i++;
        }
        Py_uhash_t hash = hash_of(kind, data, start, i);
        Entry *entry = find(self, hash, kind, data, start, i);
        PyObject *value = entry->key != NULL ? Py_NewRef(entry->value)
                                             : computed(self, text, hash, start, i, limit);
        if (value == NULL) {
            Py_DECREF(found);
            return NULL;
        }
        int failed = PyUnicode_GET_LENGTH(value) > 0 && PyList_Append(found, value) < 0;
        Py_DECREF(value);
        if (failed) {
            Py_DECREF(found);
            return NULL;
        }
    }
    PyObject *space = PyUnicode_FromOrdinal(' ');
    PyObject *joined = space == NULL ? NULL : PyUnicode_Join(space, found);
    Py_XDECREF(space);
    Py_DECREF(found);
    return joined;
}

static PyObject *chunks_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *compute;
    Py_ssize_t longest;
    static char *names[] = {"compute", "longest", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "On:Chunks", names, &compute, &longest)) {
        return NULL;
    }
    if (!PyCallable_Check(compute)) {
        PyErr_SetString(PyExc_TypeError, "Chunks: compute must be callable");
        return NULL;
    }
    Chunks *self = (Chunks *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->entries = PyMem_Calloc(64, sizeof(Entry));
    if (self->entries == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->size = 64;
    self->compute = Py_NewRef(compute);
    self->longest = longest;
    return (PyObject *)self;
}

static int chunks_traverse(Chunks *self, visitproc visit, void *arg) {
    Py_VISIT(self->compute);
    for (size_t i = 0; i < self->size; i++) {
        Py_VISIT(self->entries[i].key);
        Py_VISIT(self->entries[i].value);
    }
    return 0;
}

static int chunks_clear(Chunks *self) {
    Py_CLEAR(self->compute);
    if (self->entries != NULL) {
        clear_entries(self);
    }
    return 0;
}

static void chunks_dealloc(Chunks *self) {
    PyObject_GC_UnTrack(self);
    chunks_clear(self);
    PyMem_Free(self->entries);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t chunks_length(Chunks *self) { return (Py_ssize_t)self->used; }

static PyMethodDef chunks_methods[] = {
    {"tokens", (PyCFunction)tokens, METH_VARARGS,
     "tokens(text, limit) -> str: the values of the text's chunks, joined by spaces."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods chunks_sequence = {.sq_length = (lenfunc)chunks_length};

static PyTypeObject ChunksType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "filbert.analysis._chunks.Chunks",
    .tp_basicsize = sizeof(Chunks),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Chunks(compute, longest): a memo of text chunks → compute(chunk).",
    .tp_new = chunks_new,
    .tp_dealloc = (destructor)chunks_dealloc,
    .tp_traverse = (traverseproc)chunks_traverse,
    .tp_clear = (inquiry)chunks_clear,
    .tp_methods = chunks_methods,
    .tp_as_sequence = &chunks_sequence,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_chunks", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__chunks(void) {
    if (PyType_Ready(&ChunksType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddObjectRef(m, "Chunks", (PyObject *)&ChunksType) < 0) {
        Py_CLEAR(m);
    }
    return m;
}
