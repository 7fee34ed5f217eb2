"""The GenAI metrics' stored data points (`GET /api/v1/metrics`): what OTLP metrics exports of
`gen_ai.client.token.usage`, `gen_ai.client.operation.duration` (and any other `gen_ai.*`
metric) brought, oldest first, as sent (tracefix.collector.normalize.metric_points).
The collector's own telemetry is `GET /metrics` (Prometheus), not this."""
from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tracefix.collector import document
from tracefix.collector.api.context import ApiContext
from tracefix.collector.api.paging import query_params
from tracefix.collector.responses import JSONResponse
from tracefix.collector.store.signals import MAX_POINTS


def routes(api: ApiContext) -> list[Route]:
    store = api.store

    async def metric_points(request: Request) -> Response:
        q = query_params(request)
        since, until = q.time("since"), q.time("until")
        limit = q.integer("limit", 1000, low=1, high=MAX_POINTS)
        found = await run_in_threadpool(
            store.metric_points, name=q.text("name"), service=q.text("service"), model=q.text("model"),
            since_ns=document.to_ns(since) if since else None, until_ns=document.to_ns(until) if until else None,
            limit=limit)
        return JSONResponse(found)

    return [Route("/api/v1/metrics", api.guarded(metric_points), methods=["GET"])]
