/* Compiled readers of training log lines: tprimat.plugins.megatron_core.compiled.
 *
 * Each function here has a Python reader it stands for, used where this module is not
 * built and tested against it (tests/plugins/megatron_core/test_compiled.py):
 *
 * read_rows(chunk, spans, index, size, shapes, width, iteration, previous): the figures of a
 *   run of trigger lines of known shapes, as columns in line order (the fast lane's
 *   runrows.rows_in_python).  The lines of one shape (their bytes with every digit "0") of a
 *   dense training log hold each figure at the same offsets, so a line's shape, found by a
 *   hash of its length and a few of its bytes and checked byte for byte, says where each
 *   figure lies and which column it goes to; the run ends before a line of no known shape or
 *   whose iteration is not above the line's before.  A figure whose text is the same as the
 *   column's before is the same object.  A text of the characters of a plain number
 *   (digits, a sign, a point, an exponent) is read by PyOS_string_to_double, as float()
 *   reads it (a decimal whose digits and power of ten are exact doubles by one correctly
 *   rounded operation, as strtod's own fast path does), or for up to 18 digits by the
 *   digits themselves, as int() reads them; any other text is handed to float() or int()
 *   itself.  So every value is what the Python reader gives.
 *
 * line_numbers(chunk, spans, count, offset, before): the stream's number of the line of
 *   each span (runs.line_numbers_in_python), newlines counted by memchr.
 *
 * trigger_spans(chunk, triggers): where the lines of a chunk that hold any of the trigger
 *   strings start and end (after their newline), in order, each line once (the stream's
 *   _trigger_lines).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { KIND_BYTES = 0, KIND_FLOAT = 1, KIND_INT = 2, KIND_STAMP = 3, KIND_COMPACT_STAMP = 4, KINDS = 5 };

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

/* A timestamp's ISO text, as compiled.iso_stamp (KIND_STAMP: "2026-05-07 13:47:47.940885",
 * its space made "T") and compiled.iso_compact_stamp (KIND_COMPACT_STAMP: Primus's
 * "20251202 06:56:28" made "2025-12-02T06:56:28") make it; a text not of ASCII, or too short
 * for the compact form, goes to them. */
static PyObject *
read_stamp(int kind, const char *text, Py_ssize_t length)
{
    int ascii = 1;
    for (Py_ssize_t at = 0; at < length; at++) {
        ascii &= (unsigned char)text[at] < 128;
    }
    if (!ascii || (kind == KIND_COMPACT_STAMP && length < 9)) {
        PyObject *module = PyImport_ImportModule("tprimat.plugins.megatron_core.compiled");
        if (module == NULL) {
            return NULL;
        }
        PyObject *reader = PyObject_GetAttrString(module, kind == KIND_STAMP ? "iso_stamp" : "iso_compact_stamp");
        Py_DECREF(module);
        if (reader == NULL) {
            return NULL;
        }
        PyObject *value = call_on_text(reader, text, length);
        Py_DECREF(reader);
        return value;
    }
    Py_ssize_t size = kind == KIND_STAMP ? length : length + 2;
    PyObject *stamp = PyUnicode_New(size, 127);
    if (stamp == NULL) {
        return NULL;
    }
    char *out = (char *)PyUnicode_1BYTE_DATA(stamp);
    if (kind == KIND_STAMP) {
        for (Py_ssize_t at = 0; at < length; at++) {
            out[at] = text[at] == ' ' ? 'T' : text[at];
        }
    }
    else { /* YYYY MM DD, then T and the time, for the space after the date */
        memcpy(out, text, 4);
        out[4] = '-';
        memcpy(out + 5, text + 4, 2);
        out[7] = '-';
        memcpy(out + 8, text + 6, 2);
        out[10] = 'T';
        memcpy(out + 11, text + 9, length - 9);
    }
    return stamp;
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
    if (kind == KIND_STAMP || kind == KIND_COMPACT_STAMP) {
        return read_stamp(kind, text, length);
    }
    return PyBytes_FromStringAndSize(text, length);
}

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

/* check_arguments, and the second argument (a run's spans) a list. */
static int
check_run_arguments(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t expected, const char *usage)
{
    if (check_arguments(args, nargs, expected, usage) < 0) {
        return -1;
    }
    if (!PyList_Check(args[1])) {
        PyErr_Format(PyExc_TypeError, "%s: spans a list", usage);
        return -1;
    }
    return 0;
}

