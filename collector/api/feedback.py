"""Feedback in, and the alerts it raised out: `POST /api/v1/feedback` (open to the ingest token:
an instrumented app sends its users' thumbs) records a score and, below the alert threshold,
raises an alert and queues a diagnosis; `GET /api/v1/alerts` lists the alerts and how their
webhook deliveries went."""
from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tracefix.collector.api.bodies import read_model
from tracefix.collector.api.context import ApiContext
from tracefix.collector.api.errors import error
from tracefix.collector.api.paging import listed, page_params, query_params, streamed_page
from tracefix.collector.auth import INGEST
from tracefix.collector.responses import JSONResponse
from tracefix.collector.schemas.bodies import FeedbackRequest
from tracefix.collector.schemas.queries import LIST_ORDERS
from tracefix.collector.store import check_score


def routes(api: ApiContext) -> list[Route]:
    collector, store, write = api.collector, api.store, api.write

    async def feedback(request: Request) -> Response:
        data = await read_model(request, FeedbackRequest, 1 << 20)
        try:  # NaN / Infinity (or 1e400): refused before anything is written
            check_score(data.score)
        except ValueError as exc:
            return error(422, str(exc))
        fb = await write(lambda s: s.add_feedback(data.session_id, data.score, data.comment, source="api",
                                                  **collector.feedback_options()))
        collector.feedback_recorded(fb)
        return JSONResponse(fb, status_code=201)

    async def alerts(request: Request) -> Response:
        q = query_params(request)
        offset, limit = page_params(q, default_limit=100)
        session_id = q.text("session_id")
        newest_first = q.choice("order", LIST_ORDERS, default="oldest") == "newest"

        def read() -> tuple[int, list[dict]]:
            return (store.count_alerts(session_id),
                    store.list_alerts(session_id, offset=offset, limit=limit, newest_first=newest_first))

        total, rows = await run_in_threadpool(read)
        return streamed_page("alerts", total, offset, listed(rows, offset))

    return [
        Route("/api/v1/feedback", api.guarded(feedback, INGEST), methods=["POST"]),
        Route("/api/v1/alerts", api.guarded(alerts)),
    ]
