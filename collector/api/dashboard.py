"""The dashboards' charts as data: `GET /api/v1/dashboard/{chart}` answers one chart's series
over time (collector.store.dashboard: one DuckDB query per chart), per service, model,
agent or tool, for a range given as `since` / `until` or a `range` back from now."""
from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tracefix.collector import document
from tracefix.collector.api.context import ApiContext
from tracefix.collector.api.paging import query_params
from tracefix.collector.responses import JSONResponse
from tracefix.collector.charts import CHARTS, GROUPINGS, MAX_BUCKETS, RANGES
from tracefix.collector.url_input import InvalidParameter

PATH = "/api/v1/dashboard/{chart}"


def routes(api: ApiContext) -> list[Route]:
    store = api.store

    async def chart(request: Request) -> Response:
        name = request.path_params["chart"]
        if name not in CHARTS:
            raise InvalidParameter("chart", f"must be one of {', '.join(CHARTS)}", where="path segment")
        q = query_params(request)
        by = q.choice("by", GROUPINGS, default="service")
        preset = q.choice("range", tuple(RANGES), default="all")
        buckets = q.integer("buckets", 24, low=1, high=MAX_BUCKETS)
        since, until = (document.to_ns(t) if (t := q.time(name)) else None for name in ("since", "until"))

        def read() -> dict:
            lo, hi = store.time_range(preset, since, until)
            return store.chart(name, by=by, since_ns=lo, until_ns=hi, buckets=buckets)

        return JSONResponse(await run_in_threadpool(read))

    return [Route(PATH, api.guarded(chart))]