/* One item of a shape's layout: its bytes in the line, its kind and its column. */
typedef struct {
    Py_ssize_t start;
    Py_ssize_t stop;
    int kind;
    Py_ssize_t column;
} Item;

/* A shape met in this call: its key (the line with every digit "0"), its items, and which
 * of them is the iteration. */
typedef struct {
    PyObject *key;
    Item *items;
    Py_ssize_t count;
    Py_ssize_t iteration;
} Shape;

/* The most shapes one call holds (a run of more is cut there, and the next call goes on),
 * and the size of the table that finds them by a line's hash (twice as many places). */
#define SHAPES_MAX 256
#define PLACES 512

typedef struct {
    Shape shapes[SHAPES_MAX];
    Py_ssize_t count;
    /* Each place: 0 free, else 1 + the index of a shape whose lines have the hash in `hashes`. */
    Py_ssize_t places[PLACES];
    uint64_t hashes[PLACES];
    char *key; /* a line's key, made here */
    Py_ssize_t key_capacity;
} Shapes;

static void
shapes_free(Shapes *shapes)
{
    for (Py_ssize_t index = 0; index < shapes->count; index++) {
        Py_DECREF(shapes->shapes[index].key);
        PyMem_Free(shapes->shapes[index].items);
    }
    PyMem_Free(shapes->key);
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* Eight bytes with every digit made "0", the other bytes as they are. */
static inline uint64_t
digits_zeroed(uint64_t bytes)
{
    uint64_t offset = bytes ^ (0x30 * ONES); /* a digit is now 0 to 9 */
    /* The high bit of each byte of `low` is set where its low seven bits are 10 or more (no
     * carry crosses a byte: 0x7f + 0x76 < 0x100); a digit has neither that bit nor its own. */
    uint64_t low = (offset & ~HIGHS) + (0x76 * ONES);
    uint64_t digits = ~(low | offset) & HIGHS;
    uint64_t mask = (digits >> 7) * 0xff;
    return (bytes & ~mask) | ((0x30 * ONES) & mask);
}

static inline char
digit_zeroed(char c)
{
    return (c >= '0' && c <= '9') ? '0' : c;
}

/* Whether `line` is of the shape `key`: the same bytes, but a digit where the key has "0". */
static int
of_shape(const char *line, Py_ssize_t length, PyObject *key)
{
    if (PyBytes_GET_SIZE(key) != length) {
        return 0;
    }
    const char *shape = PyBytes_AS_STRING(key);
    Py_ssize_t at = 0;
    for (; at + 8 <= length; at += 8) {
        uint64_t bytes, expected;
        memcpy(&bytes, line + at, 8);
        memcpy(&expected, shape + at, 8);
        if (bytes != expected && digits_zeroed(bytes) != expected) {
            return 0;
        }
    }
    for (; at < length; at++) {
        if (digit_zeroed(line[at]) != shape[at]) {
            return 0;
        }
    }
    return 1;
}

/* A hash of the shape of `line`: its length and sixteen of its bytes, digits made "0" (lines
 * of one shape hash alike; lines of others mostly not, and are told apart by of_shape). */
static uint64_t
shape_hash(const char *line, Py_ssize_t length)
{
    uint64_t hash = 1469598103934665603ULL ^ (uint64_t)length;
    for (Py_ssize_t sample = 0; sample < 16 && length > 0; sample++) {
        hash = (hash ^ (unsigned char)digit_zeroed(line[(length - 1) * sample / 15])) * 1099511628211ULL;
    }
    return hash;
}

/* The items of a layout ((start, stop, kind, column) tuples) into `shape`; -1 and an error
 * set where one lies outside a line of `length` bytes, is of no kind, or names no column. */
static int
shape_items(Shape *shape, PyObject *layout, Py_ssize_t length, Py_ssize_t width, Py_ssize_t iteration)
{
    PyObject *items = PySequence_Fast(layout, "a layout is a sequence of items");
    if (items == NULL) {
        return -1;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(items);
    shape->items = PyMem_Calloc(count ? count : 1, sizeof(Item));
    shape->count = count;
    shape->iteration = -1;
    if (shape->items == NULL) {
        Py_DECREF(items);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t index = 0; index < count; index++) {
        PyObject *item = PySequence_Fast_GET_ITEM(items, index);
        Item *found = &shape->items[index];
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 4) {
            PyErr_SetString(PyExc_TypeError, "each item is a tuple (start, stop, kind, column)");
            break;
        }
        found->start = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 0));
        found->stop = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 1));
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(item, 2));
        found->column = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 3));
        if (PyErr_Occurred()) {
            break;
        }
        found->kind = (int)kind;
        if (found->start < 0 || found->stop < found->start || found->stop > length) {
            PyErr_SetString(PyExc_ValueError, "an item lies outside the line");
            break;
        }
        if (kind < 0 || kind >= KINDS) {
            PyErr_SetString(PyExc_ValueError, "an item's kind is 0 (bytes), 1 (float), 2 (int) or 3, 4 (stamps)");
            break;
        }
        if (found->column < 0 || found->column >= width) {
            PyErr_SetString(PyExc_ValueError, "an item's column is not one of the columns");
            break;
        }
        if (found->column == iteration) {
            shape->iteration = index;
        }
    }
    Py_DECREF(items);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (shape->iteration < 0 || shape->items[shape->iteration].kind != KIND_INT) {
        PyErr_SetString(PyExc_ValueError, "a layout reads the iteration column as int");
        return -1;
    }
    return 0;
}

