"""What the API reads from a request's URL: query parameters.

`QueryParams` parses each one or raises `InvalidParameter` (answered 422 naming the
parameter), so a value the store cannot use never reaches it.
"""
from __future__ import annotations

import math
import re
from typing import Iterable, Mapping

from tracefix.collector import document

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_INTEGER = re.compile(r"[+-]?[0-9]{1,20}")


class InvalidParameter(ValueError):
    """A query parameter the API cannot use (answered 422)."""

    def __init__(self, name: str, problem: str):
        super().__init__(f"query parameter {name!r}: {problem}")
        self.name = name


class QueryParams:
    """Typed, validated access to a request's query parameters. An empty value counts as absent."""

    def __init__(self, query: Mapping[str, str]):
        self.query = query

    def text(self, name: str, default: str | None = None) -> str | None:
        return self.query.get(name) or default

    def choice(self, name: str, options: Iterable[str], default: str | None = None) -> str | None:
        value = self.text(name, default)
        options = tuple(options)
        if value is not None and value not in options:
            raise InvalidParameter(name, f"must be one of {', '.join(options)}, not {value!r}")
        return value

    def integer(self, name: str, default: int, *, low: int = 0, high: int = INT64_MAX) -> int:
        raw = self.text(name)
        if raw is None:
            return default
        if not _INTEGER.fullmatch(raw.strip()):
            raise InvalidParameter(name, f"must be a whole number, not {raw[:40]!r}")
        value = int(raw)
        if not low <= value <= high:
            bound = f"at least {low}" if value < low else f"at most {high}"
            raise InvalidParameter(name, f"must be {bound}, not {raw[:40]}")
        return value

    def time(self, name: str) -> str | None:
        """An ISO-8601 time or epoch seconds, checked to be a time the store can compare
        with (the store reads the text itself, so the text is what is returned)."""
        raw = self.text(name)
        if raw is None:
            return None
        try:
            number = float(raw)
        except ValueError:
            number = None
        if number is not None and not math.isfinite(number):
            raise InvalidParameter(name, f"must be a finite time, not {raw[:40]!r}")
        try:
            ns = document.to_ns(raw)
        except (ValueError, OverflowError) as exc:
            raise InvalidParameter(name, f"must be an ISO-8601 time or epoch seconds, not {raw[:40]!r}") from exc
        if not INT64_MIN <= ns <= INT64_MAX:
            raise InvalidParameter(name, f"{raw[:40]!r} is out of range (years 1678 to 2262)")
        return raw
