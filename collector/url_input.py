"""What the API reads from a request's URL: query parameters and session ids in paths.

Query parameters: `QueryParams` parses each one or raises `InvalidParameter` (answered 422
naming the parameter), so a value the store cannot use never reaches it.

Session ids: an id may hold any character, `/` included; clients send it as one
percent-encoded path segment (`a%2Fb`). The ASGI server decodes `%2F` before routing,
which would split the id, so `SessionPaths` routes `/api/v1/sessions/...` on the path as
received, segment by segment, and the `{session_id:session_id}` convertor decodes the id.
Every route under that prefix names its id with this convertor.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, overload
from urllib.parse import quote, unquote

from starlette.convertors import Convertor, register_url_convertor

from tracefix.collector import document
from tracefix.errors import TracefixError

SESSIONS_PREFIX = "/api/v1/sessions/"
INT64_MAX = document.INT64_MAX
_INTEGER = re.compile(r"[+-]?[0-9]{1,20}")


class InvalidParameter(TracefixError, ValueError):
    """A query parameter the API cannot use (answered 422)."""

    http_status = 422
    error_code = "invalid_parameter"

    def __init__(self, name: str, problem: str, where: str = "query parameter"):
        super().__init__(f"{where} {name!r}: {problem}")
        self.name = name

    def http_details(self) -> dict:
        return {"parameter": self.name}


class QueryParams:
    """Typed, validated access to a request's query parameters. An empty value (`limit=`)
    counts as absent, as an HTML form sends a field left blank (the web UI's filters: "any"),
    unless `refuse_empty` (the API's routes): then it is refused (422), since a client that
    sends `limit=` meant some value and would otherwise silently get the default."""

    def __init__(self, query: Mapping[str, str], *, refuse_empty: bool = False):
        self.query = query
        self.refuse_empty = refuse_empty

    def _given(self, name: str, value: str | None) -> str | None:
        if value == "" and self.refuse_empty:
            raise InvalidParameter(name, "is empty: give a value or leave the parameter out")
        return value or None

    @overload
    def text(self, name: str, default: str) -> str: ...
    @overload
    def text(self, name: str, default: None = None) -> str | None: ...

    def text(self, name: str, default: str | None = None) -> str | None:
        return self._given(name, self.query.get(name)) or default

    def texts(self, name: str, most: int) -> list[str] | None:
        """Every value of a repeated parameter (`?name=a&name=b`); None when absent."""
        getlist = getattr(self.query, "getlist", None)
        values = [given for v in (getlist(name) if getlist else [self.query.get(name)])
                  if (given := self._given(name, v))]
        if len(values) > most:
            raise InvalidParameter(name, f"may be given at most {most} times, not {len(values)}")
        return values or None

    @overload
    def choice(self, name: str, options: Iterable[str], default: str) -> str: ...
    @overload
    def choice(self, name: str, options: Iterable[str], default: None = None) -> str | None: ...

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

    def amount(self, name: str) -> float | None:
        """A finite number of at least 0 (a cost in USD); None when absent."""
        raw = self.text(name)
        if raw is None:
            return None
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not 0 <= value < float("inf"):
            raise InvalidParameter(name, f"must be a number of at least 0, not {raw[:40]!r}")
        return value

    def time(self, name: str) -> str | None:
        """An ISO-8601 time or epoch seconds, checked to be a time the store can compare
        with (the store reads the text itself, so the text is what is returned)."""
        raw = self.text(name)
        if raw is None:
            return None
        try:
            document.to_ns(raw)
        except ValueError as exc:
            raise InvalidParameter(name, str(exc)) from None
        return raw


class SessionIdConvertor(Convertor):
    """A path segment that still carries its percent-encoding (see SessionPaths), decoded."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return unquote(value)

    def to_string(self, value: str) -> str:
        return quote(value, safe="")


register_url_convertor("session_id", SessionIdConvertor())


def _segments_kept_apart(raw_path: str) -> str:
    """The path decoded segment by segment, with `%` and `/` inside a segment re-encoded:
    `/api/v1/sessions/a%2Fb/spans` stays four segments after the prefix's three."""
    return "/".join(unquote(seg).replace("%", "%25").replace("/", "%2F") for seg in raw_path.split("/"))


class SessionPaths:
    """ASGI middleware: requests under /api/v1/sessions/ are routed on their path as received."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path", "").startswith(SESSIONS_PREFIX):
            raw = scope.get("raw_path")
            if raw:
                raw_path = raw.split(b"?", 1)[0].decode("utf-8", "replace")
            else:  # a server without raw_path: a decoded `/` cannot be told apart, a `%` can
                raw_path = scope["path"].replace("%", "%25")
            scope = {**scope, "path": _segments_kept_apart(raw_path)}
        await self.app(scope, receive, send)