/* The index of the shape of `line` among those met in this call, looked up in `known` (key
 * to an object with a layout) and added when first met; -1 where the line is of no shape
 * there, or SHAPES_MAX are held; -2 and an error set on a failure. */
static Py_ssize_t
shape_of(Shapes *shapes, const char *line, Py_ssize_t length, PyObject *known_shapes, Py_ssize_t width,
         Py_ssize_t iteration)
{
    uint64_t hash = shape_hash(line, length);
    Py_ssize_t place = (Py_ssize_t)(hash % PLACES);
    for (; shapes->places[place]; place = (place + 1) % PLACES) {
        Py_ssize_t index = shapes->places[place] - 1;
        if (shapes->hashes[place] == hash && of_shape(line, length, shapes->shapes[index].key)) {
            return index;
        }
    }
    if (shapes->count == SHAPES_MAX) {
        return -1;
    }
    if (length > shapes->key_capacity) {
        char *grown = PyMem_Realloc(shapes->key, length);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -2;
        }
        shapes->key = grown;
        shapes->key_capacity = length;
    }
    for (Py_ssize_t at = 0; at < length; at++) {
        shapes->key[at] = digit_zeroed(line[at]);
    }
    PyObject *key = PyBytes_FromStringAndSize(shapes->key, length);
    if (key == NULL) {
        return -2;
    }
    PyObject *found = PyDict_GetItemWithError(known_shapes, key);
    if (found == NULL) {
        Py_DECREF(key);
        return PyErr_Occurred() ? -2 : -1;
    }
    PyObject *layout = PyObject_GetAttrString(found, "layout");
    if (layout == NULL) {
        Py_DECREF(key);
        return -2;
    }
    Shape *shape = &shapes->shapes[shapes->count];
    shape->key = key;
    int failed = shape_items(shape, layout, length, width, iteration);
    Py_DECREF(layout);
    if (failed < 0) {
        Py_DECREF(key);
        PyMem_Free(shape->items);
        return -2;
    }
    shapes->places[place] = shapes->count + 1; /* the free place the search ended at */
    shapes->hashes[place] = hash;
    return shapes->count++;
}

/* A column's last value read: the text it was read from, to share the object with a row
 * whose text is the same. */
typedef struct {
    const char *text;
    Py_ssize_t length;
    PyObject *value; /* borrowed from the column */
} Last;

/* Read the items of one line of `shape` into row `row` of `columns`. */
static int
read_row(const Shape *shape, const char *line, PyObject **columns, Py_ssize_t row, Last *last)
{
    for (Py_ssize_t index = 0; index < shape->count; index++) {
        const Item *item = &shape->items[index];
        const char *text = line + item->start;
        Py_ssize_t length = item->stop - item->start;
        Last *before = &last[item->column];
        PyObject *value;
        if (before->value != NULL && before->length == length && memcmp(before->text, text, length) == 0) {
            value = Py_NewRef(before->value);
        }
        else {
            value = read_text(item->kind, text, length);
            if (value == NULL) {
                return -1;
            }
        }
        PyObject *column = columns[item->column];
        PyObject *old = PyList_GET_ITEM(column, row);
        PyList_SET_ITEM(column, row, value);
        Py_DECREF(old);
        before->text = text;
        before->length = length;
        before->value = value;
    }
    return 0;
}

