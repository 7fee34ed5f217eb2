/* The values of an OTLP trace request: strings (short ones shared) and attributes
 * (KeyValue, AnyValue), read as otlp_values.attributes_and_nesting reads them. */
#include "wire.h"

static PyObject *k_name, *k_time_ns, *k_attributes; /* an event dict's keys */

int values_init(void) {
    k_name = PyUnicode_InternFromString("name");
    k_time_ns = PyUnicode_InternFromString("time_ns");
    k_attributes = PyUnicode_InternFromString("attributes");
    return k_name != NULL && k_time_ns != NULL && k_attributes != NULL ? 0 : -1;
}

/* ---- short strings, shared ------------------------------------------------------------ */

#define CACHE_SLOTS 4096
#define CACHE_MAX_LEN 48
static PyObject *cache[CACHE_SLOTS];

static PyObject *decode_str(const uint8_t *s, Py_ssize_t n) {
    PyObject *out = PyUnicode_DecodeUTF8((const char *)s, n, NULL);
    if (out == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear(); /* upb refuses it too: the fallback says how */
    }
    return out;
}

PyObject *str_of(const uint8_t *s, Py_ssize_t n) {
    if (n > CACHE_MAX_LEN) {
        return decode_str(s, n);
    }
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (Py_ssize_t i = 0; i < n; i++) {
        h = (h ^ s[i]) * 1099511628211ULL;
    }
    PyObject **slot = &cache[h & (CACHE_SLOTS - 1)];
    if (*slot != NULL) {
        Py_ssize_t len;
        const char *utf8 = PyUnicode_AsUTF8AndSize(*slot, &len);
        if (utf8 != NULL && len == n && memcmp(utf8, s, (size_t)n) == 0) {
            Py_INCREF(*slot);
            return *slot;
        }
        PyErr_Clear();
    }
    PyObject *out = decode_str(s, n);
    if (out != NULL) {
        Py_INCREF(out);
        Py_XSETREF(*slot, out);
    }
    return out;
}

/* valid_utf8, valid_string, append_new: see wire.h. */
int valid_utf8(const Buf *s) {
    PyObject *str = str_of(s->p, s->end - s->p);
    Py_XDECREF(str);
    return str != NULL;
}

int valid_string(Buf *b) {
    Buf s;
    return sub(b, &s) && valid_utf8(&s);
}

int append_new(PyObject *list, PyObject *item) {
    if (item == NULL) {
        return 0;
    }
    int failed = PyList_Append(list, item);
    Py_DECREF(item);
    return !failed;
}

/* ---- values --------------------------------------------------------------------------- */

/* An AnyValue holding a string, bool, int, double or (if allow_array) an array of those.
 * *nested: set when an array holds other than strings (otlp_values.attributes_and_nesting). */
static PyObject *any_value(Buf *b, const Ctx *ctx, int allow_array, int *nested) {
    PyObject *out = NULL;
    uint32_t field;
    int wire;
    while (tag(b, &field, &wire)) {
        if (out != NULL) { /* two values: a oneof's last wins, or messages merge: upb decides */
            Py_DECREF(out);
            return NULL;
        }
        uint64_t v;
        Buf s;
        if (field == 1 && wire == 2) {
            if (!sub(b, &s) || (out = str_of(s.p, s.end - s.p)) == NULL) {
                return NULL;
            }
            if (PyUnicode_GET_LENGTH(out) > ctx->max_chars) {
                Py_DECREF(out);
                return NULL;
            }
        } else if (field == 2 && wire == 0) {
            if (!varint(b, &v)) {
                return NULL;
            }
            out = PyBool_FromLong(v != 0);
        } else if (field == 3 && wire == 0) {
            if (!varint(b, &v)) {
                return NULL;
            }
            out = PyLong_FromLongLong((long long)v);
        } else if (field == 4 && wire == 1) {
            double d;
            if (!fixed64(b, &v)) {
                return NULL;
            }
            memcpy(&d, &v, sizeof d);
            out = PyFloat_FromDouble(d);
        } else if (field == 5 && wire == 2 && allow_array) {
            if (!sub(b, &s) || (out = PyList_New(0)) == NULL) {
                return NULL;
            }
            uint32_t f;
            int w;
            while (tag(&s, &f, &w)) {
                Buf item;
                PyObject *x;
                if (f != 1 || w != 2 || !sub(&s, &item) || PyList_GET_SIZE(out) >= MAX_ELEMENTS
                    || (x = any_value(&item, ctx, 0, nested)) == NULL) {
                    Py_DECREF(out);
                    return NULL;
                }
                if (!PyUnicode_CheckExact(x)) {
                    *nested = 1;
                }
                if (!append_new(out, x)) {
                    Py_DECREF(out);
                    return NULL;
                }
            }
            if (s.p != s.end) {
                Py_DECREF(out);
                return NULL;
            }
        } else {
            return NULL; /* key-value lists, bytes, unknown fields */
        }
        if (out == NULL) {
            return NULL;
        }
    }
    if (b->p != b->end) {
        Py_XDECREF(out);
        return NULL;
    }
    if (out == NULL) { /* no value set: otlp_values.any_value's None */
        Py_RETURN_NONE;
    }
    return out;
}

