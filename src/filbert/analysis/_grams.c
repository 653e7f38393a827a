/* split(tokens, grams): a text's terms and, if `grams`, its common grams, from its tokens.

   `tokens` are separated by spaces (runs of them count as one). A token is a term, or a
   marked one: STOP + a stop word (common, no term), COMMON + a term of a common word, or
   NOTHING (no term, not common: a word too long to index). The terms are the plain and
   COMMON tokens, space-separated. The grams: for each pair of neighbouring tokens, "a_b"
   (marks left out) when both are common, else FILLER, one for a run of such pairs: the
   index's grams analyzer drops the filler but keeps its position, so grams of neighbouring
   pairs are neighbours and grams apart stay apart. (A filler a pair would tell how far
   apart, at the cost of a token for every word of the page.) One pass over a page's
   tokens gives both: the analysis caches each chunk's tokens, and splitting them into str
   objects to pair them in Python cost as much as analyzing the page.

   distinct(terms): the space-separated terms, each once, in order of first appearance (for
   an index field that keeps no counts or positions; in Python, splitting a page's terms
   into str objects to drop repeats costs more than indexing them).

   tally(texts, counts): for each text, its runs of letters, lower-cased (ё as е), each
   once: counts[word] += 1. The pages of each word, for the index's vocabulary (a regex
   split and a hash aggregation in Arrow cost ten times as much). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define STOP 0x01
#define NOTHING 0x02
#define COMMON 0x03
#define JOINER '_'
#define FILLER '-'

typedef struct {
    Py_ssize_t start, end; /* the token without its mark */
    Py_UCS4 most;          /* its largest character */
    int common, term;
} Token;

/* The tokens of text, into a new array (*count of them); NULL when out of memory. */
static Token *split_tokens(int kind, const void *data, Py_ssize_t n, Py_ssize_t *count) {
    Token *tokens = PyMem_Malloc(sizeof(Token) * (n / 2 + 1));
    if (tokens == NULL) {
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
        Token token = {i, i, 0, 0, 1};
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c == STOP || c == NOTHING || c == COMMON) {
            token.common = c != NOTHING;
            token.term = c == COMMON;
            token.start = ++i;
        }
        while (i < n && (c = PyUnicode_READ(kind, data, i)) != ' ') {
            token.most = Py_MAX(token.most, c);
            i++;
        }
        token.end = i;
        tokens[found++] = token;
    }
    *count = found;
    return tokens;
}

static int is_gram(const Token *tokens, Py_ssize_t i) {
    return tokens[i].common && tokens[i + 1].common;
}

static Py_ssize_t width(const Token *token) { return token->end - token->start; }

/* Appends the token (without its mark) to out at *at. */
static void copy(const Token *token, int kind, const void *data, PyObject *out,
                 Py_ssize_t *at) {
    int out_kind = PyUnicode_KIND(out);
    void *out_data = PyUnicode_DATA(out);
    for (Py_ssize_t j = token->start; j < token->end; j++) {
        PyUnicode_WRITE(out_kind, out_data, (*at)++, PyUnicode_READ(kind, data, j));
    }
}

static PyObject *terms_of(const Token *tokens, Py_ssize_t count, int kind, const void *data) {
    Py_ssize_t length = 0, terms = 0;
    Py_UCS4 most = 127; /* the result's largest character: a str must be in its compact kind */
    for (Py_ssize_t i = 0; i < count; i++) {
        if (tokens[i].term) {
            length += width(&tokens[i]);
            most = Py_MAX(most, tokens[i].most);
            terms++;
        }
    }
    PyObject *out = PyUnicode_New(length + (terms > 0 ? terms - 1 : 0), most);
    if (out == NULL) {
        return NULL;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (tokens[i].term) {
            if (at > 0) {
                PyUnicode_WRITE(PyUnicode_KIND(out), PyUnicode_DATA(out), at++, ' ');
            }
            copy(&tokens[i], kind, data, out, &at);
        }
    }
    return out;
}

static PyObject *grams_of(const Token *tokens, Py_ssize_t count, int kind, const void *data) {
    Py_ssize_t length = 0, written = 0;
    Py_UCS4 most = 127;
    for (Py_ssize_t i = 0; i + 1 < count; i++) {
        if (is_gram(tokens, i)) {
            length += width(&tokens[i]) + 1 + width(&tokens[i + 1]);
            most = Py_MAX(most, Py_MAX(tokens[i].most, tokens[i + 1].most));
        } else if (i == 0 || is_gram(tokens, i - 1)) {
            length += 1;
        } else {
            continue; /* the run's filler is out already */
        }
        written++;
    }
    PyObject *out = PyUnicode_New(length + (written > 0 ? written - 1 : 0), most);
    if (out == NULL) {
        return NULL;
    }
    int out_kind = PyUnicode_KIND(out);
    void *out_data = PyUnicode_DATA(out);
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i + 1 < count; i++) {
        int gram = is_gram(tokens, i);
        if (!gram && i > 0 && !is_gram(tokens, i - 1)) {
            continue;
        }
        if (at > 0) {
            PyUnicode_WRITE(out_kind, out_data, at++, ' ');
        }
        if (gram) {
            copy(&tokens[i], kind, data, out, &at);
            PyUnicode_WRITE(out_kind, out_data, at++, JOINER);
            copy(&tokens[i + 1], kind, data, out, &at);
        } else {
            PyUnicode_WRITE(out_kind, out_data, at++, FILLER);
        }
    }
    return out;
}