/* Whether the iteration of `line` (of `shape`) is above `*previous`; then `*previous` is it.
 * -1 and an error set where it cannot be read. */
static int
ascends(const Shape *shape, const char *line, long long *previous)
{
    const Item *item = &shape->items[shape->iteration];
    PyObject *value = read_int(line + item->start, item->stop - item->start);
    if (value == NULL) {
        return -1;
    }
    int overflow = 0;
    long long iteration = PyLong_AsLongLongAndOverflow(value, &overflow);
    Py_DECREF(value);
    if (iteration == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow || iteration <= *previous) {
        return 0;
    }
    *previous = iteration;
    return 1;
}

/* `width` lists of `count` Nones each. */
static PyObject *
none_columns(Py_ssize_t width, Py_ssize_t count)
{
    PyObject *columns = PyList_New(width);
    if (columns == NULL) {
        return NULL;
    }
    for (Py_ssize_t index = 0; index < width; index++) {
        PyObject *column = PyList_New(count);
        if (column == NULL) {
            Py_DECREF(columns);
            return NULL;
        }
        for (Py_ssize_t row = 0; row < count; row++) {
            PyList_SET_ITEM(column, row, Py_NewRef(Py_None));
        }
        PyList_SET_ITEM(columns, index, column);
    }
    return columns;
}

