"""The errors tracefix raises on purpose, all under one base.

Defined at the lowest layer (the instrumentation, importable without duckdb or torch) so
every part can raise and catch them: `except TracefixError` catches what tracefix itself
refused or could not do. Each class says how the HTTP API answers it (`http_status`,
`error_code`, `http_details`), so the API maps them to 4xx in one place. A class also keeps the built-in
base it had before (ValueError, KeyError, ...), so callers that caught that still do.
"""
from __future__ import annotations

from typing import Any


class TracefixError(Exception):
    """Something tracefix refused or could not do (bad input, unknown id, a failed stage)."""

    http_status = 400  # what the API answers when a request runs into it
    error_code: str | None = None  # the answer's machine-readable `code` (None: the status's own)

    def http_details(self) -> dict[str, Any]:
        """Fields the API's error body carries beside `error` (the message)."""
        return {}


class UnknownSession(TracefixError, KeyError):
    """No session with this id is stored. A KeyError too: a lookup by id that found nothing."""

    http_status = 404
    error_code = "unknown_session"

    def __init__(self, session_id: str, message: str | None = None):
        super().__init__(session_id)
        self.session_id = session_id
        self.message = message or f"unknown session {session_id!r}"

    def __str__(self) -> str:  # KeyError would print the id's repr alone
        return self.message

    def __reduce__(self):  # raised in a worker process, re-raised where it was called
        return (type(self), (self.session_id, self.message))
