/* The `json.sort_deep.v1` writer's fast path in C (gate.protocol.canonical).
 *
 * encode(value, key_order[, orders]) returns the canonical text of `value`, or None when the value holds
 * something only the Python writer formats or rejects correctly: a number outside the forms
 * below, a type that is not exactly dict, list, tuple, str, int, float, bool or None, an object
 * key that is not a str, or nesting deeper than MAX_DEPTH. The caller then runs the Python
 * writer, which is the reference: tests hold this writer equal to it.
 *
 * Rules (reference facts section 1, as the Python writer implements them):
 * - object members in the order `key_order(dict)` returns (array-index keys, then collation);
 *   `orders`, when given, is key_order's own cache (a dict from the tuple of an object's keys,
 *   in iteration order, to their order): an object whose keys it holds is ordered without
 *   calling Python at all, the same order key_order would return;
 * - strings as JSON.stringify writes them: `"` and `\` escaped, \b \f \n \r \t, every other
 *   code point below U+0020 as \u00xx, and every surrogate code point as \udxxx (lowercase
 *   hex); everything else as itself;
 * - integers within +-(2^53-1) in decimal; floats that are whole and within that range as
 *   integers; other finite floats with 1e-4 <= |x| < 1e16 in Python's shortest repr, which is
 *   ECMAScript's Number::toString there.
 *
 * The text is built in UTF-8 (ASCII strings, most keys and values, copied byte for byte) and
 * decoded once at the end: a buffer of 4-byte code points, narrowed to a str and encoded again
 * by every hash, had cost 2.7 times as long (40 against 15 us for a 7 KB record).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

#define MAX_DEPTH 128
#define MAX_SAFE_INTEGER 9007199254740991LL

typedef struct {
    char *data;  /* the text so far, in UTF-8 (every surrogate code point is escaped, so it is valid) */
    Py_ssize_t size;
    Py_ssize_t capacity;
} Buffer;

/* 0: written; 1: not for this writer (the caller falls back); -1: a Python error is set. */
enum { DONE = 0, FALLBACK = 1, FAILED = -1 };

static int reserve(Buffer *buffer, Py_ssize_t more) {
    if (buffer->size + more <= buffer->capacity) {
        return DONE;
    }
    Py_ssize_t capacity = buffer->capacity ? buffer->capacity : 4096;
    while (capacity < buffer->size + more) {
        if (capacity > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return FAILED;
        }
        capacity *= 2;
    }
    char *data = PyMem_Realloc(buffer->data, (size_t)capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    buffer->data = data;
    buffer->capacity = capacity;
    return DONE;
}

static int put_ascii(Buffer *buffer, const char *text, Py_ssize_t length) {
    if (reserve(buffer, length) != DONE) {
        return FAILED;
    }
    memcpy(buffer->data + buffer->size, text, (size_t)length);
    buffer->size += length;
    return DONE;
}

static const char HEX[] = "0123456789abcdef";

/* The bytes code point `c` takes in the text: itself (in UTF-8), a two-character escape or \uxxxx. */
static inline Py_ssize_t written_size(Py_UCS4 c) {
    if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') {
        return 2;
    }
    if (c < 0x20 || (c >= 0xD800 && c <= 0xDFFF)) {
        return 6;
    }
    return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
}

static inline char *put_code_point(char *out, Py_UCS4 c) {
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
        *out++ = (char)c;
        return out;
    }
    if (c >= 0x80 && (c < 0xD800 || c > 0xDFFF)) {  /* UTF-8 */
        if (c < 0x800) {
            *out++ = (char)(0xC0 | (c >> 6));
        } else if (c < 0x10000) {
            *out++ = (char)(0xE0 | (c >> 12));
            *out++ = (char)(0x80 | ((c >> 6) & 0x3F));
        } else {
            *out++ = (char)(0xF0 | (c >> 18));
            *out++ = (char)(0x80 | ((c >> 12) & 0x3F));
            *out++ = (char)(0x80 | ((c >> 6) & 0x3F));
        }
        *out++ = (char)(0x80 | (c & 0x3F));
        return out;
    }
    *out++ = '\\';
    switch (c) {
    case '"': *out++ = '"'; break;
    case '\\': *out++ = '\\'; break;
    case '\b': *out++ = 'b'; break;
    case '\f': *out++ = 'f'; break;
    case '\n': *out++ = 'n'; break;
    case '\r': *out++ = 'r'; break;
    case '\t': *out++ = 't'; break;
    default:
        *out++ = 'u';
        *out++ = HEX[(c >> 12) & 0xF];
        *out++ = HEX[(c >> 8) & 0xF];
        *out++ = HEX[(c >> 4) & 0xF];
        *out++ = HEX[c & 0xF];
    }
    return out;
}

