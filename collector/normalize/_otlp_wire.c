/* An OTLP ExportTraceServiceRequest read straight from its protobuf bytes into the Python
 * values normalization reads (collector/normalize/wire_spans.py is its Python face).
 *
 * Why: in the decode worker, parsing a request with upb and then reading every attribute of
 * every span through upb's Python wrappers cost ~9 us of its ~21 us a span (bench/normalize.py).
 * Here one pass over the bytes builds the attribute dicts, event dicts and span records
 * directly, and short strings (attribute keys, models, roles) come from a cache, so equal
 * keys are one object whose hash is computed once.
 *
 * Only the common shape is read: anything else makes read_traces() return None and the
 * caller decodes the body with upb as before, so that path alone decides every unusual case
 * (errors, limits, merges). Returned None for: a field this file does not know or with another
 * wire type, a singular message field twice (protobuf would merge them), links, scope
 * attributes, key-value list or bytes attribute values, an array inside an array, an
 * attribute string longer than max_chars characters or an array of more than
 * MAX_ELEMENTS values (the Python path rejects the span with its reason), invalid UTF-8 in
 * any string, and any malformed or truncated encoding. Every read is bounds-checked against
 * the body: a hostile body can only make it return None.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_ELEMENTS 10000 /* otlp_values.MAX_ATTRIBUTE_ELEMENTS */

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} Buf;

typedef struct {
    Py_ssize_t max_chars;
} Ctx;

/* A function returning PyObject* returns NULL either with a Python error set (out of
 * memory: raised) or without one (not the fast path's shape: read_traces returns None). */

static PyTypeObject *WireSpanType;
static PyObject *k_name, *k_time_ns, *k_attributes;

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

