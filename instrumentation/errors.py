"""The errors tracefix raises on purpose, all under one base.

Defined at the lowest layer (the instrumentation, importable without duckdb or torch) so
every part can raise and catch them: `except TracefixError` catches what tracefix itself
refused or could not do, and the HTTP API maps these to 4xx answers in one place. Each
class also keeps the built-in base it had before (ValueError, KeyError, ...), so callers
that caught that still do.
"""
from __future__ import annotations


class TracefixError(Exception):
    """Something tracefix refused or could not do (bad input, unknown id, a failed stage)."""


class UnknownSession(TracefixError, KeyError):
    """No session with this id is stored. A KeyError too: a lookup by id that found nothing."""

    def __init__(self, session_id: str):
        super().__init__(session_id)
        self.session_id = session_id

    def __str__(self) -> str:  # KeyError would quote the id as a repr
        return f"unknown session {self.session_id!r}"