static int put_string(Buffer *buffer, PyObject *text) {
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    /* First the exact size (escapes take two or six bytes, other code points one to four), then
     * one reservation. ASCII text (most keys and values) is read byte by byte without decoding. */
    Py_ssize_t needed = 2;
    if (PyUnicode_IS_ASCII(text)) {
        const unsigned char *data = PyUnicode_1BYTE_DATA(text);
        for (Py_ssize_t i = 0; i < length; i++) {
            unsigned char c = data[i];
            needed += (c >= 0x20 && c != '"' && c != '\\') ? 1 : written_size(c);
        }
        if (reserve(buffer, needed) != DONE) {
            return FAILED;
        }
        char *out = buffer->data + buffer->size;
        *out++ = '"';
        if (needed == length + 2) {  /* nothing to escape */
            memcpy(out, data, (size_t)length);
            out += length;
        } else {
            for (Py_ssize_t i = 0; i < length; i++) {
                out = put_code_point(out, data[i]);
            }
        }
        *out++ = '"';
        buffer->size = out - buffer->data;
        return DONE;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t i = 0; i < length; i++) {
        needed += written_size(PyUnicode_READ(kind, data, i));
    }
    if (reserve(buffer, needed) != DONE) {
        return FAILED;
    }
    char *out = buffer->data + buffer->size;
    *out++ = '"';
    for (Py_ssize_t i = 0; i < length; i++) {
        out = put_code_point(out, PyUnicode_READ(kind, data, i));
    }
    *out++ = '"';
    buffer->size = out - buffer->data;
    return DONE;
}

static int put_str_of(Buffer *buffer, PyObject *value) {
    /* The decimal text of an int, or the repr of a float (both ASCII). */
    PyObject *text = PyObject_Repr(value);
    if (text == NULL) {
        return FAILED;
    }
    Py_ssize_t length;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &length);
    int result = utf8 == NULL ? FAILED : put_ascii(buffer, utf8, length);
    Py_DECREF(text);
    return result;
}

typedef struct {
    PyObject *key_order;  /* key_order(dict) -> the keys in canonical order */
    PyObject *orders;     /* key_order's cache (dict) or NULL */
} Order;

static int write_value(Buffer *buffer, PyObject *value, const Order *order, int depth);

static int write_dict(Buffer *buffer, PyObject *value, const Order *order, int depth) {
    Py_ssize_t size = PyDict_GET_SIZE(value);
    if (size == 0) {
        return put_ascii(buffer, "{}", 2);
    }
    PyObject *signature = order->orders != NULL ? PyTuple_New(size) : NULL;
    if (order->orders != NULL && signature == NULL) {
        return FAILED;
    }
    Py_ssize_t position = 0, index = 0;
    PyObject *key, *item;
    while (PyDict_Next(value, &position, &key, &item)) {
        if (!PyUnicode_CheckExact(key)) {
            Py_XDECREF(signature);
            return FALLBACK;  /* the Python writer names the error */
        }
        if (signature != NULL && index < size) {
            PyTuple_SET_ITEM(signature, index++, Py_NewRef(key));
        }
    }
    PyObject *sorted = NULL;
    if (signature != NULL) {
        sorted = PyDict_GetItemWithError(order->orders, signature);  /* borrowed */
        Py_DECREF(signature);
        if (sorted == NULL && PyErr_Occurred()) {
            return FAILED;
        }
        Py_XINCREF(sorted);  /* a nested key_order call may empty the cache while this is written */
    }
    if (sorted == NULL) {
        sorted = PyObject_CallOneArg(order->key_order, value);
        if (sorted == NULL) {
            return FAILED;
        }
    }
    PyObject *keys = PySequence_Fast(sorted, "key_order must return a sequence");
    Py_DECREF(sorted);
    if (keys == NULL) {
        return FAILED;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(keys);
    int result = put_ascii(buffer, "{", 1);
    for (Py_ssize_t i = 0; i < count && result == DONE; i++) {
        key = PySequence_Fast_GET_ITEM(keys, i);
        item = PyDict_GetItemWithError(value, key);  /* borrowed */
        if (item == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError, "key_order returned a key the object does not have");
            }
            result = FAILED;
            break;
        }
        if (i > 0) {
            result = put_ascii(buffer, ",", 1);
        }
        if (result == DONE) {
            result = put_string(buffer, key);
        }
        if (result == DONE) {
            result = put_ascii(buffer, ":", 1);
        }
        if (result == DONE) {
            Py_INCREF(item);  /* key_order is Python: keep the value alive while it is written */
            result = write_value(buffer, item, order, depth + 1);
            Py_DECREF(item);
        }
    }
    Py_DECREF(keys);
    return result == DONE ? put_ascii(buffer, "}", 1) : result;
}