/* The span at `index` of `spans` (a list of (start, end) tuples) within a chunk of `size` bytes. */
static int
span_at(PyObject *spans, Py_ssize_t index, Py_ssize_t size, Py_ssize_t *start, Py_ssize_t *end)
{
    PyObject *span = PyList_GET_ITEM(spans, index);
    if (!PyTuple_Check(span) || PyTuple_GET_SIZE(span) != 2) {
        PyErr_SetString(PyExc_TypeError, "each span is a tuple (start, end)");
        return -1;
    }
    *start = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 0));
    *end = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 1));
    if (PyErr_Occurred()) {
        return -1;
    }
    if (*start < 0 || *end < *start || *end > size) {
        PyErr_SetString(PyExc_ValueError, "a span lies outside the chunk");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(read_rows_doc,
"read_rows(chunk, spans, index, size, shapes, width, iteration, previous)\n--\n\n"
"The figures of the lines at ``spans[index:index + size]`` of ``chunk``, up to the first\n"
"line whose shape (its bytes with every digit 0) is not a key of ``shapes`` or whose\n"
"iteration is not above the line's before (the first line's above ``previous``): ``width``\n"
"columns, a value per line read, None where a line's shape has no item in that column.\n"
"Each shape's ``layout`` is a tuple of (start, stop, kind, column) items (kind 0 bytes,\n"
"1 float, 2 int, 3 and 4 the ISO text of a timestamp); a value whose text is the same as the\n"
"column's before is the same object;\n"
"column ``iteration`` holds each line's iteration, read as int.");

static PyObject *
read_rows(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    const char *usage = "read_rows(chunk, spans, index, size, shapes, width, iteration, previous)";
    if (check_run_arguments(args, nargs, 8, usage) < 0) {
        return NULL;
    }
    PyObject *spans = args[1], *known = args[4];
    if (!PyDict_Check(known)) {
        PyErr_Format(PyExc_TypeError, "%s: shapes a dict", usage);
        return NULL;
    }
    Py_ssize_t index = PyLong_AsSsize_t(args[2]);
    Py_ssize_t size = PyLong_AsSsize_t(args[3]);
    Py_ssize_t width = PyLong_AsSsize_t(args[5]);
    Py_ssize_t iteration = PyLong_AsSsize_t(args[6]);
    long long previous = PyLong_AsLongLong(args[7]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (index < 0 || size < 0 || width < 1 || iteration < 0 || iteration >= width) {
        PyErr_SetString(PyExc_ValueError, "index and size at least 0, iteration one of the width columns");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(spans) - index;
    count = count < 0 ? 0 : (count > size ? size : count);
    PyObject *columns = none_columns(width, count);
    Last *last = PyMem_Calloc(width, sizeof(Last));
    Shapes *shapes = PyMem_Calloc(1, sizeof(Shapes));
    if (columns == NULL || last == NULL || shapes == NULL) {
        Py_XDECREF(columns);
        PyMem_Free(last);
        PyMem_Free(shapes);
        return PyErr_NoMemory();
    }
    PyObject **lists = ((PyListObject *)columns)->ob_item;
    const char *chunk = PyBytes_AS_STRING(args[0]);
    Py_ssize_t chunk_size = PyBytes_GET_SIZE(args[0]);
    Py_ssize_t row = 0;
    int failed = 0;
    for (; row < count; row++) {
        Py_ssize_t start, end;
        if (span_at(spans, index + row, chunk_size, &start, &end) < 0) {
            failed = 1;
            break;
        }
        Py_ssize_t found = shape_of(shapes, chunk + start, end - start, known, width, iteration);
        if (found < 0) {
            failed = found == -2;
            break;
        }
        int above = ascends(&shapes->shapes[found], chunk + start, &previous);
        if (above <= 0) {
            failed = above < 0;
            break;
        }
        if (read_row(&shapes->shapes[found], chunk + start, lists, row, last) < 0) {
            failed = 1;
            break;
        }
    }
    shapes_free(shapes);
    PyMem_Free(shapes);
    PyMem_Free(last);
    if (failed) {
        Py_DECREF(columns);
        return NULL;
    }
    if (row < count) {
        for (Py_ssize_t column = 0; column < width; column++) {
            if (PyList_SetSlice(lists[column], row, count, NULL) < 0) {
                Py_DECREF(columns);
                return NULL;
            }
        }
    }
    return columns;
}

/* The newlines in `length` bytes at `data`. */
static Py_ssize_t
newlines_in(const char *data, Py_ssize_t length)
{
    Py_ssize_t found = 0;
    const char *end = data + length;
    while ((data = memchr(data, '\n', end - data)) != NULL) {
        found++;
        data++;
    }
    return found;
}

PyDoc_STRVAR(line_numbers_doc,
"line_numbers(chunk, spans, count, offset, before)\n--\n\n"
"The number of the line of each of the first ``count`` ``spans`` of ``chunk`` (ascending),\n"
"counted from 1 in the stream: ``before`` lines come before offset ``offset``.");

static PyObject *
line_numbers(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    const char *usage = "line_numbers(chunk, spans, count, offset, before)";
    if (check_run_arguments(args, nargs, 5, usage) < 0) {
        return NULL;
    }
    PyObject *spans = args[1];
    Py_ssize_t count = PyLong_AsSsize_t(args[2]);
    Py_ssize_t offset = PyLong_AsSsize_t(args[3]);
    long long before = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    const char *chunk = PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    if (count < 0 || count > PyList_GET_SIZE(spans) || offset < 0 || offset > size) {
        PyErr_SetString(PyExc_ValueError, "count within the spans, offset within the chunk");
        return NULL;
    }
    PyObject *numbers = PyList_New(count);
    if (numbers == NULL) {
        return NULL;
    }
    for (Py_ssize_t index = 0; index < count; index++) {
        Py_ssize_t start, end;
        if (span_at(spans, index, size, &start, &end) < 0) {
            Py_DECREF(numbers);
            return NULL;
        }
        if (start < offset) {
            Py_DECREF(numbers);
            PyErr_SetString(PyExc_ValueError, "the spans ascend from the offset");
            return NULL;
        }
        before += newlines_in(chunk + offset, start - offset);
        offset = start;
        PyObject *number = PyLong_FromLongLong(before + 1);
        if (number == NULL) {
            Py_DECREF(numbers);
            return NULL;
        }
        PyList_SET_ITEM(numbers, index, number);
    }
    return numbers;
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
    {"read_rows", (PyCFunction)(void (*)(void))read_rows, METH_FASTCALL, read_rows_doc},
    {"line_numbers", (PyCFunction)(void (*)(void))line_numbers, METH_FASTCALL, line_numbers_doc},
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
