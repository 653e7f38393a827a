/* grams(units, common): the common grams of a word sequence, as one space-separated str.

   For each pair of neighbouring units, "a_b" when either is in `common` (a set of str),
   else FILLER: the index's grams analyzer drops the filler but keeps its position, so the
   gram of the pair (i, i + 1) sits at position i and a phrase's grams match at their
   offsets. Pages have thousands of words: in Python this loop cost 0.2 ms a page. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define JOINER '_'
#define FILLER '-'

static PyObject *grams(PyObject *module, PyObject *args) {
    PyObject *units, *common;
    if (!PyArg_ParseTuple(args, "O!O:grams", &PyList_Type, &units, &common)) {
        return NULL;
    }
    if (!PyAnySet_Check(common)) {
        return PyErr_Format(PyExc_TypeError, "grams() takes a set, not %.100s",
                            Py_TYPE(common)->tp_name);
    }
    Py_ssize_t n = PyList_GET_SIZE(units);
    if (n < 2) {
        return PyUnicode_New(0, 0);
    }
    char *is_common = PyMem_Malloc(n);
    if (is_common == NULL) {
        return PyErr_NoMemory();
    }
    Py_ssize_t length = 0;
    Py_UCS4 maxchar = 127;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *unit = PyList_GET_ITEM(units, i);
        int found = PyUnicode_Check(unit) ? PySet_Contains(common, unit) : -1;
        if (found < 0) {
            PyMem_Free(is_common);
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "grams() takes a list of str");
            }
            return NULL;
        }
        is_common[i] = (char)found;
    }
    for (Py_ssize_t i = 0; i + 1 < n; i++) {
        if (is_common[i] || is_common[i + 1]) {
            PyObject *a = PyList_GET_ITEM(units, i), *b = PyList_GET_ITEM(units, i + 1);
            length += PyUnicode_GET_LENGTH(a) + 1 + PyUnicode_GET_LENGTH(b);
            Py_UCS4 most = PyUnicode_MAX_CHAR_VALUE(a);
            if (PyUnicode_MAX_CHAR_VALUE(b) > most) {
                most = PyUnicode_MAX_CHAR_VALUE(b);
            }
            if (most > maxchar) {
                maxchar = most;
            }
        } else {
            length += 1;
        }
        length += i + 2 < n;  /* the space after it */
    }
    PyObject *out = PyUnicode_New(length, maxchar);
    if (out == NULL) {
        PyMem_Free(is_common);
        return NULL;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i + 1 < n; i++) {
        if (is_common[i] || is_common[i + 1]) {
            PyObject *a = PyList_GET_ITEM(units, i), *b = PyList_GET_ITEM(units, i + 1);
            Py_ssize_t la = PyUnicode_GET_LENGTH(a), lb = PyUnicode_GET_LENGTH(b);
            PyUnicode_CopyCharacters(out, at, a, 0, la);
            at += la;
            PyUnicode_WriteChar(out, at++, JOINER);
            PyUnicode_CopyCharacters(out, at, b, 0, lb);
            at += lb;
        } else {
            PyUnicode_WriteChar(out, at++, FILLER);
        }
        if (i + 2 < n) {
            PyUnicode_WriteChar(out, at++, ' ');
        }
    }
    PyMem_Free(is_common);
    return out;
}

static PyMethodDef methods[] = {
    {"grams", grams, METH_VARARGS,
     "grams(units, common) -> str: 'a_b' for neighbours with a common unit, else '-'."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_grams", NULL, -1, methods};

PyMODINIT_FUNC PyInit__grams(void) { return PyModule_Create(&module); }
