"""Whole session documents, many at a time: `POST /api/v1/import` writes message-log sessions
(tracefix.collector.imports; with skip_stored, those stored already are left out), and
`GET /api/v1/training_sessions` pages through the stored sessions the detectors learn from."""
from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tracefix.collector import jsonsafe
from tracefix.collector.api.bodies import read_json
from tracefix.collector.api.context import ApiContext
from tracefix.collector.api.paging import page_params, query_params, streamed_page
from tracefix.collector.imports import ImportFormatError
from tracefix.collector.responses import JSONResponse
from tracefix.collector.schemas.bodies import ImportRequest, parse_body


def routes(api: ApiContext) -> list[Route]:
    cfg, store, write = api.cfg, api.store, api.write

    async def import_sessions(request: Request) -> Response:
        data = await read_json(request, cfg.max_body_bytes)
        parse_body(ImportRequest, data)  # checked; the store reads the documents as sent
        docs = data.get("sessions") if isinstance(data, dict) else data
        skip_stored = isinstance(data, dict) and data.get("skip_stored") is True
        try:
            ids, skipped = await write(lambda s: s.import_new_sessions(docs) if skip_stored
                                       else (s.import_sessions(docs), []))
        except ImportFormatError as exc:
            raise ValueError(str(exc)) from exc
        return JSONResponse({"session_ids": ids, "skipped": skipped}, status_code=201)

    async def training_sessions(request: Request) -> Response:
        # Paged like every read of contents: a store's successful sessions, whole, are more
        # than one answer should hold (a page ends after PAGE_BUDGET_CHARS of documents).
        q = query_params(request)
        criterion = q.choice("criterion", ("success", "positive", "all"), default="success")
        offset, limit = page_params(q, default_limit=100)
        ids = await run_in_threadpool(store.training_session_ids, criterion)

        def documents():
            for position, sid in enumerate(ids[offset:offset + limit], start=offset):
                doc = store.get_session(sid)
                if doc is not None:  # gone since it was listed
                    text = jsonsafe.dumps(doc, ensure_ascii=False)
                    yield position, text, len(text)

        return streamed_page("sessions", len(ids), offset, documents())

    return [
        Route("/api/v1/import", api.guarded(import_sessions), methods=["POST"]),
        Route("/api/v1/training_sessions", api.guarded(training_sessions)),
    ]
