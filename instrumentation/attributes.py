"""Turning Python values into span attributes: safe JSON, size limits, one setter.

Every attribute tracefix writes goes through :func:`set_attributes`, so the size limit
and the "truncated" bookkeeping live in one place instead of around each call site.
"""
from __future__ import annotations

import json
import logging
import re
from typing import Any, Callable

from .semconv import TRUNCATED

logger = logging.getLogger("tracefix")

TRUNCATION_MARKER = "…[tracefix: truncated {dropped} bytes]"

# How deeply one JSON value may nest arrays and objects. The collector refuses a span whose
# messages, tool arguments or tool result nest deeper, and `from_json_text` reads such text as
# text: every reader walks what it is given, and Python's recursion ends near 1000 frames.
MAX_JSON_DEPTH = 128
# a string (closed or not) or one bracket: what the depth of JSON text is counted over
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]')

_warned: set[str] = set()


def warn_once(key: str, message: str, *args: Any, exc_info: bool = False) -> None:
    """Log `message` the first time `key` is seen; instrumentation must not flood the host's logs."""
    if key in _warned:
        return
    _warned.add(key)
    logger.warning(message, *args, exc_info=exc_info)


def nested_too_deeply(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON text opens more than `limit` arrays and objects inside one another
    (brackets inside strings do not count; the text need not be valid JSON). Text with no
    more brackets than that is answered without reading it through."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for token in _JSON_TOKEN.findall(text):
        if token == "[" or token == "{":
            depth += 1
            if depth > limit:
                return True
        elif token == "]" or token == "}":
            depth -= 1
    return False


def from_json_text(value: Any) -> Any:
    """What an attribute's JSON text stands for; text that is not JSON (a model's malformed
    tool arguments, say) stays as it is, and so does JSON nested deeper than MAX_JSON_DEPTH
    (a store may hold some: an older collector took it). Non-strings pass through."""
    if isinstance(value, str):
        if nested_too_deeply(value):
            return value
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def to_jsonable(value: Any) -> Any:
    """A JSON-compatible view of `value`: pydantic models dumped, unknown objects as repr."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return to_jsonable(dump(mode="json", exclude_none=True))
        except Exception:  # a model that cannot dump itself is still worth a repr
            pass
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return repr(value)


def _json_default(value: Any) -> Any:
    converted = to_jsonable(value)
    if converted is value:  # to_jsonable returns primitives unchanged; never loop
        return repr(value)
    return converted


def _stdlib_dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=_json_default, separators=(",", ":"))


def canonical_json(value: Any) -> str:
    """Deterministic JSON (sorted keys, compact) — the input of every fingerprint and hash."""
    return json.dumps(value, ensure_ascii=False, default=_json_default, sort_keys=True,
                      separators=(",", ":"))


try:  # a base dependency; a stripped install still works, through the standard library
    import orjson
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]

if orjson is not None:
    # dataclasses and datetimes go through _json_default as the standard library sends them
    _ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
    _ORJSON_SORTED = _ORJSON_OPTIONS | orjson.OPT_SORT_KEYS

    def dumps(value: Any) -> str:
        """Compact JSON for attributes; never raises on odd objects. orjson writes it several
        times faster than the standard library (the LLM call's messages, response and
        parameters are most of what tracefix spends per call): the same JSON data, except
        that a float below 1e-4 is written without an exponent and NaN as null; whatever
        orjson refuses (integers beyond 64 bits, lone surrogates, deep nesting) is written
        by the standard library."""
        try:
            return orjson.dumps(value, default=_json_default, option=_ORJSON_OPTIONS).decode("utf-8")
        except (TypeError, ValueError):  # orjson.JSONEncodeError is a TypeError
            return _stdlib_dumps(value)

    def canonical_plain_json(value: Any) -> str:
        """`canonical_json(value)`, byte for byte, for plain JSON data (dicts with str keys,
        lists, str, int, float, bool; `fingerprints.normalize_messages`' output): orjson's
        sorted output wherever it is the standard library's. The two write the same text but
        for a float below 1e-4 (1e-05 / 0.00001, 1e-09 / 1e-9) and NaN or an infinity (null):
        text holding null, "0.0000" or an exponent of one digit is written again by the
        standard library (a false alarm costs only that)."""
        try:
            out = orjson.dumps(value, default=_json_default, option=_ORJSON_SORTED)
        except (TypeError, ValueError):
            return canonical_json(value)
        return canonical_json(value) if _may_differ(out) else out.decode("utf-8")

    def _refuse(value: Any) -> Any:
        raise TypeError  # not plain JSON: normalizing would change it

    def plain_json_as_is(value: Any) -> str | None:
        """`canonical_json` of `value` as `fingerprints` normalizes it, when normalizing would
        change nothing (only dicts with str keys, lists, tuples, str, int, float, bool, and no
        None, which it drops) and orjson writes it as the standard library does; else None.
        orjson refuses the rest itself (other keys) or through `_refuse` (objects)."""
        try:
            out = orjson.dumps(value, default=_refuse, option=_ORJSON_SORTED)
        except (TypeError, ValueError):
            return None
        return None if _may_differ(out) else out.decode("utf-8")
else:  # pragma: no cover
    dumps = _stdlib_dumps
    canonical_plain_json = canonical_json

    def plain_json_as_is(value: Any) -> str | None:
        return None


def _may_differ(out: bytes) -> bool:
    """Whether orjson's `out` may not be the standard library's text: it holds null (NaN or
    an infinity, which the standard library writes as such; also a None), "0.0000" or a
    one-digit negative exponent (a float below 1e-4)."""
    return b"null" in out or b"0.0000" in out or (b"e-" in out and _short_negative_exponent(out))


def _short_negative_exponent(out: bytes) -> bool:
    """Whether `out` holds a digit, "e-" and one digit not followed by another (1e-9: orjson's
    exponent where the standard library writes 1e-09); words ("re-run") are skipped."""
    at = out.find(b"e-")
    while at != -1:
        if at and 48 <= out[at - 1] <= 57 and at + 2 < len(out) and 48 <= out[at + 2] <= 57 \
                and not (at + 3 < len(out) and 48 <= out[at + 3] <= 57):
            return True
        at = out.find(b"e-", at + 2)
    return False


def truncate(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut `text` to at most `max_bytes` UTF-8 bytes (marker included); says whether it cut."""
    encoded = text.encode("utf-8")
    if max_bytes <= 0 or len(encoded) <= max_bytes:
        return text, False
    dropped = len(encoded) - max_bytes
    marker = TRUNCATION_MARKER.format(dropped=dropped)
    keep = max(0, max_bytes - len(marker.encode("utf-8")))
    return encoded[:keep].decode("utf-8", "ignore") + marker, True


def set_attributes(span: Any, attributes: dict[str, Any], *, max_bytes: int = 0,
                   on_truncate: Callable[[str], None] | None = None) -> None:
    """Set every non-None value of `attributes` on `span`.

    Strings longer than `max_bytes` are cut with a visible marker, the span gets
    ``tracefix.truncated = true`` and `on_truncate(key)` is called (the session uses it to
    mark itself not replayable). Non-primitive values are written as JSON.
    """
    clean: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        kind = type(value)
        if kind is str:  # the common cases first, by exact type
            text = value
        elif kind is int or kind is float or kind is bool or isinstance(value, (bool, int, float)):
            clean[key] = value
            continue
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            clean[key] = list(value)
            continue
        else:
            text = value if isinstance(value, str) else dumps(value)
        if max_bytes and len(text) * 4 > max_bytes:  # cheap pre-check before encoding
            text, cut = truncate(text, max_bytes)
            if cut:
                clean[TRUNCATED] = True
                if on_truncate is not None:
                    on_truncate(key)
        clean[key] = text
    if clean:
        span.set_attributes(clean)
