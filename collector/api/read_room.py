"""A read the store's memory limit cannot hold is answered once more, with room.

DuckDB reads a row the running process wrote a whole vector of its string column at a time
(until the file is next opened): with long prompts one message of a session's page costs
hundreds of MB, more than `TRACEFIX_DB_MEMORY_LIMIT` (256MB by default) holds, and the read
fails with DuckDB's OutOfMemoryException. Such a read runs again under the memory a
checkpoint gets (`StoreConnection.widen_reads`), one such read at a time, and the store's own
limit comes back after it: `ReadRoom.again`, used by the API (`RetryReadsWithRoom`, for a GET
or HEAD nothing of whose answer has gone out) and by the web UI's pages."""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Awaitable, Callable, TypeVar

import duckdb
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from tracefix.collector.store import Store

log = logging.getLogger("tracefix.collector")

T = TypeVar("T")


class ReadRoom:
    """Reads run again with room, one at a time (each may take hundreds of MB)."""

    def __init__(self, store: "Store"):
        self.store = store
        self._one_at_a_time = asyncio.Lock()

    async def again(self, what: str, error: str, read: Callable[[], Awaitable[T]]) -> T:
        log.warning("%s needed more memory than the store's limit (%s); reading it again with room",
                    what, error.splitlines()[0])
        async with self._one_at_a_time:
            await run_in_threadpool(self.store.widen_reads)
            try:
                return await read()
            finally:
                await run_in_threadpool(self.store.narrow_reads)


class RetryReadsWithRoom:
    """The API's GET and HEAD that ran out of the store's memory, answered again with room
    (a streamed answer already under way cannot be taken back, and fails)."""

    def __init__(self, app: ASGIApp, room: ReadRoom):
        self.app = app
        self.room = room

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking)
            return
        except duckdb.OutOfMemoryException as exc:
            if started:
                raise
            error = str(exc)
        await self.room.again(f"GET {scope['path']}", error, lambda: self.app(scope, receive, send))
