"""What every store access object shares (`access.connect` returns one): `AccessError`, and
closing as a context manager."""
from __future__ import annotations

from tracefix.errors import TracefixError


class AccessError(TracefixError, RuntimeError):
    """The store could not be reached (`status` None) or refused the request (its HTTP status)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class AccessBase:
    """`with access:` closes it; `close` releases what the access holds."""

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
