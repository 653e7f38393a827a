/* grams(units): the common grams of a word sequence, as one space-separated str.

   `units` are words separated by spaces (runs of them count as one), a common one marked
   by a leading MARK. For each pair of neighbouring units, "a_b" (marks left out) when both
   are common, else FILLER, one for a run of such pairs: the index's grams analyzer drops
   the filler but keeps its position, so grams of neighbouring pairs are neighbours and
   grams apart stay apart. (A filler a pair would tell exactly how far apart they are, at
   the cost of indexing a token for every word of the page.) Pages have thousands of words:
   splitting them into str objects and pairing them in Python cost more than analyzing the
   page. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MARK 0x01
#define JOINER '_'
#define FILLER '-'

typedef struct {
    Py_ssize_t start, end; /* the unit without its mark */
    Py_UCS4 most;          /* its largest character */
    int common;
} Unit;

/* The units of text, into a new array (*count of them); NULL when out of memory. */
static Unit *split_units(int kind, const void *data, Py_ssize_t n, Py_ssize_t *count) {
    Unit *units = PyMem_Malloc(sizeof(Unit) * (n / 2 + 1));
    if (units == NULL) {
        return NULL;
    }
    Py_ssize_t found = 0, i = 0;
    while (i < n) {
        while (i < n && PyUnicode_READ(kind, data, i) == ' ') {
            i++;
        }
        if (i == n) {
            break;
        }
        Unit unit = {i, i, 0, 0};
        if (PyUnicode_READ(kind, data, i) == MARK) {
            unit.common = 1;
            unit.start = ++i;
        }
        Py_UCS4 c;
        while (i < n && (c = PyUnicode_READ(kind, data, i)) != ' ') {
            if (c > unit.most) {
                unit.most = c;
            }
            i++;
        }
        unit.end = i;
        units[found++] = unit;
    }
    *count = found;
    return units;
}

static int is_gram(const Unit *units, Py_ssize_t i) {
    return units[i].common && units[i + 1].common;
}

static PyObject *grams(PyObject *module, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        return PyErr_Format(PyExc_TypeError, "grams() takes a str, not %.100s",
                            Py_TYPE(text)->tp_name);
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t count;
    Unit *units = split_units(kind, data, PyUnicode_GET_LENGTH(text), &count);
    if (units == NULL) {
        return PyErr_NoMemory();
    }
    Py_ssize_t length = 0;
    Py_UCS4 most = 127; /* the result's largest character: str must be in its compact kind */
    Py_ssize_t tokens = 0;
    for (Py_ssize_t i = 0; i + 1 < count; i++) {
        if (is_gram(units, i)) {
            length += units[i].end - units[i].start + 1 + units[i + 1].end - units[i + 1].start;
            most = Py_MAX(most, Py_MAX(units[i].most, units[i + 1].most));
        } else if (i == 0 || is_gram(units, i - 1)) {
            length += 1;
        } else {
            continue; /* the run's filler is out already */
        }
        tokens++;
    }
    length += tokens > 0 ? tokens - 1 : 0; /* the spaces between them */
    PyObject *out = PyUnicode_New(length, most);
    if (out == NULL) {
        PyMem_Free(units);
        return NULL;
    }
    int out_kind = PyUnicode_KIND(out);
    void *out_data = PyUnicode_DATA(out);
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i + 1 < count; i++) {
        int gram = is_gram(units, i);
        if (!gram && i > 0 && !is_gram(units, i - 1)) {
            continue;
        }
        if (at > 0) {
            PyUnicode_WRITE(out_kind, out_data, at++, ' ');
        }
        if (gram) {
            for (Py_ssize_t j = units[i].start; j < units[i].end; j++) {
                PyUnicode_WRITE(out_kind, out_data, at++, PyUnicode_READ(kind, data, j));
            }
            PyUnicode_WRITE(out_kind, out_data, at++, JOINER);
            for (Py_ssize_t j = units[i + 1].start; j < units[i + 1].end; j++) {
                PyUnicode_WRITE(out_kind, out_data, at++, PyUnicode_READ(kind, data, j));
            }
        } else {
            PyUnicode_WRITE(out_kind, out_data, at++, FILLER);
        }
    }
    PyMem_Free(units);
    return out;
}

static PyMethodDef methods[] = {
    {"grams", grams, METH_O,
     "grams(units) -> str: 'a_b' for neighbours both marked common, '-' for a run of others."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_grams", NULL, -1, methods};

PyMODINIT_FUNC PyInit__grams(void) { return PyModule_Create(&module); }
