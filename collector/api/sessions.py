"""A session's contents, read: the list of sessions (`/api/v1/sessions`), one page of a session,
its spans and its stored message texts (paged, streamed), one step and one message uncut.
Session ids may hold `/`: every path under /api/v1/sessions/ reads them with the
`session_id` convertor of tracefix.collector.url_input."""
from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tracefix.collector import document, jsonsafe, otlp
from tracefix.collector.api.context import ApiContext
from tracefix.collector.api.errors import error
from tracefix.collector.api.paging import page_params, query_params, streamed_page
from tracefix.collector.responses import JSONResponse
from tracefix.collector.store import UnknownSession
from tracefix.collector.session_list import DIAGNOSIS_STATES, SESSION_SORTS
from tracefix.collector.url_input import InvalidParameter


def routes(api: ApiContext) -> list[Route]:
    store = api.store

    async def list_sessions(request: Request) -> Response:
        q = query_params(request)
        kwargs = {k: q.text(k) for k in ("outcome", "service", "agent", "parent_session_id") if q.text(k)}
        kwargs.update({k: q.time(k) for k in ("since", "until") if q.text(k)})
        if q.text("feedback"):
            kwargs["feedback"] = q.choice("feedback", ("negative", "positive", "any"))
        kwargs.update({k: q.text(k) for k in ("model", "task") if q.text(k)})
        kwargs["diagnosis"] = q.choice("diagnosis", DIAGNOSIS_STATES)
        sort = q.choice("sort", SESSION_SORTS, default="time")
        descending = q.choice("order", ("desc", "asc"), default="desc") == "desc"
        limit = min(q.integer("limit", 50), 1000)
        offset = q.integer("offset", 0)
        min_cost, max_cost = q.amount("min_cost"), q.amount("max_cost")
        rows = await run_in_threadpool(lambda: store.list_sessions(
            limit=limit, offset=offset, sort=sort, descending=descending, min_cost=min_cost, max_cost=max_cost,
            **kwargs))
        return JSONResponse({"sessions": rows, "limit": limit, "offset": offset})

    async def get_session(request: Request) -> Response:
        sid = request.path_params["session_id"]
        q = query_params(request)
        offset, limit = page_params(q, default_limit=100)
        max_chars = q.integer("max_chars", 2000, low=1, high=1_000_000)
        content = q.choice("content", ("previews", "keys"), default="previews")
        doc = await run_in_threadpool(store.session_page, sid, offset, limit, max_chars, content)
        if doc is None:
            raise UnknownSession(sid)
        return JSONResponse(doc)

    async def get_step(request: Request) -> Response:
        sid = request.path_params["session_id"]
        raw = request.path_params["index"]
        if not raw.isdigit() or len(raw) > 10:
            raise InvalidParameter("index", f"must be a step number, not {raw[:40]!r}", where="path segment")
        index = int(raw)
        step = await run_in_threadpool(store.session_step, sid, index)
        if step is None:
            if not await run_in_threadpool(store.session_exists, sid):
                raise UnknownSession(sid)
            return error(404, f"session {sid!r} has no step {index}")
        return JSONResponse(step)

    async def get_message(request: Request) -> Response:
        sid = request.path_params["session_id"]
        try:
            key = document.key_from_ref(request.path_params["key"])
        except ValueError as exc:
            raise otlp.OtlpError(422, str(exc)) from None
        text = await run_in_threadpool(store.session_message, sid, key)
        if text is None:
            if not await run_in_threadpool(store.session_exists, sid):
                raise UnknownSession(sid)
            return error(404, f"session {sid!r} has no message {request.path_params['key']!r}")
        return JSONResponse({"key": document.key_ref(key), "message": document.stored_message(text)})

    async def get_spans(request: Request) -> Response:
        sid = request.path_params["session_id"]
        offset, limit = page_params(query_params(request), default_limit=500)

        def spans(chosen, cur):
            for n, span in enumerate(store.iter_spans(chosen, cur)):
                text = jsonsafe.dumps(span, ensure_ascii=False)
                yield offset + n, text, len(text)

        return await streamed_rows("spans", sid, offset, limit, store.session_span_rowids, spans)

    async def list_messages(request: Request) -> Response:
        sid = request.path_params["session_id"]
        offset, limit = page_params(query_params(request), default_limit=100)

        def messages(chosen, cur):
            position = {k: offset + i for i, k in enumerate(chosen)}
            for key, text in store.iter_message_texts(chosen, cur):
                yield (position[key], jsonsafe.dumps({"key": document.key_ref(key), "text": text}, ensure_ascii=False),
                       len(text))

        return await streamed_rows("messages", sid, offset, limit, store.session_message_keys, messages)

    async def streamed_rows(field: str, sid: str, offset: int, limit: int, list_ids, read_rows) -> Response:
        """A page of one session's rows, streamed: `list_ids(sid, cursor)` names them all (None:
        unknown session), `read_rows(chosen, cursor)` yields the page's (position, JSON, size).
        The stream reads on after the handler returns, from other threads: on a cursor of its own."""
        cur = store.cursor()
        try:
            ids = await run_in_threadpool(list_ids, sid, cur)
            if ids is None:
                raise UnknownSession(sid)
            chosen = ids[offset:offset + limit]

            def items():
                try:
                    yield from read_rows(chosen, cur)
                finally:
                    cur.close()

            return streamed_page(field, len(ids), offset, items())
        except BaseException:
            cur.close()
            raise

    return [
        Route("/api/v1/sessions", api.guarded(list_sessions)),
        # ids may hold `/`: {session_id:session_id} on every route under /api/v1/sessions/ (url_input)
        Route("/api/v1/sessions/{session_id:session_id}", api.guarded(get_session)),
        Route("/api/v1/sessions/{session_id:session_id}/spans", api.guarded(get_spans)),
        Route("/api/v1/sessions/{session_id:session_id}/steps/{index}", api.guarded(get_step)),
        Route("/api/v1/sessions/{session_id:session_id}/messages", api.guarded(list_messages)),
        Route("/api/v1/sessions/{session_id:session_id}/messages/{key}", api.guarded(get_message)),
    ]
