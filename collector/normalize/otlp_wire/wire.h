/* The protobuf wire format as the OTLP trace reader reads it (otlp_wire/traces.c): bounded
 * reads of varints, fixed-width values, tags and length-delimited fields, and the values
 * read from them (otlp_wire/values.c). */
#ifndef TRACEFIX_OTLP_WIRE_H
#define TRACEFIX_OTLP_WIRE_H

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

/* ---- the wire ------------------------------------------------------------------------- */

static inline int varint(Buf *b, uint64_t *out) {
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

static inline int fixed64(Buf *b, uint64_t *out) {
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
static inline int tag(Buf *b, uint32_t *field, int *wire) {
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

static inline int sub(Buf *b, Buf *out) {
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
static inline int skip_scalar(Buf *b, int wire) {
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

/* An enum (span kind, status code) as upb gives it: an int32 within range, else the fallback. */
static inline int enum_value(Buf *b, long *out) {
    uint64_t v;
    if (!varint(b, &v) || v > INT32_MAX) {
        return 0;
    }
    *out = (long)v;
    return 1;
}

/* ---- values (values.c) ---------------------------------------------------------------- */

/* A string from UTF-8 bytes; short ones shared (NULL without an error: not valid UTF-8). */
PyObject *str_of(const uint8_t *s, Py_ssize_t n);
/* Bytes of a string field that is not read: still valid UTF-8, as upb requires. */
int valid_utf8(const Buf *s);
/* The same of the length-delimited field at b. */
int valid_string(Buf *b);
/* Append `item` (a new reference, or NULL: reading it failed) to `list`, letting go of it; 0 on failure. */
int append_new(PyObject *list, PyObject *item);
/* One attribute (a KeyValue field, wire type `wire`) into `attrs`; *nested as in values.c. */
int add_attribute(Buf *b, int wire, PyObject *attrs, const Ctx *ctx, int *nested);

/* An Event as _read_span makes it: {"name", "time_ns", "attributes"}. */
PyObject *event(Buf *b, const Ctx *ctx, int *nested);
/* The interned keys values.c uses (at module init; -1 with an error set). */
int values_init(void);

#endif
