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


def dumps(value: Any) -> str:
    """Compact JSON for attributes; never raises on odd objects."""
    return json.dumps(value, ensure_ascii=False, default=_json_default, separators=(",", ":"))


def canonical_json(value: Any) -> str:
    """Deterministic JSON (sorted keys, compact) — the input of every fingerprint and hash."""
    return json.dumps(value, ensure_ascii=False, default=_json_default, sort_keys=True,
                      separators=(",", ":"))


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
