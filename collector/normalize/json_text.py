"""JSON text on the ingest path: orjson when installed (3-10x faster), the stdlib otherwise,
the same text either way."""
from __future__ import annotations

import json
from typing import Any

from tracefix.collector import jsonsafe


try:  # orjson is 3-10x faster on the ingest path; the stdlib gives the same text otherwise
    import orjson
except ImportError:  # pragma: no cover - orjson is in the collector extra
    orjson = None


def dumps_compact(value: Any, sort_keys: bool = False) -> str:
    """Compact JSON text (`separators=(",", ":")`, UTF-8 kept), keys sorted on request.
    NaN and infinities become null, as orjson writes them: the text is always valid JSON."""
    if orjson is not None:
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0).decode()
        except (TypeError, orjson.JSONEncodeError):  # ints over 64 bits, non-str keys: stdlib path
            pass
    return jsonsafe.dumps(value, ensure_ascii=False, sort_keys=sort_keys, separators=(",", ":"))


def dumps_each_sorted(values: list) -> list[str]:
    """`dumps_compact(value, sort_keys=True)` of each value (a call's messages: one call of
    orjson each, without the per-value fallback unless one needs it)."""
    if orjson is not None:
        try:
            return [orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode() for value in values]
        except (TypeError, orjson.JSONEncodeError):
            pass
    return [dumps_compact(value, sort_keys=True) for value in values]


def loads_fast(text: str) -> Any:
    if orjson is not None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)  # raises ValueError on bad JSON (orjson's error is a ValueError too)


def json_text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return jsonsafe.dumps(v, ensure_ascii=False)
