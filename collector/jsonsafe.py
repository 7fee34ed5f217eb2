"""JSON text that every reader can parse: NaN and ±Infinity become null.

Python's json writes non-finite floats as `NaN` / `Infinity`, which is not JSON (Starlette
refuses to send it, strict parsers refuse to read it). A store may hold such numbers
(an older version accepted them, or another writer put them there), so everything the
collector sends out as JSON (API answers, alert payloads and webhook bodies) is written
by `dumps`, which maps them to null instead of failing.
"""
from __future__ import annotations

import json
import math
from typing import Any


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
