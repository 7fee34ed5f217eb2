"""The HTTP side of `tracefix serve` (starlette): OTLP/HTTP `POST /v1/traces` and the JSON API.

Reads run on store cursors in the thread pool; every write goes through the single writer.
Bearer tokens, when configured, are required on every route but `/healthz`: the ingest
token opens `/v1/traces` and `POST /api/v1/feedback`, the API token every route
(tracefix.collector.auth). JSON leaves through `responses.JSONResponse` (non-finite numbers
become null), query parameters and session ids in paths are read by `url_input`, request
bodies are validated by the models of `schemas` (described, with every answer, in
`GET /openapi.json`, tracefix.collector.openapi), every 4xx/5xx is `error()`'s one shape, and
every answer carries the security headers of `responses.SecurityHeaders`.
"""
from __future__ import annotations

import asyncio
import functools
import json
import math
import logging
from typing import TYPE_CHECKING, Any, Callable, Mapping

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route

from tracefix import __version__
from tracefix.attributes import MAX_JSON_DEPTH, nested_too_deeply
from tracefix.collector import document, jsonsafe, openapi, otlp
from tracefix.collector.access import store_identity
from tracefix.collector.auth import API, INGEST, UI_COOKIE
from tracefix.collector.imports import ImportFormatError
from tracefix.collector.jobs import JOB_KINDS, JOB_STATES
from tracefix.collector.decoding import DecodeFailed
from tracefix.collector.responses import REPORT_CSP, SECURITY_HEADERS, JSONResponse, SecurityHeaders
from tracefix.collector.schemas import (ERROR_CODES, AnalysisResult, ClaimRequest, FeedbackRequest, FinishRequest,
                                        ImportRequest, InvalidBody, JobRequest, LeaseRequest, LIST_ORDERS, ReplayResult,
                                        parse_body)
from tracefix.collector.spool import SpooledRequest
from tracefix.collector.store import PAGE_BUDGET_CHARS, UnknownSession, check_score
from tracefix.collector.url_input import InvalidParameter, QueryParams, SessionPaths
from tracefix.collector.writer import QueueFull
from tracefix.errors import TracefixError

if TYPE_CHECKING:
    from tracefix.collector.server import Collector

log = logging.getLogger("tracefix.collector")


def error(status: int, message: str, code: str | None = None, headers: Mapping[str, str] | None = None,
          **extra: Any) -> JSONResponse:
    """Every 4xx/5xx answer of the API: `schemas.ErrorBody`, `code` by status unless given."""
    headers = dict(headers or {})
    if status in (429, 503):
        headers.setdefault("Retry-After", "1")
    if status == 408:  # the client stalled mid-body: the connection cannot carry another request
        headers["Connection"] = "close"
    return JSONResponse({"error": message, "code": code or ERROR_CODES.get(status, "error"), **extra},
                        status_code=status, headers=headers or None)


def busy(message: str, delay_s: float) -> JSONResponse:
    """429 for back-pressure: Retry-After (whole seconds, RFC 9110) is the delay the gRPC
    receiver sends in RetryInfo (`Ingest.retry_delay_s`), rounded up; the body has it exact."""
    return error(429, message, retry_after_s=round(delay_s, 3), headers={"Retry-After": str(math.ceil(delay_s))})


# A request body must keep coming: no byte for BODY_IDLE_S, or less than MIN_BODY_RATE on
# average once BODY_GRACE_S have passed, and the upload is dropped (408, connection closed).
# Without this a socket that declares a large body and stalls holds its request forever.
BODY_IDLE_S = 10.0
BODY_GRACE_S = 10.0
MIN_BODY_RATE = 64 * 1024  # bytes per second: a 32 MiB body may take up to ~9 minutes