static int write_array(Buffer *buffer, PyObject *value, const Order *order, int depth) {
    Py_ssize_t count = PyList_CheckExact(value) ? PyList_GET_SIZE(value) : PyTuple_GET_SIZE(value);
    if (count == 0) {
        return put_ascii(buffer, "[]", 2);
    }
    int result = put_ascii(buffer, "[", 1);
    for (Py_ssize_t i = 0; result == DONE; i++) {
        /* A list can change size while a key_order call runs Python: re-read its length. */
        Py_ssize_t now = PyList_CheckExact(value) ? PyList_GET_SIZE(value) : PyTuple_GET_SIZE(value);
        if (i >= now) {
            break;
        }
        PyObject *item = PyList_CheckExact(value) ? PyList_GET_ITEM(value, i) : PyTuple_GET_ITEM(value, i);
        if (i > 0) {
            result = put_ascii(buffer, ",", 1);
        }
        if (result == DONE) {
            Py_INCREF(item);
            result = write_value(buffer, item, order, depth + 1);
            Py_DECREF(item);
        }
    }
    return result == DONE ? put_ascii(buffer, "]", 1) : result;
}

static int write_value(Buffer *buffer, PyObject *value, const Order *order, int depth) {
    if (PyUnicode_CheckExact(value)) {
        return put_string(buffer, value);
    }
    if (value == Py_None) {
        return put_ascii(buffer, "null", 4);
    }
    if (value == Py_True) {
        return put_ascii(buffer, "true", 4);
    }
    if (value == Py_False) {
        return put_ascii(buffer, "false", 5);
    }
    if (PyDict_CheckExact(value) || PyList_CheckExact(value) || PyTuple_CheckExact(value)) {
        if (depth >= MAX_DEPTH) {
            return FALLBACK;  /* the Python writer raises JSON_TOO_DEEP */
        }
        if (Py_EnterRecursiveCall(" in canonical JSON")) {
            return FAILED;
        }
        int result = PyDict_CheckExact(value) ? write_dict(buffer, value, order, depth)
                                              : write_array(buffer, value, order, depth);
        Py_LeaveRecursiveCall();
        return result;
    }
    if (PyLong_CheckExact(value)) {
        int overflow = 0;
        long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (number == -1 && PyErr_Occurred()) {
            return FAILED;
        }
        if (overflow || number > MAX_SAFE_INTEGER || number < -MAX_SAFE_INTEGER) {
            return FALLBACK;  /* written as JavaScript writes the double it becomes */
        }
        char digits[32];
        int length = snprintf(digits, sizeof digits, "%lld", number);
        return put_ascii(buffer, digits, length);
    }
    if (PyFloat_CheckExact(value)) {
        double number = PyFloat_AS_DOUBLE(value);
        if (!isfinite(number)) {
            return FALLBACK;
        }
        if (number == floor(number)) {
            if (number > (double)MAX_SAFE_INTEGER || number < -(double)MAX_SAFE_INTEGER) {
                return FALLBACK;
            }
            char digits[32];
            /* -0.0 is written "0", as JavaScript writes it. */
            int length = snprintf(digits, sizeof digits, "%lld", (long long)number);
            return put_ascii(buffer, digits, length);
        }
        double magnitude = fabs(number);
        if (magnitude < 1e-4 || magnitude >= 1e16) {
            return FALLBACK;  /* exponent forms differ between Python and JavaScript */
        }
        return put_str_of(buffer, value);
    }
    return FALLBACK;
}

static PyObject *encode(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "encode(value, key_order[, orders]) takes two or three arguments");
        return NULL;
    }
    Order order = {args[1], NULL};
    if (nargs == 3 && args[2] != Py_None) {
        if (!PyDict_CheckExact(args[2])) {
            PyErr_SetString(PyExc_TypeError, "orders must be a dict");
            return NULL;
        }
        order.orders = args[2];
    }
    Buffer buffer = {NULL, 0, 0};
    int result = write_value(&buffer, args[0], &order, 0);
    PyObject *text = NULL;
    if (result == DONE) {
        text = PyUnicode_DecodeUTF8(buffer.data, buffer.size, "strict");
    } else if (result == FALLBACK) {
        text = Py_NewRef(Py_None);
    }
    PyMem_Free(buffer.data);
    return text;
}

static PyMethodDef METHODS[] = {
    {"encode", (PyCFunction)(void (*)(void))encode, METH_FASTCALL,
     "encode(value, key_order[, orders]) -> the canonical JSON text, or None when the Python writer must write it"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "gate.protocol._canonical",
    "The canonical JSON writer's fast path (see gate/protocol/canonical.py).", -1, METHODS, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__canonical(void) {
    return PyModule_Create(&MODULE);
}
