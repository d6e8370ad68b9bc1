/* Compiled readers of training log lines: tprimat.plugins.megatron_core.compiled.
 *
 * Each function here has a Python reader it stands for, used where this module is not
 * built and tested against it (tests/plugins/megatron_core/test_compiled.py):
 *
 * read_items(data, size, items): the figures at fixed byte offsets of lines of one
 *   length, as columns (the fast lane's Shape.texts and _read).  The lines of one shape of
 *   a dense training log hold each figure at the same offsets, so a run of them is read by
 *   slicing each figure out of every line and reading it as float() or int() reads it.  A
 *   figure whose text is the same as in the line before is the same object.  A text of
 *   the characters of a plain number (digits, a sign, a point, an exponent) is read by
 *   PyOS_string_to_double, as float() reads it (a decimal whose digits and power of ten
 *   are exact doubles by one correctly rounded operation, as strtod's own fast path does),
 *   or for up to 18 digits by the digits themselves, as int() reads them; any other text
 *   is handed to float() or int() itself.
 *   So every value is what the Python reader gives.
 *
 * trigger_spans(chunk, triggers): where the lines of a chunk that hold any of the trigger
 *   strings start and end (after their newline), in order, each line once (the stream's
 *   _trigger_lines).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

enum { KIND_BYTES = 0, KIND_FLOAT = 1, KIND_INT = 2 };

/* The longest text read without a call to float(): longer ones go by float() itself. */
#define FLOAT_TEXT_MAX 63
/* The most digits of an int read here: below 10**18, within a long long. */
#define INT_DIGITS_MAX 18

static PyObject *
call_on_text(PyObject *type, const char *text, Py_ssize_t length)
{
    PyObject *data = PyBytes_FromStringAndSize(text, length);
    if (data == NULL) {
        return NULL;
    }
    PyObject *value = PyObject_CallOneArg(type, data);
    Py_DECREF(data);
    return value;
}

/* The powers of ten a double holds exactly. */
static const double EXACT_TENS[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
#define EXACT_TENS_MAX 22
/* Digits above 2**53 are not all exact in a double. */
#define EXACT_DIGITS_MAX (1ULL << 53)

/* A decimal [sign] digits [. digits] [e|E [sign] digits] whose digits make an integer of at
 * most 2**53 and whose power of ten is at most 22 either way: the integer and the power are
 * exact doubles, so one multiplication or division rounds the value correctly, as float()
 * (correctly rounded too) reads it.  1 and *value set, or 0: the text is read otherwise. */
static int
read_exact_decimal(const char *text, Py_ssize_t length, double *value)
{
    Py_ssize_t at = 0;
    int negative = 0;
    if (at < length && (text[at] == '-' || text[at] == '+')) {
        negative = text[at] == '-';
        at++;
    }
    unsigned long long digits = 0;
    int places = 0, seen = 0, point = 0;
    for (; at < length; at++) {
        char c = text[at];
        if (c >= '0' && c <= '9') {
            if (digits > (EXACT_DIGITS_MAX - 9) / 10) {
                return 0;
            }
            digits = digits * 10 + (unsigned long long)(c - '0');
            places -= point;
            seen = 1;
        }
        else if (c == '.' && !point) {
            point = 1;
        }
        else {
            break;
        }
    }
    if (!seen) {
        return 0;
    }
    if (at < length) {
        if (text[at] != 'e' && text[at] != 'E') {
            return 0;
        }
        at++;
        int minus = 0, exponent = 0, exponent_digits = 0;
        if (at < length && (text[at] == '-' || text[at] == '+')) {
            minus = text[at] == '-';
            at++;
        }
        for (; at < length; at++) {
            char c = text[at];
            if (c < '0' || c > '9' || ++exponent_digits > 4) {
                return 0;
            }
            exponent = exponent * 10 + (c - '0');
        }
        if (!exponent_digits) {
            return 0;
        }
        places += minus ? -exponent : exponent;
    }
    if (places < -EXACT_TENS_MAX || places > EXACT_TENS_MAX) {
        return 0;
    }
    double found = (double)digits;
    found = places < 0 ? found / EXACT_TENS[-places] : found * EXACT_TENS[places];
    *value = negative ? -found : found;
    return 1;
}

static PyObject *
read_float(const char *text, Py_ssize_t length)
{
    double exact;
    if (read_exact_decimal(text, length, &exact)) {
        return PyFloat_FromDouble(exact);
    }
    char buffer[FLOAT_TEXT_MAX + 1];
    if (length == 0 || length > FLOAT_TEXT_MAX) {
        return call_on_text((PyObject *)&PyFloat_Type, text, length);
    }
    for (Py_ssize_t at = 0; at < length; at++) {
        char c = text[at];
        if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) {
            return call_on_text((PyObject *)&PyFloat_Type, text, length);
        }
    }
    memcpy(buffer, text, length);
    buffer[length] = '\0';
    char *end = NULL;
    double value = PyOS_string_to_double(buffer, &end, NULL);
    if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return call_on_text((PyObject *)&PyFloat_Type, text, length);
    }
    if (end != buffer + length) {
        return call_on_text((PyObject *)&PyFloat_Type, text, length);
    }
    return PyFloat_FromDouble(value);
}

