"""A read the store's memory limit cannot hold is answered once more, with room.

DuckDB reads a row the running process wrote a whole vector of its string column at a time
(until the file is next opened): with long prompts one message of a session's page costs
hundreds of MB, more than `TRACEFIX_DB_MEMORY_LIMIT` (256MB by default) holds, and the read
fails with DuckDB's OutOfMemoryException. Such a GET or HEAD, if nothing of its answer has
gone out yet, runs again under the memory a checkpoint gets (`StoreConnection.widen_reads`),
one such retry at a time, and the store's own limit comes back after it."""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import duckdb
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from tracefix.collector.store import Store

log = logging.getLogger("tracefix.collector")


class RetryReadsWithRoom:
    def __init__(self, app: ASGIApp, store: "Store"):
        self.app = app
        self.store = store
        self._one_at_a_time = asyncio.Lock()

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
            if started:  # a streamed answer failed midway: it cannot be taken back
                raise
            log.warning("GET %s needed more memory than the store's limit (%s); reading it again with room",
                        scope["path"], exc)
        async with self._one_at_a_time:
            await run_in_threadpool(self.store.widen_reads)
            try:
                await self.app(scope, receive, send)
            finally:
                await run_in_threadpool(self.store.narrow_reads)