/* One KeyValue into `attrs` (a key given twice keeps its first place and last value, as a dict does). */
static int key_value(Buf *b, PyObject *attrs, const Ctx *ctx, int *nested) {
    PyObject *key = NULL, *value = NULL;
    uint32_t field;
    int wire;
    while (tag(b, &field, &wire)) {
        Buf s;
        if (wire != 2 || !sub(b, &s) || (field == 1 && key != NULL) || (field == 2 && value != NULL)) {
            goto fail;
        }
        if (field == 1) {
            if ((key = str_of(s.p, s.end - s.p)) == NULL) {
                goto fail;
            }
        } else if (field == 2) {
            if ((value = any_value(&s, ctx, 1, nested)) == NULL) {
                goto fail;
            }
        } else {
            goto fail;
        }
    }
    if (b->p != b->end) {
        goto fail;
    }
    if (key == NULL && (key = PyUnicode_FromStringAndSize("", 0)) == NULL) {
        goto fail;
    }
    if (value == NULL) {
        value = Py_NewRef(Py_None);
    }
    int failed = PyDict_SetItem(attrs, key, value);
    Py_DECREF(key);
    Py_DECREF(value);
    return !failed;
fail:
    Py_XDECREF(key);
    Py_XDECREF(value);
    return 0;
}

/* Field `field` of a message holding attributes (wire type 2): one more into `attrs`. */
int add_attribute(Buf *b, int wire, PyObject *attrs, const Ctx *ctx, int *nested) {
    Buf s;
    return wire == 2 && sub(b, &s) && key_value(&s, attrs, ctx, nested);
}

/* An Event as _read_span makes it: {"name", "time_ns", "attributes"} in that order. */
PyObject *event(Buf *b, const Ctx *ctx, int *nested) {
    PyObject *name = NULL, *attrs = PyDict_New(), *out = NULL;
    uint64_t time_ns = 0;
    uint32_t field;
    int wire;
    if (attrs == NULL) {
        return NULL;
    }
    while (tag(b, &field, &wire)) {
        Buf s;
        if (field == 1 && wire == 1) {
            if (!fixed64(b, &time_ns)) {
                goto done;
            }
        } else if (field == 2 && wire == 2) {
            if (!sub(b, &s)) {
                goto done;
            }
            Py_XSETREF(name, str_of(s.p, s.end - s.p));
            if (name == NULL) {
                goto done;
            }
        } else if (field == 3) {
            if (!add_attribute(b, wire, attrs, ctx, nested)) {
                goto done;
            }
        } else if (field == 4 && wire == 0) {
            if (!skip_scalar(b, wire)) {
                goto done;
            }
        } else {
            goto done;
        }
    }
    if (b->p != b->end) {
        goto done;
    }
    if (name == NULL && (name = PyUnicode_FromStringAndSize("", 0)) == NULL) {
        goto done;
    }
    PyObject *t = PyLong_FromUnsignedLongLong(time_ns);
    if (t == NULL || (out = PyDict_New()) == NULL || PyDict_SetItem(out, k_name, name)
        || PyDict_SetItem(out, k_time_ns, t) || PyDict_SetItem(out, k_attributes, attrs)) {
        Py_CLEAR(out);
    }
    Py_XDECREF(t);
done:
    Py_XDECREF(name);
    Py_DECREF(attrs);
    return out;
}
