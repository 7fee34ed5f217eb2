"""JSON text that every reader can parse: NaN and ±Infinity become null, lone surrogates U+FFFD.

Python's json writes non-finite floats as `NaN` / `Infinity`, which is not JSON (Starlette
refuses to send it, strict parsers refuse to read it). A store may hold such numbers
(an older version accepted them, or another writer put them there), so everything the
collector sends out as JSON (API answers, alert payloads and webhook bodies) is written
by `dumps`, which maps them to null instead of failing.

A stored string may also hold a lone UTF-16 surrogate: JSON's `"\ud800"` is valid text and
decodes to one, and spans carry what agents send. Such a string has no UTF-8 form, so
every answer leaves as bytes through `utf8` (`encode` for a value), which writes each lone
surrogate as U+FFFD (the replacement character) instead of failing or sending bytes that
are not UTF-8. A request body is another matter: what the API stores from one must be text,
so `lone_surrogate_at` finds where a parsed body holds such a string, and the API refuses it.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
# JSON text that decodes to a surrogate spells it as an escape (UTF-8 cannot hold one)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def without_non_finite(value: Any) -> Any:
    """`value` with every NaN / ±Infinity float (at any depth) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: without_non_finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_non_finite(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """Strict JSON text of `value`, non-finite floats written as null.

    The common case (nothing non-finite) costs one C-encoder pass: the copy without them
    is made only when the strict encoder refused the value."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(without_non_finite(value), allow_nan=False, **kwargs)


def utf8(text: str) -> bytes:
    """`text` as UTF-8, each lone surrogate written as U+FFFD (a surrogate pair held as two
    code points is joined into its character). Costs one encode unless there is one."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


def encode(value: Any, **kwargs: Any) -> bytes:
    """`dumps(value)` as UTF-8 bytes (non-ASCII written as is, see `utf8`)."""
    return utf8(dumps(value, ensure_ascii=False, **kwargs))


def lone_surrogate_at(text: str, value: Any) -> str | None:
    """Where `value`, parsed from the JSON `text`, holds a string (a key or a value) with a
    lone UTF-16 surrogate: its dotted path ("" for `value` itself), else None. Such a string
    is no Unicode text (the parser joins an escaped pair into its character, so what is left
    is lone). Only text that spells a surrogate escape is walked, without recursion: the
    value may be nested as deeply as the parser allows."""
    if not _SURROGATE_ESCAPE.search(text):
        return None
    stack: list[tuple[tuple, Any]] = [((), value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                return ".".join(map(str, path))
        elif isinstance(v, dict):
            for k, x in v.items():
                if _SURROGATE.search(k):  # the key itself, its surrogate spelled as an escape
                    return ".".join(map(str, (*path, k.encode("utf-8", "backslashreplace").decode())))
                stack.append(((*path, k), x))
        elif isinstance(v, list):
            stack.extend(((*path, i), x) for i, x in enumerate(v))
    return None
