"""What every router of the API shares: the collector it serves (its config, store and
writer), the wrapper each route's handler runs in (`guarded`: the bearer token, and the
answer to each error a handler may raise) and `write`, which runs a change on the single
writer.

Bearer tokens, when configured, are required on every route but `/healthz`: the ingest
token opens `/v1/traces`, `POST /api/v1/feedback` and `POST .../annotations`, the API token every route
(tracefix.collector.auth).
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from tracefix.collector.api.errors import busy, error
from tracefix.collector.auth import API, UI_COOKIE
from tracefix.collector.writer import QueueFull
from tracefix.errors import TracefixError

if TYPE_CHECKING:
    from tracefix.collector.server import Collector


class ApiContext:
    """The collector one app serves, as its routers read it."""

    def __init__(self, collector: "Collector"):
        self.collector = collector
        self.cfg = collector.config
        self.store = collector.store
        self.writer = collector.writer

    def guarded(self, handler, scope: str = API):
        collector = self.collector

        async def wrapped(request: Request) -> Response:
            if not collector.tokens.allows_request(request.headers.get("authorization"),
                                                   request.cookies.get(UI_COOKIE), request.method, scope):
                return error(401, "missing or wrong bearer token", hint="send 'Authorization: Bearer <token>'")
            try:
                return await handler(request)
            except QueueFull as exc:  # with the Retry-After the writer's and the spool's backlog call for
                return busy(f"collector busy: {exc}; retry later", collector.ingest.retry_delay_s())
            except TracefixError as exc:  # each says its status and code (tracefix.errors)
                return error(exc.http_status, str(exc), code=exc.error_code, **exc.http_details())
            except ValueError as exc:
                return error(400, str(exc))
        return wrapped

    async def write(self, fn):
        return await asyncio.wrap_future(self.writer.call(fn))
