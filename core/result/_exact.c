/* Exact arithmetic on columns of numbers: tprimat.result's compiled forms (the Python forms
 * are used where this module is not built, and the tests check one against the other).
 *
 * within(values, least, greatest, floats, nones): whether every value is an int (or, with
 * `floats`, a float), none NaN, from `least` to `greatest`, compared exactly, or (with `nones`)
 * None: the compiled form of tprimat.result.plausible.within_in_python.  An int beyond 2**53 either way is left to the Python form.
 *
 * fifth_decimals(text): msgspec's JSON text of floats with each item written 0.0000d...
 *   respelled d....e-05, as repr writes floats from 1e-5 to 1e-4: the compiled form of
 *   tprimat.result.floattext._fifth_decimal_respelled.
 *
 * scaled_sums(batch): the exact sum and sum of squares of a batch of floats, for the
 * summary's standard deviation; the compiled form of tprimat.result.metrics._add_scaled: every float of the batch
 * times 2**scale is an integer, its numerator, and the sums of the numerators and of their
 * squares are exact integers.  Each float is m * 2**shift over 2**scale with m below 2**53;
 * the sums are kept in 64-bit limbs, so nothing is rounded.  A batch whose floats span more
 * than 2**60 between the least and the largest magnitude is left to the Python form.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

/* The widest span of binary exponents (between the least and the largest magnitude) read here. */
#define SPAN_MAX 60
/* Limbs of the sums: numerators below 2**113, squares below 2**226, times up to 2**63 values. */
#define SUM_LIMBS 3
#define SQUARE_LIMBS 5

typedef unsigned __int128 uint128;

/* Add `value` << `shift` to the little-endian `limbs`. */
static void
add_shifted(uint64_t *limbs, int count, uint128 value, int shift)
{
    int word = shift / 64, bit = shift % 64;
    uint64_t low = (uint64_t)value, high = (uint64_t)(value >> 64);
    uint64_t parts[3] = {
        low << bit,
        (high << bit) | (bit ? low >> (64 - bit) : 0),
        bit ? high >> (64 - bit) : 0,
    };
    uint64_t carry = 0;
    for (int at = word; at < count; at++) {
        uint128 sum = (uint128)limbs[at] + (at - word < 3 ? parts[at - word] : 0) + carry;
        limbs[at] = (uint64_t)sum;
        carry = (uint64_t)(sum >> 64);
        if (at - word >= 2 && carry == 0) {
            break;
        }
    }
}

/* The integer of the little-endian `limbs`. */
static PyObject *
limbs_integer(const uint64_t *limbs, int count)
{
    PyObject *found = PyLong_FromLong(0);
    PyObject *sixty_four = PyLong_FromLong(64);
    if (found == NULL || sixty_four == NULL) {
        Py_XDECREF(found);
        Py_XDECREF(sixty_four);
        return NULL;
    }
    for (int at = count - 1; at >= 0 && found != NULL; at--) {
        PyObject *shifted = PyNumber_Lshift(found, sixty_four);
        Py_DECREF(found);
        PyObject *limb = PyLong_FromUnsignedLongLong(limbs[at]);
        found = NULL;
        if (shifted != NULL && limb != NULL) {
            found = PyNumber_Or(shifted, limb);
        }
        Py_XDECREF(shifted);
        Py_XDECREF(limb);
    }
    Py_DECREF(sixty_four);
    return found;
}

/* The least and largest binary exponent of the nonzero floats of `batch` (0, 0 when none is);
 * -1 where an item is not a float (exactly) or not finite. */
static int
exponent_range(PyObject *batch, int *least, int *largest)
{
    *least = INT_MAX;
    *largest = INT_MIN;
    Py_ssize_t count = PyList_GET_SIZE(batch);
    for (Py_ssize_t index = 0; index < count; index++) {
        PyObject *item = PyList_GET_ITEM(batch, index);
        if (!PyFloat_CheckExact(item)) {
            return -1;
        }
        double value = PyFloat_AS_DOUBLE(item);
        if (!isfinite(value)) {
            return -1;
        }
        if (value != 0.0) {
            int exponent;
            frexp(value, &exponent);
            *least = exponent < *least ? exponent : *least;
            *largest = exponent > *largest ? exponent : *largest;
        }
    }
    if (*least == INT_MAX) {
        *least = *largest = 0;
    }
    return 0;
}

PyDoc_STRVAR(scaled_sums_doc,
"scaled_sums(batch)\n--\n\n"
"(sum, squares, scale) of a list of finite floats: the exact sum of the values times\n"
"2**scale and of their squares times 4**scale, integers; None where an item is not a float\n"
"or not finite, or the magnitudes span more than 2**60.");