static PyObject *
read_int(const char *text, Py_ssize_t length)
{
    Py_ssize_t at = 0;
    int negative = 0;
    if (length > 0 && (text[0] == '-' || text[0] == '+')) {
        negative = text[0] == '-';
        at = 1;
    }
    if (length - at < 1 || length - at > INT_DIGITS_MAX) {
        return call_on_text((PyObject *)&PyLong_Type, text, length);
    }
    long long value = 0;
    for (; at < length; at++) {
        char c = text[at];
        if (c < '0' || c > '9') {
            return call_on_text((PyObject *)&PyLong_Type, text, length);
        }
        value = value * 10 + (c - '0');
    }
    return PyLong_FromLongLong(negative ? -value : value);
}

static PyObject *
read_text(int kind, const char *text, Py_ssize_t length)
{
    if (kind == KIND_FLOAT) {
        return read_float(text, length);
    }
    if (kind == KIND_INT) {
        return read_int(text, length);
    }
    return PyBytes_FromStringAndSize(text, length);
}

/* One item's column: its text in each of the `count` lines of `size` bytes at `data`. */
static PyObject *
read_column(const char *data, Py_ssize_t size, Py_ssize_t count, Py_ssize_t start, Py_ssize_t stop, int kind)
{
    PyObject *column = PyList_New(count);
    if (column == NULL) {
        return NULL;
    }
    Py_ssize_t length = stop - start;
    PyObject *previous = NULL;
    for (Py_ssize_t line = 0; line < count; line++) {
        const char *text = data + line * size + start;
        PyObject *value;
        if (previous != NULL && memcmp(text, text - size, length) == 0) {
            value = Py_NewRef(previous);
        }
        else {
            value = read_text(kind, text, length);
            if (value == NULL) {
                Py_DECREF(column);
                return NULL;
            }
        }
        PyList_SET_ITEM(column, line, value);
        previous = value;
    }
    return column;
}

static int
read_item(PyObject *item, Py_ssize_t size, Py_ssize_t *start, Py_ssize_t *stop, int *kind)
{
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
        PyErr_SetString(PyExc_TypeError, "each item is a tuple (start, stop, kind)");
        return -1;
    }
    *start = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 0));
    *stop = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 1));
    long found = PyLong_AsLong(PyTuple_GET_ITEM(item, 2));
    if (PyErr_Occurred()) {
        return -1;
    }
    if (*start < 0 || *stop < *start || *stop > size) {
        PyErr_SetString(PyExc_ValueError, "an item lies outside the line");
        return -1;
    }
    if (found != KIND_BYTES && found != KIND_FLOAT && found != KIND_INT) {
        PyErr_SetString(PyExc_ValueError, "an item's kind is 0 (bytes), 1 (float) or 2 (int)");
        return -1;
    }
    *kind = (int)found;
    return 0;
}

PyDoc_STRVAR(read_items_doc,
"read_items(data, size, items)\n--\n\n"
"The columns of ``items`` ((start, stop, kind) each; kind 0 bytes, 1 float, 2 int)\n"
"in ``data``, lines of ``size`` bytes each: one list per item, a value per line.");

/* 0 where there are `expected` arguments and the first is bytes; else -1, a TypeError set. */
static int
check_arguments(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t expected, const char *usage)
{
    if (nargs != expected || !PyBytes_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "%s, the first argument bytes", usage);
        return -1;
    }
    return 0;
}