async def read_body(request: Request, limit: int, on_chunk: Callable[[int], None] | None = None) -> bytes:
    """The request's body, at most `limit` bytes (413 beyond), read within the deadlines
    above (408); `on_chunk(n)` is told of every chunk as it arrives and may raise."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise otlp.OtlpError(413, f"body of {declared} bytes exceeds the limit of {limit} bytes")
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None, "read_body runs in the request's task"
    start = last = loop.time()
    chunks, size, stalled = [], 0, False
    timer: asyncio.TimerHandle | None = None

    def due() -> float:  # when the upload is too slow unless more arrives before
        return min(last + BODY_IDLE_S, start + BODY_GRACE_S + size / MIN_BODY_RATE)

    def watch() -> None:  # one timer per request, moved on only when it fires (cheap per chunk)
        nonlocal timer, stalled
        if loop.time() >= due():
            stalled = True
            task.cancel()
        else:
            timer = loop.call_at(due(), watch)

    timer = loop.call_at(due(), watch)
    try:
        async for chunk in request.stream():
            size += len(chunk)
            last = loop.time()
            if size > limit:
                raise otlp.OtlpError(413, f"body exceeds the limit of {limit} bytes")
            if on_chunk is not None:
                on_chunk(len(chunk))
            chunks.append(chunk)
    except asyncio.CancelledError:
        if not stalled:
            raise
        if hasattr(task, "uncancel"):  # Python 3.11+: the cancellation was ours, and is over
            task.uncancel()
        raise otlp.OtlpError(408, f"request body too slow: {size} bytes in {loop.time() - start:.0f} s "
                                  f"(needed: a byte at least every {BODY_IDLE_S:g} s and "
                                  f"{MIN_BODY_RATE // 1024} KiB/s after {BODY_GRACE_S:g} s)") from None
    except ClientDisconnect as exc:
        raise otlp.OtlpError(400, "the client closed the connection before sending its whole body") from exc
    finally:
        timer.cancel()
    return b"".join(chunks)


async def read_json(request: Request, limit: int) -> Any:
    """The body's JSON value: strict UTF-8 holding JSON nested at most MAX_JSON_DEPTH deep (as
    the spans' messages and tool calls: what is stored, every reader walks) whose every string
    is Unicode text (JSON's `"\\ud800"` parses to a lone surrogate, which no store can hold), else 400."""
    body = await read_body(request, limit)
    try:
        text = body.decode("utf-8")
        if nested_too_deeply(text):
            raise ValueError(f"nested too deeply (more than {MAX_JSON_DEPTH} arrays and objects inside one another)")
        data = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise otlp.OtlpError(400, f"body is not valid UTF-8 JSON: {exc}") from exc
    where = jsonsafe.lone_surrogate_at(text, data)
    if where is not None:
        raise InvalidBody([{"field": where, "problem": "not valid Unicode text: a lone UTF-16 surrogate "
                                                        "(an escape in \\ud800-\\udfff without its pair)"}])
    return data


async def read_model(request: Request, model, limit: int):
    """The JSON body validated as `model` (tracefix.collector.schemas); InvalidBody otherwise."""
    return parse_body(model, await read_json(request, limit))


def in_request_encoding(request: Request, response: Response) -> Response:
    """An error answer to a protobuf request (an OTLP/HTTP exporter's) as OTLP/HTTP asks: a
    protobuf `google.rpc.Status` holding the error's text, and RetryInfo where the answer says
    when to retry (Retry-After stays too), with the answer's status and other headers. Any
    other answer, or an answer to any other request, is returned as it is (JSON)."""
    if response.status_code < 400 or otlp.media_type(request.headers.get("content-type")) != otlp.PROTOBUF:
        return response
    answer = json.loads(bytes(response.body))  # error()'s ErrorBody
    retry_after_s = answer.get("retry_after_s")
    if retry_after_s is None and response.headers.get("retry-after", "").isdigit():
        retry_after_s = float(response.headers["retry-after"])
    headers = {k: v for k, v in response.headers.items() if k not in ("content-type", "content-length")}
    return Response(otlp.error_status(response.status_code, answer["error"], retry_after_s),
                    status_code=response.status_code, headers=headers, media_type=otlp.PROTOBUF)


def otlp_route(handler):
    """An OTLP/HTTP route's handler, its error answers in the request's encoding."""
    async def answered(request: Request) -> Response:
        return in_request_encoding(request, await handler(request))
    return answered


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own answers (no such route 404, method not allowed 405) in the error shape."""
    assert isinstance(exc, HTTPException)  # registered for HTTPException only
    return in_request_encoding(request, error(exc.status_code, str(exc.detail), headers=exc.headers))


async def internal_error(request: Request, exc: Exception) -> Response:
    """A bug of ours: the error shape, and the security headers, since this answer is written
    outside the middleware that adds them."""
    log.error("%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
    return in_request_encoding(request, error(500, f"internal error ({type(exc).__name__})",
                                              headers=SECURITY_HEADERS))


STREAM_CHUNK_BYTES = 64 * 1024  # a streamed page is written in chunks of about this size


def query_params(request: Request) -> QueryParams:
    """The request's query parameters as the API reads them: an empty value (`limit=`) is a 422."""
    return QueryParams(request.query_params, refuse_empty=True)


def page_params(query: QueryParams, default_limit: int) -> tuple[int, int]:
    """`offset` and `limit` of a paged read (every read of a session's contents is paged)."""
    return query.integer("offset", 0, high=1 << 31), query.integer("limit", default_limit, low=1, high=1000)


def build_app(collector: "Collector") -> Starlette:
    cfg = collector.config
    store = collector.store
    writer = collector.writer

    def guarded(handler, scope: str = API):
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

    async def write(fn):
        return await asyncio.wrap_future(writer.call(fn))

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

    inflight = {"bytes": 0}  # request bodies being read or decoded right now

    async def traces(request: Request) -> Response:
        ctype = request.headers.get("content-type", "")
        mt = otlp.media_type(ctype)
        if mt not in (otlp.PROTOBUF, otlp.JSON):
            raise otlp.OtlpError(415, f"unsupported Content-Type {ctype!r}: use {otlp.PROTOBUF} or {otlp.JSON}")
        # bytes held as they arrive, not as declared: an upload that declares 32 MiB and
        # stalls holds nothing (and read_body drops it), so it cannot starve the others
        held = 0

        def hold(n: int) -> None:
            nonlocal held
            if inflight["bytes"] > held and inflight["bytes"] + n > cfg.max_inflight_bytes:
                raise QueueFull(f"{inflight['bytes']} bytes of requests being read or decoded")
            inflight["bytes"] += n
            held += n

        try:
            body = await read_body(request, cfg.max_body_bytes, on_chunk=hold)
            batch = await collector.decoder.decode(body, ctype, request.headers.get("content-encoding"))
        except DecodeFailed as exc:
            return error(503, str(exc))
        finally:
            inflight["bytes"] -= held
        refused = []
        if batch.span_count:
            encoding = request.headers.get("content-encoding")
            fut = collector.ingest.submit(batch, SpooledRequest("http", ctype, encoding, body))
            try:
                refused = await asyncio.wrap_future(fut)
            except Exception as exc:  # spans it refuses for their content are in `refused`
                log.warning("export failed to commit: %s", exc)
                return error(503, f"could not store the spans: {exc}")
        collector.metrics.exported("http", batch, refused)
        content, media = otlp.encode_response(otlp.export_response(batch, refused), ctype)
        return Response(content, media_type=media)

    async def store_info(request: Request) -> Response:
        """The store's file, for clients holding the token (the analysis keeps its models beside it)."""
        return JSONResponse({"db": store.path, "store_id": store_id})

    async def list_sessions(request: Request) -> Response:
        q = query_params(request)
        kwargs = {k: q.text(k) for k in ("outcome", "service", "agent", "parent_session_id") if q.text(k)}
        kwargs.update({k: q.time(k) for k in ("since", "until") if q.text(k)})
        if q.text("feedback"):
            kwargs["feedback"] = q.choice("feedback", ("negative", "positive", "any"))
        limit = min(q.integer("limit", 50), 1000)
        offset = q.integer("offset", 0)
        rows = await run_in_threadpool(store.list_sessions, limit=limit, offset=offset, **kwargs)
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

    def streamed_page(field: str, total: int, offset: int, items) -> StreamingResponse:
        """`{field: [...], "page": {...}}` written item by item as `items` yields (position,
        JSON text, size); a page ends after PAGE_BUDGET_CHARS of content (one item at least)."""
        def body():
            # Items go out in chunks of STREAM_CHUNK_BYTES: each chunk of a sync iterator costs
            # the response a hop through the thread pool, which for small rows (a job, a span)
            # cost more than writing them.
            chunk, held = [f'{{"{field}":['.encode()], 0
            end, used = offset, 0
            for n, (position, text, size) in enumerate(items):
                if n and used > PAGE_BUDGET_CHARS:
                    break
                data = (b"," if n else b"") + jsonsafe.utf8(text)
                chunk.append(data)
                held += len(data)
                end, used = position + 1, used + size
                if held >= STREAM_CHUNK_BYTES:
                    yield b"".join(chunk)
                    chunk, held = [], 0
            page = {"offset": offset, "returned": end - offset, "total": total,
                    "next_offset": end if end < total else None}
            chunk.append(f'],"page":{jsonsafe.dumps(page)}}}'.encode())
            yield b"".join(chunk)

        return StreamingResponse(body(), media_type="application/json")

    def listed(rows: list[dict], offset: int):
        """A page's rows, read already, as `streamed_page` takes them (position, JSON text, size)."""
        for position, row in enumerate(rows, start=offset):
            text = jsonsafe.dumps(row, ensure_ascii=False)
            yield position, text, len(text)

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

    def result_routes(kind: str, model):
        async def get_result(request: Request) -> Response:
            sid = request.path_params["session_id"]
            result = await run_in_threadpool(getattr(store, f"get_{kind}"), sid)
            if result is None:
                return error(404, f"no {kind} stored for session {sid!r}")
            return JSONResponse(result)

        async def post_result(request: Request) -> Response:
            sid = request.path_params["session_id"]
            result = await read_json(request, cfg.max_body_bytes)
            parse_body(model, result)  # checked, then stored as posted
            if not await run_in_threadpool(store.session_exists, sid):
                raise UnknownSession(sid)
            await write(lambda s: getattr(s, f"save_{kind}")(sid, result))
            return JSONResponse({"session_id": sid, "saved": kind}, status_code=201)

        async def result_route(request: Request) -> Response:
            # one route for every method of the path, so a 405 there lists them all in Allow
            return await (post_result if request.method in ("POST", "PUT") else get_result)(request)

        return result_route

    analysis_route = result_routes("analysis", AnalysisResult)
    replay_route = result_routes("replay", ReplayResult)

    async def report(request: Request) -> Response:
        sid = request.path_params["session_id"]
        fmt = query_params(request).choice("format", ("html", "md"), default="html")
        try:
            if collector.pipeline.report is None:
                raise ImportError("this collector was started without one (run it as `tracefix serve`)")
            render_report = collector.pipeline.report()
        except ImportError as exc:
            return error(404, f"the report renderer is not available in this installation ({exc}); "
                              "install tracefix[report]")
        try:
            text = await run_in_threadpool(render_report, store, sid, fmt)
        except KeyError:
            raise UnknownSession(sid) from None
        except Exception as exc:  # the renderer's bug must not look like ours, nor kill the server
            log.warning("report of session %s failed: %s", sid, exc)
            return error(500, f"the report renderer failed: {type(exc).__name__}: {exc}")
        if fmt == "md":
            return Response(jsonsafe.utf8(text), media_type="text/markdown; charset=utf-8")
        return HTMLResponse(jsonsafe.utf8(text), headers={"Content-Security-Policy": REPORT_CSP})

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

    async def jobs(request: Request) -> Response:
        if request.method == "POST":
            data = await read_model(request, JobRequest, 1 << 20)
            kind = data.kind or "diagnosis"
            options = {k: v for k, v in (("steps", data.steps), ("edit", data.edit)) if v is not None}
            job = await write(lambda s: s.enqueue_job(data.session_id, reason=data.reason or "api",
                                                      kind=kind, options=options or None))
            if kind == "diagnosis":
                collector.wake_diagnosis()
            return JSONResponse(job, status_code=201)
        q = query_params(request)
        offset, limit = page_params(q, default_limit=100)
        state, session_id, kind = q.choice("state", JOB_STATES), q.text("session_id"), q.choice("kind", JOB_KINDS)
        job_ids = q.texts("job_id", most=1000)  # only those jobs: how a page polls the jobs it shows
        newest_first = q.choice("order", LIST_ORDERS, default="oldest") == "newest"

        def read() -> tuple[int, list[dict]]:
            return (store.count_jobs(state, session_id, kind, job_ids=job_ids),
                    store.list_jobs(state, session_id, kind=kind, job_ids=job_ids, offset=offset, limit=limit,
                                    newest_first=newest_first))

        total, rows = await run_in_threadpool(read)
        return streamed_page("jobs", total, offset, listed(rows, offset))

    # --- the worker side of jobs (tracefix.replay.worker) -------------------------------------
    async def claim_job(request: Request) -> Response:
        data = await read_model(request, ClaimRequest, 1 << 16)
        worker, kind = data.worker[:200], data.kind
        if kind == "diagnosis" and cfg.diagnose == "off":  # the operator turned diagnoses off: none is handed out
            return Response(status_code=204)
        job = await write(lambda s: s.claim_job(kind, worker, data.lease_s))
        if job is None:
            return Response(status_code=204)
        if kind == "diagnosis":  # what the job runs is this collector's --diagnose, as when it runs one itself
            job["diagnose"] = cfg.diagnose
        log.info("%s job %s of session %s claimed by %s", kind, job["job_id"], job["session_id"], worker)
        return JSONResponse(job)

    async def renew_lease(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        data = await read_model(request, LeaseRequest, 1 << 16)
        worker = data.worker[:200]
        if await write(lambda s: s.renew_lease(job_id, worker, data.lease_s)):
            return JSONResponse({"job_id": job_id, "renewed": True})
        return error(409, f"job {job_id!r} is not running under a lease of worker {worker!r}", code="lease_lost",
                     job_id=job_id, renewed=False)

    async def finish_job(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        data = await read_model(request, FinishRequest, 1 << 20)
        worker, state, err = data.worker[:200], data.state, data.error
        finished = await write(lambda s: s.finish_job(job_id, error=err and err[:20_000], state=state, worker=worker))
        if not finished:
            return error(409, f"job {job_id!r} is not running under worker {worker!r}", code="lease_lost",
                         job_id=job_id, finished=False)
        if state != "done":
            log.warning("job %s %s by %s: %s", job_id, state, worker, err)
        return JSONResponse({"job_id": job_id, "finished": True})

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

    async def metrics(request: Request) -> Response:
        """Prometheus text format, behind the API token: Prometheus sends it (`authorization:`
        in a scrape config), and the counts describe this deployment's traffic."""
        body, media = await run_in_threadpool(collector.metrics.render)
        return Response(body, media_type=media)

    @functools.cache
    def openapi_document() -> bytes:  # built at the first request: the models' schemas cost ~0.2 s
        return jsonsafe.dumps(openapi.document(route_table, __version__)).encode()

    async def openapi_json(request: Request) -> Response:
        return Response(await run_in_threadpool(openapi_document), media_type="application/json")

    routes = [
        Route("/healthz", healthz),
        Route("/openapi.json", guarded(openapi_json)),
        Route("/v1/traces", collector.metrics.count_http_exports(otlp_route(guarded(traces, INGEST))),
              methods=["POST"]),
        Route("/metrics", guarded(metrics)),
        Route("/api/v1/store", guarded(store_info)),
        Route("/api/v1/sessions", guarded(list_sessions)),
        # ids may hold `/`: {session_id:session_id} on every route under /api/v1/sessions/ (url_input)
        Route("/api/v1/sessions/{session_id:session_id}", guarded(get_session)),
        Route("/api/v1/sessions/{session_id:session_id}/spans", guarded(get_spans)),
        Route("/api/v1/sessions/{session_id:session_id}/steps/{index}", guarded(get_step)),
        Route("/api/v1/sessions/{session_id:session_id}/messages", guarded(list_messages)),
        Route("/api/v1/sessions/{session_id:session_id}/messages/{key}", guarded(get_message)),
        Route("/api/v1/sessions/{session_id:session_id}/analysis", guarded(analysis_route),
              methods=["GET", "POST", "PUT"]),
        Route("/api/v1/sessions/{session_id:session_id}/replay", guarded(replay_route), methods=["GET", "POST", "PUT"]),
        Route("/api/v1/sessions/{session_id:session_id}/report", guarded(report)),
        Route("/api/v1/feedback", guarded(feedback, INGEST), methods=["POST"]),
        Route("/api/v1/import", guarded(import_sessions), methods=["POST"]),
        Route("/api/v1/training_sessions", guarded(training_sessions)),
        Route("/api/v1/jobs", guarded(jobs), methods=["GET", "POST"]),
        Route("/api/v1/jobs/claim", guarded(claim_job), methods=["POST"]),
        Route("/api/v1/jobs/{job_id}/lease", guarded(renew_lease), methods=["POST"]),
        Route("/api/v1/jobs/{job_id}/finish", guarded(finish_job), methods=["POST"]),
        Route("/api/v1/alerts", guarded(alerts)),
    ]
    route_table = [(r.path, r.methods) for r in routes]
    if openapi.undescribed(route_table):
        log.warning("routes missing from /openapi.json: %s", ", ".join(openapi.undescribed(route_table)))
    return Starlette(routes=routes, middleware=[Middleware(SecurityHeaders), Middleware(SessionPaths)],
                     exception_handlers={HTTPException: http_error, Exception: internal_error})