static PyObject *
scaled_sums(PyObject *Py_UNUSED(module), PyObject *batch)
{
    if (!PyList_Check(batch)) {
        PyErr_SetString(PyExc_TypeError, "batch is a list");
        return NULL;
    }
    int least, largest;
    if (exponent_range(batch, &least, &largest) < 0) {
        Py_RETURN_NONE;
    }
    int scale = least < 53 ? 53 - least : 0;
    if (largest - least > SPAN_MAX || largest - 53 + scale > SPAN_MAX) {
        Py_RETURN_NONE;
    }
    uint64_t positive[SUM_LIMBS] = {0}, negative[SUM_LIMBS] = {0}, squares[SQUARE_LIMBS] = {0};
    Py_ssize_t count = PyList_GET_SIZE(batch);
    for (Py_ssize_t index = 0; index < count; index++) {
        double value = PyFloat_AS_DOUBLE(PyList_GET_ITEM(batch, index));
        if (value == 0.0) {
            continue;
        }
        int exponent;
        double fraction = frexp(fabs(value), &exponent); /* value = fraction * 2**exponent */
        uint64_t digits = (uint64_t)ldexp(fraction, 53);  /* exact: below 2**53 */
        int shift = exponent - 53 + scale;                /* value * 2**scale = digits << shift */
        add_shifted(value < 0 ? negative : positive, SUM_LIMBS, digits, shift);
        add_shifted(squares, SQUARE_LIMBS, (uint128)digits * digits, 2 * shift);
    }
    PyObject *plus = limbs_integer(positive, SUM_LIMBS);
    PyObject *minus = limbs_integer(negative, SUM_LIMBS);
    PyObject *square = limbs_integer(squares, SQUARE_LIMBS);
    PyObject *total = plus != NULL && minus != NULL ? PyNumber_Subtract(plus, minus) : NULL;
    Py_XDECREF(plus);
    Py_XDECREF(minus);
    if (total == NULL || square == NULL) {
        Py_XDECREF(total);
        Py_XDECREF(square);
        return NULL;
    }
    return Py_BuildValue("(NNi)", total, square, scale);
}

/* Ints whose magnitude is at most this are exact doubles. */
#define EXACT_INT_MAX (1LL << 53)

PyDoc_STRVAR(within_doc,
"within(values, least, greatest, floats, nones)\n--\n\n"
"Whether every value of ``values`` (a list or tuple) is an int, or with ``floats`` a float,\n"
"none NaN, from ``least`` to ``greatest`` (floats that are the bounds exactly), or with\n"
"``nones`` None: True or False; None where an int beyond 2**53 either way leaves it to\n"
"Python.  A bool is not an int.");

static PyObject *
within(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !(PyList_Check(args[0]) || PyTuple_Check(args[0])) || !PyFloat_Check(args[1]) ||
        !PyFloat_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "within(values, least, greatest, floats, nones): a list or tuple, two floats");
        return NULL;
    }
    double least = PyFloat_AS_DOUBLE(args[1]), greatest = PyFloat_AS_DOUBLE(args[2]);
    int floats = PyObject_IsTrue(args[3]);
    int nones = PyObject_IsTrue(args[4]);
    if (floats < 0 || nones < 0) {
        return NULL;
    }
    PyObject **items = PySequence_Fast_ITEMS(args[0]);
    Py_ssize_t count = PySequence_Fast_GET_SIZE(args[0]);
    for (Py_ssize_t index = 0; index < count; index++) {
        PyObject *value = items[index];
        double number;
        if (PyFloat_CheckExact(value)) {
            if (!floats) {
                Py_RETURN_FALSE;
            }
            number = PyFloat_AS_DOUBLE(value);
        }
        else if (PyLong_CheckExact(value)) {
            int overflow = 0;
            long long whole = PyLong_AsLongLongAndOverflow(value, &overflow);
            if (overflow || whole > EXACT_INT_MAX || whole < -EXACT_INT_MAX) {
                Py_RETURN_NONE;
            }
            number = (double)whole;
        }
        else if (value == Py_None && nones) {
            continue;
        }
        else {
            Py_RETURN_FALSE;
        }
        if (!(number >= least && number <= greatest)) { /* NaN is neither */
            Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

static int
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

PyDoc_STRVAR(fifth_decimals_doc,
"fifth_decimals(text)\n--\n\n"
"``text`` (bytes) with each item ``0.0000d...`` that follows a character other than a digit\n"
"or a point respelled ``d....e-05`` (``0.0000d``: ``de-05``).");

static PyObject *
fifth_decimals(PyObject *Py_UNUSED(module), PyObject *text)
{
    if (!PyBytes_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "fifth_decimals(text): text is bytes");
        return NULL;
    }
    const char *in = PyBytes_AS_STRING(text);
    Py_ssize_t size = PyBytes_GET_SIZE(text);
    char *out = PyMem_Malloc(size ? size : 1); /* never longer: 0.0000d is 7 bytes, de-05 5 */
    if (out == NULL) {
        return PyErr_NoMemory();
    }
    Py_ssize_t written = 0;
    for (Py_ssize_t at = 0; at < size; at++) {
        if (in[at] == '0' && at > 0 && at + 6 < size && !is_digit(in[at - 1]) && in[at - 1] != '.' &&
            memcmp(in + at, "0.0000", 6) == 0 && is_digit(in[at + 6])) {
            Py_ssize_t end = at + 7;
            while (end < size && is_digit(in[end])) {
                end++;
            }
            out[written++] = in[at + 6];
            if (end > at + 7) {
                out[written++] = '.';
                memcpy(out + written, in + at + 7, end - at - 7);
                written += end - at - 7;
            }
            memcpy(out + written, "e-05", 4);
            written += 4;
            at = end - 1;
        }
        else {
            out[written++] = in[at];
        }
    }
    PyObject *found = PyBytes_FromStringAndSize(out, written);
    PyMem_Free(out);
    return found;
}

static PyMethodDef methods[] = {
    {"within", (PyCFunction)(void (*)(void))within, METH_FASTCALL, within_doc},
    {"scaled_sums", scaled_sums, METH_O, scaled_sums_doc},
    {"fifth_decimals", fifth_decimals, METH_O, fifth_decimals_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_exact",
    "Exact arithmetic on columns of numbers (see tprimat.result.plausible and tprimat.result.metrics).",
    0,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__exact(void)
{
    return PyModule_Create(&module);
}
