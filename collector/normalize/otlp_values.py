"""OTLP protobuf values as Python: `attributes` reads a span's key-values, held to the size
bounds every stored attribute keeps (SpanRejected past them).
"""
from __future__ import annotations

import base64
import itertools
from typing import Any

from tracefix.collector.normalize.rejections import SpanRejected


def any_value(v) -> Any:
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value
    if kind == "int_value":
        return v.int_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "double_value":
        return v.double_value
    if kind == "array_value":
        return [x.string_value or any_value(x) for x in v.array_value.values]  # most hold strings
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        next(BYTES_READ)
        return base64.b64encode(v.bytes_value).decode()
    return None


# counts the bytes values read as base64 text (by every thread: next() is atomic): text that is
# not among a request's bytes, so a scan of them for secrets does not answer for it
BYTES_READ = itertools.count()


NO_LIMIT = 1 << 62
MAX_ATTRIBUTE_ELEMENTS = 10_000  # in one array or key-value list attribute, nested ones included


def attributes(kvs, max_chars: int = NO_LIMIT) -> dict:
    """The attributes as a dict; SpanRejected when a string is longer than `max_chars` or an
    array / key-value list holds more than MAX_ATTRIBUTE_ELEMENTS values."""
    return attributes_and_nesting(kvs, max_chars)[0]


def attributes_and_nesting(kvs, max_chars: int = NO_LIMIT) -> tuple[dict, bool]:
    """`attributes`, and whether a value is a key-value list or an array holding other than
    strings (what redaction must judge value by value: `redact_span`'s `flat`)."""
    out = {}
    nested = False
    for kv in kvs:  # the scalar cases inline: this loop runs for every attribute of every span
        v = kv.value
        text = v.string_value  # "" unless the value is a non-empty string: most attributes are
        if text:
            if len(text) > max_chars:
                raise SpanRejected(f"attribute {kv.key!r} is {len(text)} characters (limit {max_chars})")
            out[kv.key] = text
            continue
        kind = v.WhichOneof("value")
        if kind == "int_value":
            out[kv.key] = v.int_value
        elif kind == "string_value":
            out[kv.key] = text
        else:
            value = out[kv.key] = any_value(v)
            if type(value) is list:
                _check_container(kv.key, value, max_chars)
                nested = nested or not all(type(x) is str for x in value)
            elif type(value) is dict:
                _check_container(kv.key, value, max_chars)
                nested = True
    return out, nested


def bounded_value(key: str, v, max_chars: int = NO_LIMIT) -> Any:
    """One value (a log record's body) as Python, held to the bounds `attributes` keeps."""
    value = any_value(v)
    if type(value) is str and len(value) > max_chars:
        raise SpanRejected(f"{key} is {len(value)} characters (limit {max_chars})")
    if type(value) is list or type(value) is dict:
        _check_container(key, value, max_chars)
    return value


def _check_container(key: str, value: list | dict, max_chars: int) -> None:
    """The limits of `attributes` inside an array or key-value list (walked without
    recursion: protobuf already bounds the nesting, this bounds the work)."""
    count, stack = 0, [value]
    while stack:
        items = stack.pop()
        items = items.values() if type(items) is dict else items
        count += len(items)
        if count > MAX_ATTRIBUTE_ELEMENTS:
            raise SpanRejected(f"attribute {key!r} has more than {MAX_ATTRIBUTE_ELEMENTS} elements")
        for item in items:
            if type(item) is str:
                if len(item) > max_chars:
                    raise SpanRejected(f"attribute {key!r} holds a string of {len(item)} characters "
                                       f"(limit {max_chars})")
            elif type(item) is list or type(item) is dict:
                stack.append(item)