static PyObject *split(PyObject *module, PyObject *args) {
    PyObject *text;
    int with_grams;
    if (!PyArg_ParseTuple(args, "Up:split", &text, &with_grams)) {
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t count;
    Token *tokens = split_tokens(kind, data, PyUnicode_GET_LENGTH(text), &count);
    if (tokens == NULL) {
        return PyErr_NoMemory();
    }
    PyObject *terms = terms_of(tokens, count, kind, data);
    PyObject *grams = terms == NULL  ? NULL
                      : with_grams ? grams_of(tokens, count, kind, data)
                                   : PyUnicode_New(0, 0);
    PyMem_Free(tokens);
    if (grams == NULL) {
        Py_XDECREF(terms);
        return NULL;
    }
    return Py_BuildValue("(NN)", terms, grams);
}

static Py_hash_t hash_of(const Token *token, int kind, const void *data) {
    Py_uhash_t hash = 2166136261u; /* FNV-1a over the code points */
    for (Py_ssize_t j = token->start; j < token->end; j++) {
        hash = (hash ^ PyUnicode_READ(kind, data, j)) * 16777619u;
    }
    return (Py_hash_t)hash;
}

static int same(const Token *a, const Token *b, int kind, const void *data) {
    if (width(a) != width(b)) {
        return 0;
    }
    for (Py_ssize_t j = 0; j < width(a); j++) {
        if (PyUnicode_READ(kind, data, a->start + j) != PyUnicode_READ(kind, data, b->start + j)) {
            return 0;
        }
    }
    return 1;
}

/* Clears the term flag of every token that repeats an earlier one (open addressing). */
static int drop_repeats(Token *tokens, Py_ssize_t count, int kind, const void *data) {
    size_t size = 16;
    while (size < 2 * (size_t)count) {
        size *= 2;
    }
    Py_ssize_t *slots = PyMem_Malloc(sizeof(Py_ssize_t) * size);
    if (slots == NULL) {
        return -1;
    }
    for (size_t k = 0; k < size; k++) {
        slots[k] = -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        size_t k = (size_t)hash_of(&tokens[i], kind, data) & (size - 1);
        while (slots[k] >= 0 && !same(&tokens[slots[k]], &tokens[i], kind, data)) {
            k = (k + 1) & (size - 1);
        }
        if (slots[k] >= 0) {
            tokens[i].term = 0;
        } else {
            slots[k] = i;
        }
    }
    PyMem_Free(slots);
    return 0;
}

static PyObject *distinct(PyObject *module, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "distinct() takes a str");
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t count;
    Token *tokens = split_tokens(kind, data, PyUnicode_GET_LENGTH(text), &count);
    if (tokens == NULL || drop_repeats(tokens, count, kind, data) < 0) {
        PyMem_Free(tokens);
        return PyErr_NoMemory();
    }
    PyObject *terms = terms_of(tokens, count, kind, data);
    PyMem_Free(tokens);
    return terms;
}

/* The distinct words of a tally: their letters in one pool, and the pages of each. */
typedef struct {
    Py_uhash_t hash;
    Py_ssize_t start, length; /* in the pool */
    long pages;
    Py_ssize_t last; /* the last text counted: each word once a text */
} Word;

typedef struct {
    Word *words; /* open addressing; length 0: an empty slot */
    size_t size, used;
    Py_UCS4 *pool;
    Py_ssize_t pool_used, pool_size;
} Tally;

static Word *slot_of(Tally *t, Py_uhash_t hash, const Py_UCS4 *word, Py_ssize_t length) {
    size_t mask = t->size - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        Word *w = &t->words[i];
        if (w->length == 0 || (w->hash == hash && w->length == length &&
                               memcmp(t->pool + w->start, word, length * sizeof(Py_UCS4)) == 0)) {
            return w;
        }
    }
}

static int tally_grow(Tally *t) {
    size_t size = t->size * 2;
    Word *words = PyMem_Calloc(size, sizeof(Word));
    if (words == NULL) {
        return -1;
    }
    for (size_t i = 0; i < t->size; i++) {
        if (t->words[i].length) {
            size_t j = t->words[i].hash & (size - 1);
            while (words[j].length) {
                j = (j + 1) & (size - 1);
            }
            words[j] = t->words[i];
        }
    }
    PyMem_Free(t->words);
    t->words = words;
    t->size = size;
    return 0;
}

