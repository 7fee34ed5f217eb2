"""The routes about the collector itself: `/healthz` (liveness and write progress, without a
token), `/metrics` (Prometheus), `/openapi.json` (the API described, tracefix.collector.openapi)
and `/api/v1/store` (the store's file, for token holders)."""
from __future__ import annotations

import functools
from typing import Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tracefix import __version__
from tracefix.collector import jsonsafe, openapi
from tracefix.collector.access import store_identity
from tracefix.collector.api.context import ApiContext
from tracefix.collector.responses import JSONResponse


def routes(api: ApiContext, route_table: Callable[[], list[tuple[str, set[str] | None]]]) -> list[Route]:
    """`route_table()`: (path template, methods) of every route of the app, read when
    `/openapi.json` is first asked for."""
    collector, store, writer = api.collector, api.store, api.writer

    # /healthz answers without a token: it names the store by an identity a client with
    # access to the same file can compute (tracefix.collector.access.connect), not its path
    store_id = store_identity(store.path)

    async def healthz(request: Request) -> Response:
        spool = collector.spool
        fault = writer.fault  # why the store cannot write (tracefix.collector.writer), read once
        return JSONResponse({"status": "unhealthy" if fault else "ok", "reason": fault, "store_id": store_id,
                             "pending_spans": writer.pending_spans,
                             "committed_spans": writer.committed_spans, "transactions": writer.transactions,
                             "checkpoints": collector.checkpointer.checkpoints,
                             "spooled_requests": spool.pending_requests if spool else 0,
                             "spooled_spans": spool.pending_spans if spool else 0,
                             "spool_bytes": spool.bytes if spool else 0}, status_code=503 if fault else 200)

    async def store_info(request: Request) -> Response:
        """The store's file, for clients holding the token (the analysis keeps its models beside it)."""
        return JSONResponse({"db": store.path, "store_id": store_id})

    async def metrics(request: Request) -> Response:
        """Prometheus text format, behind the API token: Prometheus sends it (`authorization:`
        in a scrape config), and the counts describe this deployment's traffic."""
        body, media = await run_in_threadpool(collector.metrics.render)
        return Response(body, media_type=media)

    @functools.cache
    def openapi_document() -> bytes:  # built at the first request: the models' schemas cost ~0.2 s
        return jsonsafe.dumps(openapi.document(route_table(), __version__)).encode()

    async def openapi_json(request: Request) -> Response:
        return Response(await run_in_threadpool(openapi_document), media_type="application/json")

    return [
        Route("/healthz", healthz),
        Route("/openapi.json", api.guarded(openapi_json)),
        Route("/metrics", api.guarded(metrics)),
        Route("/api/v1/store", api.guarded(store_info)),
    ]