static PyObject *
read_items(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (check_arguments(args, nargs, 3, "read_items(data, size, items)") < 0) {
        return NULL;
    }
    Py_ssize_t size = PyLong_AsSsize_t(args[1]);
    if (size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t total = PyBytes_GET_SIZE(args[0]);
    if (size <= 0 || total % size != 0) {
        PyErr_SetString(PyExc_ValueError, "data is lines of size bytes each");
        return NULL;
    }
    PyObject *items = PySequence_Fast(args[2], "items is a sequence");
    if (items == NULL) {
        return NULL;
    }
    Py_ssize_t number = PySequence_Fast_GET_SIZE(items);
    PyObject *columns = PyList_New(number);
    if (columns == NULL) {
        Py_DECREF(items);
        return NULL;
    }
    const char *data = PyBytes_AS_STRING(args[0]);
    for (Py_ssize_t index = 0; index < number; index++) {
        Py_ssize_t start, stop;
        int kind;
        PyObject *column = NULL;
        if (read_item(PySequence_Fast_GET_ITEM(items, index), size, &start, &stop, &kind) == 0) {
            column = read_column(data, size, total / size, start, stop, kind);
        }
        if (column == NULL) {
            Py_DECREF(columns);
            Py_DECREF(items);
            return NULL;
        }
        PyList_SET_ITEM(columns, index, column);
    }
    Py_DECREF(items);
    return columns;
}

/* A line's start and end, as trigger_spans finds them. */
typedef struct {
    Py_ssize_t start;
    Py_ssize_t end;
} Span;

static int
compare_spans(const void *a, const void *b)
{
    Py_ssize_t x = ((const Span *)a)->start, y = ((const Span *)b)->start;
    return (x > y) - (x < y);
}

/* The last newline of the `length` bytes at `data`, or NULL. */
static const char *
last_newline(const char *data, Py_ssize_t length)
{
#ifdef __GLIBC__
    return memrchr(data, '\n', length);
#else
    for (Py_ssize_t at = length - 1; at >= 0; at--) {
        if (data[at] == '\n') {
            return data + at;
        }
    }
    return NULL;
#endif
}

/* Append the spans of the lines of `data` that hold `trigger`; -1 (memory error) or 0. */
static int
add_trigger_spans(const char *data, Py_ssize_t size, const char *trigger, Py_ssize_t length, Span **spans,
                  Py_ssize_t *count, Py_ssize_t *capacity)
{
    Py_ssize_t searched = 0; /* the lines before this offset are done: it follows a newline, or is 0 */
    const char *found = memmem(data, size, trigger, length);
    while (found != NULL) {
        Py_ssize_t position = found - data;
        const char *newline = memchr(found, '\n', size - position);
        const char *before = last_newline(data + searched, position - searched);
        if (*count == *capacity) {
            Py_ssize_t more = *capacity ? 2 * *capacity : 1024;
            Span *grown = PyMem_Realloc(*spans, more * sizeof(Span));
            if (grown == NULL) {
                return -1;
            }
            *spans = grown;
            *capacity = more;
        }
        (*spans)[*count].start = before != NULL ? before - data + 1 : searched;
        (*spans)[*count].end = newline != NULL ? newline - data + 1 : size;
        (*count)++;
        if (newline == NULL) {
            break;
        }
        searched = newline - data + 1;
        found = memmem(data + searched, size - searched, trigger, length);
    }
    return 0;
}

/* The spans as a list of (start, end) tuples. */
static PyObject *
spans_list(const Span *spans, Py_ssize_t count)
{
    PyObject *list = PyList_New(count);
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t index = 0; index < count; index++) {
        PyObject *span = Py_BuildValue("(nn)", spans[index].start, spans[index].end);
        if (span == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, index, span);
    }
    return list;
}

PyDoc_STRVAR(trigger_spans_doc,
"trigger_spans(chunk, triggers)\n--\n\n"
"Where the lines of ``chunk`` that hold one of ``triggers`` (non-empty bytes) start and end\n"
"(after their newline), as (start, end) tuples in order, each line once.");

static PyObject *
trigger_spans(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (check_arguments(args, nargs, 2, "trigger_spans(chunk, triggers)") < 0) {
        return NULL;
    }
    PyObject *triggers = PySequence_Fast(args[1], "triggers is a sequence");
    if (triggers == NULL) {
        return NULL;
    }
    Py_ssize_t number = PySequence_Fast_GET_SIZE(triggers);
    for (Py_ssize_t index = 0; index < number; index++) {
        PyObject *trigger = PySequence_Fast_GET_ITEM(triggers, index);
        if (!PyBytes_Check(trigger) || PyBytes_GET_SIZE(trigger) == 0) {
            Py_DECREF(triggers);
            PyErr_SetString(PyExc_ValueError, "each trigger is non-empty bytes");
            return NULL;
        }
    }
    const char *data = PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    Span *spans = NULL;
    Py_ssize_t count = 0, capacity = 0;
    for (Py_ssize_t index = 0; index < number; index++) {
        PyObject *trigger = PySequence_Fast_GET_ITEM(triggers, index);
        if (add_trigger_spans(data, size, PyBytes_AS_STRING(trigger), PyBytes_GET_SIZE(trigger), &spans, &count,
                              &capacity) < 0) {
            PyMem_Free(spans);
            Py_DECREF(triggers);
            return PyErr_NoMemory();
        }
    }
    Py_DECREF(triggers);
    if (number > 1 && count > 1) { /* in order, each line once */
        qsort(spans, count, sizeof(Span), compare_spans);
        Py_ssize_t kept = 1;
        for (Py_ssize_t index = 1; index < count; index++) {
            if (spans[index].start != spans[kept - 1].start) {
                spans[kept++] = spans[index];
            }
        }
        count = kept;
    }
    PyObject *list = spans_list(spans, count);
    PyMem_Free(spans);
    return list;
}

static PyMethodDef methods[] = {
    {"read_items", (PyCFunction)(void (*)(void))read_items, METH_FASTCALL, read_items_doc},
    {"trigger_spans", (PyCFunction)(void (*)(void))trigger_spans, METH_FASTCALL, trigger_spans_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_lines",
    "Compiled readers of training log lines (see tprimat.plugins.megatron_core.compiled).",
    0,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__lines(void)
{
    return PyModule_Create(&module);
}