/* Counts the word (once for text number `text`); -1 when out of memory. */
static int tally_word(Tally *t, const Py_UCS4 *word, Py_ssize_t length, Py_ssize_t text) {
    Py_uhash_t hash = 14695981039346656037ull; /* FNV-1a over the code points */
    for (Py_ssize_t i = 0; i < length; i++) {
        hash = (hash ^ word[i]) * 1099511628211ull;
    }
    Word *w = slot_of(t, hash, word, length);
    if (w->length) {
        if (w->last != text) {
            w->pages++;
            w->last = text;
        }
        return 0;
    }
    if (t->pool_used + length > t->pool_size) {
        Py_ssize_t size = Py_MAX(t->pool_size * 2, t->pool_used + length);
        Py_UCS4 *pool = PyMem_Realloc(t->pool, size * sizeof(Py_UCS4));
        if (pool == NULL) {
            return -1;
        }
        t->pool = pool;
        t->pool_size = size;
    }
    memcpy(t->pool + t->pool_used, word, length * sizeof(Py_UCS4));
    *w = (Word){hash, t->pool_used, length, 1, text};
    t->pool_used += length;
    return ++t->used * 3 >= t->size * 2 ? tally_grow(t) : 0;
}

/* Counts the words of a text: its runs of letters, lower-cased (ё as е). */
static int tally_text(Tally *t, PyObject *text, Py_ssize_t number, Py_UCS4 **word,
                      Py_ssize_t *room) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), length = 0;
    for (Py_ssize_t i = 0; i <= n; i++) {
        Py_UCS4 c = i < n ? PyUnicode_READ(kind, data, i) : ' ';
        if (Py_UNICODE_ISALPHA(c)) {
            if (length == *room) {
                Py_UCS4 *bigger = PyMem_Realloc(*word, 2 * *room * sizeof(Py_UCS4));
                if (bigger == NULL) {
                    return -1;
                }
                *word = bigger;
                *room *= 2;
            }
            c = Py_UNICODE_TOLOWER(c);
            (*word)[length++] = c == 0x451 ? 0x435 : c; /* ё as е */
        } else if (length > 0) {
            if (tally_word(t, *word, length, number) < 0) {
                return -1;
            }
            length = 0;
        }
    }
    return 0;
}

/* counts[word] += its pages, for each word of the tally; -1 on error. */
static int tally_into(Tally *t, PyObject *counts) {
    for (size_t i = 0; i < t->size; i++) {
        Word *w = &t->words[i];
        if (!w->length) {
            continue;
        }
        PyObject *word =
            PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, t->pool + w->start, w->length);
        PyObject *before = word == NULL ? NULL : PyDict_GetItemWithError(counts, word);
        long pages = before == NULL ? 0 : PyLong_AsLong(before);
        PyObject *now = word == NULL || PyErr_Occurred() ? NULL : PyLong_FromLong(pages + w->pages);
        int failed = now == NULL || PyDict_SetItem(counts, word, now) < 0;
        Py_XDECREF(now);
        Py_XDECREF(word);
        if (failed) {
            return -1;
        }
    }
    return 0;
}

static PyObject *tally(PyObject *module, PyObject *args) {
    PyObject *texts, *counts;
    if (!PyArg_ParseTuple(args, "OO!:tally", &texts, &PyDict_Type, &counts)) {
        return NULL;
    }
    PyObject *iterator = PyObject_GetIter(texts);
    if (iterator == NULL) {
        return NULL;
    }
    Tally t = {PyMem_Calloc(1024, sizeof(Word)), 1024, 0, NULL, 0, 0};
    Py_ssize_t room = 64, number = 0;
    Py_UCS4 *word = PyMem_Malloc(room * sizeof(Py_UCS4));
    int failed = t.words == NULL || word == NULL;
    if (failed) {
        PyErr_NoMemory();
    }
    PyObject *text;
    while (!failed && (text = PyIter_Next(iterator)) != NULL) {
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "tally() takes texts of str");
            failed = 1;
        } else if (tally_text(&t, text, number++, &word, &room) < 0) {
            PyErr_NoMemory();
            failed = 1;
        }
        Py_DECREF(text);
    }
    failed = failed || PyErr_Occurred() || tally_into(&t, counts) < 0;
    Py_DECREF(iterator);
    PyMem_Free(word);
    PyMem_Free(t.words);
    PyMem_Free(t.pool);
    if (failed) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"distinct", distinct, METH_O, "distinct(terms) -> str: each space-separated term once."},
    {"tally", tally, METH_VARARGS,
     "tally(texts, counts): counts[word] += 1 for each word of each text, once a text."},
    {"split", split, METH_VARARGS,
     "split(tokens, grams) -> (terms, grams): the terms of marked tokens, and their grams."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_grams", NULL, -1, methods};

PyMODINIT_FUNC PyInit__grams(void) { return PyModule_Create(&module); }
