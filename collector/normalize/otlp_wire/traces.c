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
#include "wire.h"

static PyTypeObject *WireSpanType;

/* ---- spans ---------------------------------------------------------------------------- */

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
            if (!sub(b, &s) || !append_new(item[S_EVENTS], event(&s, ctx, &nested))) {
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

/* An InstrumentationScope: its name into *name (its version checked, its attributes left to protobuf). */
static int scope(Buf *b, PyObject **name) {
    uint32_t field;
    int wire;
    while (tag(b, &field, &wire)) {
        Buf s;
        if (field == 1 && wire == 2) {
            if (!sub(b, &s)) {
                return 0;
            }
            Py_XSETREF(*name, str_of(s.p, s.end - s.p));
            if (*name == NULL) {
                return 0;
            }
        } else if (field == 2 && wire == 2) { /* version */
            if (!valid_string(b)) {
                return 0;
            }
        } else if (!(field == 4 && wire == 0 && skip_scalar(b, wire))) { /* dropped_attributes_count */
            return 0; /* scope attributes and anything else */
        }
    }
    return b->p == b->end;
}

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
            if (!scope(&s, &name)) {
                goto done;
            }
        } else if (field == 2) {
            if (!append_new(spans, span(&s, ctx))) {
                goto done;
            }
        } else if (field == 3) { /* schema_url */
            if (!valid_utf8(&s)) {
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
    out = PyTuple_Pack(2, name, spans);
done:
    Py_XDECREF(name);
    Py_DECREF(spans);
    return out;
}

/* A Resource: its attributes into `attrs` (entity references and the rest left to protobuf). */
static int resource(Buf *b, PyObject *attrs, const Ctx *ctx) {
    int nested = 0; /* judged again by redaction for a resource */
    uint32_t field;
    int wire;
    while (tag(b, &field, &wire)) {
        if (field == 1) {
            if (!add_attribute(b, wire, attrs, ctx, &nested)) {
                return 0;
            }
        } else if (!(field == 2 && wire == 0 && skip_scalar(b, wire))) { /* dropped_attributes_count */
            return 0;
        }
    }
    return b->p == b->end;
}

/* ResourceSpans: (resource attributes, [(scope name, [spans])]). */
static PyObject *resource_spans(Buf *b, const Ctx *ctx) {
    PyObject *attrs = PyDict_New(), *scopes = PyList_New(0), *out = NULL;
    int has_resource = 0;
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
            if (!resource(&s, attrs, ctx)) {
                goto done;
            }
        } else if (field == 2) {
            if (!append_new(scopes, scope_spans(&s, ctx))) {
                goto done;
            }
        } else if (field == 3) { /* schema_url */
            if (!valid_utf8(&s)) {
                goto done;
            }
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
        if (field != 1 || wire != 2 || !sub(&b, &s) || !append_new(out, resource_spans(&s, &ctx))) {
            Py_CLEAR(out);
        }
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
    if (WireSpanType == NULL || values_init() < 0
        || PyModule_AddObjectRef(m, "WireSpan", (PyObject *)WireSpanType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