static PyObject *str_of(const uint8_t *s, Py_ssize_t n) {
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

/* ---- the wire ------------------------------------------------------------------------- */

static int varint(Buf *b, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && b->p < b->end; shift += 7) {
        uint8_t c = *b->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

static int fixed64(Buf *b, uint64_t *out) {
    if (b->end - b->p < 8) {
        return 0;
    }
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | b->p[i];
    }
    b->p += 8;
    *out = v;
    return 1;
}

/* The next field's number and wire type; 0 at the end or on a bad tag, which it leaves
 * unread: the caller's check that the whole message was read then fails. */
static int tag(Buf *b, uint32_t *field, int *wire) {
    const uint8_t *at = b->p;
    uint64_t t;
    if (b->p >= b->end) {
        return 0;
    }
    if (!varint(b, &t) || t >> 3 == 0 || t >> 3 > 0x1fffffff) {
        b->p = at;
        return 0;
    }
    *field = (uint32_t)(t >> 3);
    *wire = (int)(t & 7);
    return 1;
}

static int sub(Buf *b, Buf *out) {
    uint64_t n;
    if (!varint(b, &n) || n > (uint64_t)(b->end - b->p)) {
        return 0;
    }
    out->p = b->p;
    out->end = b->p + n;
    b->p += n;
    return 1;
}

/* A varint or fixed field read only to step over it (counts, flags). */
static int skip_scalar(Buf *b, int wire) {
    uint64_t ignored;
    if (wire == 0) {
        return varint(b, &ignored);
    }
    if (wire == 5) {
        if (b->end - b->p < 4) {
            return 0;
        }
        b->p += 4;
        return 1;
    }
    return wire == 1 && fixed64(b, &ignored);
}

/* A string field that is not read: still valid UTF-8, as upb requires. */
static int valid_string(Buf *b) {
    Buf s;
    if (!sub(b, &s)) {
        return 0;
    }
    PyObject *str = str_of(s.p, s.end - s.p);
    Py_XDECREF(str);
    return str != NULL;
}

/* An enum (span kind, status code) as upb gives it: an int32 within range, else the fallback. */
static int enum_value(Buf *b, long *out) {
    uint64_t v;
    if (!varint(b, &v) || v > INT32_MAX) {
        return 0;
    }
    *out = (long)v;
    return 1;
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
                int failed = PyList_Append(out, x);
                Py_DECREF(x);
                if (failed) {
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
static int add_attribute(Buf *b, int wire, PyObject *attrs, const Ctx *ctx, int *nested) {
    Buf s;
    return wire == 2 && sub(b, &s) && key_value(&s, attrs, ctx, nested);
}

/* ---- spans ---------------------------------------------------------------------------- */

/* An Event as _read_span makes it: {"name", "time_ns", "attributes"} in that order. */
static PyObject *event(Buf *b, const Ctx *ctx, int *nested) {
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

enum {
    S_TRACE_ID, S_SPAN_ID, S_PARENT_SPAN_ID, S_NAME, S_KIND, S_START, S_END, S_ATTRIBUTES, S_NESTED,
    S_EVENTS, S_STATUS_CODE, S_STATUS_MESSAGE, S_FIELDS
};

static int status(Buf *b, long *code, PyObject **message) {
    uint32_t field;
    int wire;
    while (tag(b, &field, &wire)) {
        Buf s;
        if (field == 2 && wire == 2) {
            if (!sub(b, &s)) {
                return 0;
            }
            Py_XSETREF(*message, str_of(s.p, s.end - s.p));
            if (*message == NULL) {
                return 0;
            }
        } else if (field == 3 && wire == 0) {
            if (!enum_value(b, code)) {
                return 0;
            }
        } else {
            return 0;
        }
    }
    return b->p == b->end;
}

static PyObject *span(Buf *b, const Ctx *ctx) {
    PyObject *item[S_FIELDS] = {NULL};
    PyObject *out = NULL;
    uint64_t start = 0, end = 0;
    long kind = 0, code = 0;
    int nested = 0, has_status = 0;
    uint32_t field;
    int wire;
    if ((item[S_ATTRIBUTES] = PyDict_New()) == NULL || (item[S_EVENTS] = PyList_New(0)) == NULL) {
        goto done;
    }
    while (tag(b, &field, &wire)) {
        Buf s;
        int bytes_field = field == 1 ? S_TRACE_ID : field == 2 ? S_SPAN_ID : field == 4 ? S_PARENT_SPAN_ID : -1;
        if (bytes_field >= 0 && wire == 2) {
            if (!sub(b, &s)) {
                goto done;
            }
            Py_XSETREF(item[bytes_field], PyBytes_FromStringAndSize((const char *)s.p, s.end - s.p));
            if (item[bytes_field] == NULL) {
                goto done;
            }
        } else if (field == 5 && wire == 2) {
            if (!sub(b, &s)) {
                goto done;
            }
            Py_XSETREF(item[S_NAME], str_of(s.p, s.end - s.p));
            if (item[S_NAME] == NULL) {
                goto done;
            }
        } else if (field == 3 && wire == 2) { /* trace_state: not read, still UTF-8 */
            if (!valid_string(b)) {
                goto done;
            }
        } else if (field == 6 && wire == 0) {
            if (!enum_value(b, &kind)) {
                goto done;
            }
        } else if ((field == 7 || field == 8) && wire == 1) {
            if (!fixed64(b, field == 7 ? &start : &end)) {
                goto done;
            }
        } else if (field == 9) {
            if (!add_attribute(b, wire, item[S_ATTRIBUTES], ctx, &nested)) {
                goto done;
            }
        } else if (field == 11 && wire == 2) {
            PyObject *ev;
            if (!sub(b, &s) || (ev = event(&s, ctx, &nested)) == NULL) {
                goto done;
            }
            int failed = PyList_Append(item[S_EVENTS], ev);
            Py_DECREF(ev);
            if (failed) {
                goto done;
            }
        } else if (field == 15 && wire == 2 && !has_status) {
            has_status = 1;
            if (!sub(b, &s) || !status(&s, &code, &item[S_STATUS_MESSAGE])) {
                goto done;
            }
        } else if ((field == 10 || field == 12 || field == 14) && wire == 0) { /* dropped counts */
            if (!skip_scalar(b, wire)) {
                goto done;
            }
        } else if (field == 16 && wire == 5) { /* flags */
            if (!skip_scalar(b, wire)) {
                goto done;
            }
        } else {
            goto done; /* links (13) and anything else: upb's path */
        }
    }
    if (b->p != b->end) {
        goto done;
    }
    for (int i = S_TRACE_ID; i <= S_PARENT_SPAN_ID; i++) {
        if (item[i] == NULL && (item[i] = PyBytes_FromStringAndSize("", 0)) == NULL) {
            goto done;
        }
    }
    if (item[S_NAME] == NULL && (item[S_NAME] = PyUnicode_FromStringAndSize("", 0)) == NULL) {
        goto done;
    }
    if (item[S_STATUS_MESSAGE] == NULL && (item[S_STATUS_MESSAGE] = PyUnicode_FromStringAndSize("", 0)) == NULL) {
        goto done;
    }
    if ((item[S_KIND] = PyLong_FromLong(kind)) == NULL || (item[S_START] = PyLong_FromUnsignedLongLong(start)) == NULL
        || (item[S_END] = PyLong_FromUnsignedLongLong(end)) == NULL
        || (item[S_STATUS_CODE] = PyLong_FromLong(code)) == NULL) {
        goto done;
    }
    item[S_NESTED] = PyBool_FromLong(nested);
    if ((out = PyStructSequence_New(WireSpanType)) == NULL) {
        goto done;
    }
    for (int i = 0; i < S_FIELDS; i++) {
        PyStructSequence_SET_ITEM(out, i, item[i]); /* steals */
        item[i] = NULL;
    }
done:
    for (int i = 0; i < S_FIELDS; i++) {
        Py_XDECREF(item[i]);
    }
    return out;
}

/* ---- resources and scopes ------------------------------------------------------------- */

/* ScopeSpans: (scope name, [spans]). */
static PyObject *scope_spans(Buf *b, const Ctx *ctx) {
    PyObject *name = NULL, *spans = PyList_New(0), *out = NULL;
    int has_scope = 0;
    uint32_t field;
    int wire;
    if (spans == NULL) {
        return NULL;
    }
    while (tag(b, &field, &wire)) {
        Buf s;
        if (wire != 2 || !sub(b, &s)) {
            goto done;
        }
        if (field == 1 && !has_scope) {
            has_scope = 1;
            uint32_t f;
            int w;
            while (tag(&s, &f, &w)) {
                Buf t;
                if (f == 1 && w == 2) {
                    if (!sub(&s, &t)) {
                        goto done;
                    }
                    Py_XSETREF(name, str_of(t.p, t.end - t.p));
                    if (name == NULL) {
                        goto done;
                    }
                } else if (f == 2 && w == 2) { /* version */
                    if (!valid_string(&s)) {
                        goto done;
                    }
                } else if (f == 4 && w == 0) { /* dropped_attributes_count */
                    if (!skip_scalar(&s, w)) {
                        goto done;
                    }
                } else {
                    goto done; /* scope attributes and anything else */
                }
            }
            if (s.p != s.end) {
                goto done;
            }
        } else if (field == 2) {
            PyObject *sp = span(&s, ctx);
            if (sp == NULL) {
                goto done;
            }
            int failed = PyList_Append(spans, sp);
            Py_DECREF(sp);
            if (failed) {
                goto done;
            }
        } else if (field == 3) { /* schema_url */
            PyObject *url = str_of(s.p, s.end - s.p);
            if (url == NULL) {
                goto done;
            }
            Py_DECREF(url);
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
    out = PyTuple_Pack(2, name, spans);
done:
    Py_XDECREF(name);
    Py_DECREF(spans);
    return out;
}

/* ResourceSpans: (resource attributes, [(scope name, [spans])]). */
static PyObject *resource_spans(Buf *b, const Ctx *ctx) {
    PyObject *attrs = PyDict_New(), *scopes = PyList_New(0), *out = NULL;
    int has_resource = 0, nested = 0;
    uint32_t field;
    int wire;
    if (attrs == NULL || scopes == NULL) {
        goto done;
    }
    while (tag(b, &field, &wire)) {
        Buf s;
        if (wire != 2 || !sub(b, &s)) {
            goto done;
        }
        if (field == 1 && !has_resource) {
            has_resource = 1;
            uint32_t f;
            int w;
            while (tag(&s, &f, &w)) {
                if (f == 1) {
                    if (!add_attribute(&s, w, attrs, ctx, &nested)) {
                        goto done;
                    }
                } else if (f == 2 && w == 0) { /* dropped_attributes_count */
                    if (!skip_scalar(&s, w)) {
                        goto done;
                    }
                } else {
                    goto done; /* entity references and anything else */
                }
            }
            if (s.p != s.end) {
                goto done;
            }
        } else if (field == 2) {
            PyObject *scope = scope_spans(&s, ctx);
            if (scope == NULL) {
                goto done;
            }
            int failed = PyList_Append(scopes, scope);
            Py_DECREF(scope);
            if (failed) {
                goto done;
            }
        } else if (field == 3) { /* schema_url */
            PyObject *url = str_of(s.p, s.end - s.p);
            if (url == NULL) {
                goto done;
            }
            Py_DECREF(url);
        } else {
            goto done;
        }
    }
    if (b->p == b->end) {
        out = PyTuple_Pack(2, attrs, scopes);
    }
done:
    Py_XDECREF(attrs);
    Py_XDECREF(scopes);
    return out;
}

static PyObject *read_traces(PyObject *module, PyObject *args) {
    Py_buffer body;
    Ctx ctx;
    if (!PyArg_ParseTuple(args, "y*n", &body, &ctx.max_chars)) {
        return NULL;
    }
    Buf b = {(const uint8_t *)body.buf, (const uint8_t *)body.buf + body.len};
    PyObject *out = PyList_New(0);
    uint32_t field;
    int wire;
    while (out != NULL && tag(&b, &field, &wire)) {
        Buf s;
        PyObject *rs;
        if (field != 1 || wire != 2 || !sub(&b, &s) || (rs = resource_spans(&s, &ctx)) == NULL) {
            Py_CLEAR(out);
            break;
        }
        if (PyList_Append(out, rs)) {
            Py_CLEAR(out);
        }
        Py_DECREF(rs);
    }
    if (out != NULL && b.p != b.end) {
        Py_CLEAR(out);
    }
    PyBuffer_Release(&body);
    if (out == NULL && !PyErr_Occurred()) {
        Py_RETURN_NONE;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"read_traces", read_traces, METH_VARARGS,
     "read_traces(body, max_chars) -> [(resource attributes, [(scope name, [WireSpan])])], or None\n"
     "when the body is not in the shape this reader takes (then decode it with protobuf)."},
    {NULL, NULL, 0, NULL},
};

static PyStructSequence_Field span_fields[] = {
    {"trace_id", NULL}, {"span_id", NULL}, {"parent_span_id", NULL}, {"name", NULL}, {"kind", NULL},
    {"start_time_unix_nano", NULL}, {"end_time_unix_nano", NULL},
    {"attributes", "dict: the span's attributes, as otlp_values.attributes reads them"},
    {"nested", "an array attribute holds other than strings"},
    {"events", "[{name, time_ns, attributes}]"}, {"status_code", NULL}, {"status_message", NULL},
    {NULL, NULL},
};

static PyStructSequence_Desc span_desc = {
    "tracefix.collector.normalize._otlp_wire.WireSpan",
    "A span as read from the wire: the fields normalization reads, attributes as a dict.",
    span_fields,
    S_FIELDS,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_otlp_wire", "OTLP trace requests read from protobuf bytes (collector/normalize/wire_spans.py).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__otlp_wire(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    WireSpanType = PyStructSequence_NewType(&span_desc);
    k_name = PyUnicode_InternFromString("name");
    k_time_ns = PyUnicode_InternFromString("time_ns");
    k_attributes = PyUnicode_InternFromString("attributes");
    if (WireSpanType == NULL || k_name == NULL || k_time_ns == NULL || k_attributes == NULL
        || PyModule_AddObjectRef(m, "WireSpan", (PyObject *)WireSpanType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
