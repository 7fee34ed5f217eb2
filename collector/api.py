"""The HTTP side of `tracefix serve` (starlette): OTLP/HTTP `POST /v1/traces` and the JSON API.

Reads run on store cursors in the thread pool; every write goes through the single writer.
A bearer token, when configured, is required on every route but `/healthz`.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
from typing import TYPE_CHECKING, Any, Callable

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from tracefix.collector import otlp
from tracefix.collector.imports import ImportError_
from tracefix.collector.decoding import DecodeFailed
from tracefix.collector.store import UnknownSession
from tracefix.collector.writer import QueueFull, WriterClosed

if TYPE_CHECKING:
    from tracefix.collector.server import Collector

log = logging.getLogger("tracefix.collector")


def error(status: int, message: str, **extra) -> JSONResponse:
    headers = {"Retry-After": "1"} if status in (429, 503) else None
    if status == 408:  # the client stalled mid-body: the connection cannot carry another request
        headers = {"Connection": "close"}
    return JSONResponse({"error": message, **extra}, status_code=status, headers=headers)


def authorized(request: Request, token: str | None) -> bool:
    if not token:
        return True
    header = request.headers.get("authorization", "")
    return hmac.compare_digest(header.encode(), f"Bearer {token}".encode())


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
    start = last = loop.time()
    chunks, size, stalled = [], 0, False

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
    body = await read_body(request, limit)
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise otlp.OtlpError(400, f"body is not valid UTF-8 JSON: {exc}") from exc


def build_app(collector: "Collector") -> Starlette:
    cfg = collector.config
    store = collector.store
    writer = collector.writer

    def guarded(handler):
        async def wrapped(request: Request) -> Response:
            if not authorized(request, cfg.token):
                return error(401, "missing or wrong bearer token", hint="send 'Authorization: Bearer <token>'")
            try:
                return await handler(request)
            except otlp.OtlpError as exc:
                return error(exc.status, exc.message)
            except QueueFull as exc:
                return error(429, f"collector busy: {exc}; retry later")
            except WriterClosed as exc:
                return error(503, str(exc))
            except UnknownSession as exc:
                return error(404, f"unknown session {exc.args[0]!r}")
            except ValueError as exc:
                return error(400, str(exc))
        return wrapped

    async def write(fn):
        return await asyncio.wrap_future(writer.call(fn))

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "db": store.path, "pending_spans": writer.pending_spans,
                             "committed_spans": writer.committed_spans, "transactions": writer.transactions,
                             "checkpoints": collector.checkpointer.checkpoints})

    inflight = {"bytes": 0}  # request bodies being read or decoded right now

    async def traces(request: Request) -> Response:
        ctype = request.headers.get("content-type")
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
            fut = writer.submit_batch(batch)
            try:
                refused = await asyncio.wrap_future(fut)
            except Exception as exc:  # spans it refuses for their content are in `refused`
                log.warning("export failed to commit: %s", exc)
                return error(503, f"could not store the spans: {exc}")
        content, media = otlp.encode_response(otlp.export_response(batch, refused), ctype)
        return Response(content, media_type=media)

    async def list_sessions(request: Request) -> Response:
        q = request.query_params
        kwargs = {k: q[k] for k in ("feedback", "outcome", "service", "agent", "since", "until", "parent_session_id")
                  if q.get(k)}
        try:
            limit, offset = int(q.get("limit", 50)), int(q.get("offset", 0))
        except ValueError as exc:
            raise ValueError("limit and offset must be integers") from exc
        rows = await run_in_threadpool(store.list_sessions, limit=min(limit, 1000), offset=offset, **kwargs)
        return JSONResponse({"sessions": rows, "limit": limit, "offset": offset})

    async def get_session(request: Request) -> Response:
        sid = request.path_params["session_id"]
        doc = await run_in_threadpool(store.get_session, sid)
        if doc is None:
            raise UnknownSession(sid)
        return JSONResponse(doc)

    async def get_spans(request: Request) -> Response:
        sid = request.path_params["session_id"]
        if not await run_in_threadpool(store.session_exists, sid):
            raise UnknownSession(sid)
        return JSONResponse({"spans": await run_in_threadpool(store.get_spans, sid)})

    async def feedback(request: Request) -> Response:
        data = await read_json(request, 1 << 20)
        if not isinstance(data, dict) or not isinstance(data.get("session_id"), str):
            raise ValueError("feedback needs {\"session_id\": str, \"score\": number, \"comment\": str?}")
        try:
            score = float(data.get("score"))
        except (TypeError, ValueError) as exc:
            raise ValueError("feedback 'score' must be a number (e.g. -1 thumbs down, 1 thumbs up)") from exc
        comment = data.get("comment")
        if comment is not None and not isinstance(comment, str):
            raise ValueError("feedback 'comment' must be a string")
        fb = await write(lambda s: s.add_feedback(data["session_id"], score, comment, source="api",
                                                  **collector.feedback_options()))
        collector.feedback_recorded(fb)
        return JSONResponse(fb, status_code=201)

    def result_routes(kind: str):
        async def get_result(request: Request) -> Response:
            sid = request.path_params["session_id"]
            result = await run_in_threadpool(getattr(store, f"get_{kind}"), sid)
            if result is None:
                return error(404, f"no {kind} stored for session {sid!r}")
            return JSONResponse(result)

        async def post_result(request: Request) -> Response:
            sid = request.path_params["session_id"]
            result = await read_json(request, cfg.max_body_bytes)
            if not isinstance(result, dict):
                raise ValueError(f"the {kind} result must be a JSON object")
            if not await run_in_threadpool(store.session_exists, sid):
                raise UnknownSession(sid)
            await write(lambda s: getattr(s, f"save_{kind}")(sid, result))
            return JSONResponse({"session_id": sid, "saved": kind}, status_code=201)

        return get_result, post_result

    get_analysis, post_analysis = result_routes("analysis")
    get_replay, post_replay = result_routes("replay")

    async def report(request: Request) -> Response:
        sid = request.path_params["session_id"]
        fmt = request.query_params.get("format", "html")
        if fmt not in ("html", "md"):
            return error(400, f"format must be html or md, not {fmt!r}")
        try:
            from tracefix.analysis.report import render_session_report
        except ImportError as exc:
            return error(404, f"the report renderer is not available in this installation ({exc}); "
                              "install tracefix[analysis]")
        try:
            # The replays' child sessions are read too, so the report can set them beside the original.
            text = await run_in_threadpool(render_session_report, store, sid, fmt)
        except KeyError:
            raise UnknownSession(sid) from None
        except Exception as exc:  # the renderer's bug must not look like ours, nor kill the server
            log.warning("report of session %s failed: %s", sid, exc)
            return error(500, f"the report renderer failed: {type(exc).__name__}: {exc}")
        if fmt == "md":
            return Response(text, media_type="text/markdown; charset=utf-8")
        return HTMLResponse(text)

    async def import_sessions(request: Request) -> Response:
        data = await read_json(request, cfg.max_body_bytes)
        docs = data.get("sessions") if isinstance(data, dict) else data
        try:
            ids = await write(lambda s: s.import_sessions(docs))
        except ImportError_ as exc:
            raise ValueError(str(exc)) from exc
        return JSONResponse({"session_ids": ids}, status_code=201)

    async def training_sessions(request: Request) -> Response:
        criterion = request.query_params.get("criterion", "success")
        docs = await run_in_threadpool(store.training_sessions, criterion)
        return JSONResponse({"sessions": docs})

    async def jobs(request: Request) -> Response:
        if request.method == "POST":
            data = await read_json(request, 1 << 20)
            if not isinstance(data, dict) or not isinstance(data.get("session_id"), str):
                raise ValueError("a diagnosis job needs {\"session_id\": str}")
            job = await write(lambda s: s.enqueue_job(data["session_id"], reason=data.get("reason") or "api"))
            collector.wake_diagnosis()
            return JSONResponse(job, status_code=201)
        q = request.query_params
        rows = await run_in_threadpool(store.list_jobs, q.get("state"), q.get("session_id"))
        return JSONResponse({"jobs": rows})

    async def alerts(request: Request) -> Response:
        rows = await run_in_threadpool(store.list_alerts, request.query_params.get("session_id"))
        return JSONResponse({"alerts": rows})

    routes = [
        Route("/healthz", healthz),
        Route("/v1/traces", guarded(traces), methods=["POST"]),
        Route("/api/v1/sessions", guarded(list_sessions)),
        Route("/api/v1/sessions/{session_id}", guarded(get_session)),
        Route("/api/v1/sessions/{session_id}/spans", guarded(get_spans)),
        Route("/api/v1/sessions/{session_id}/analysis", guarded(get_analysis), methods=["GET"]),
        Route("/api/v1/sessions/{session_id}/analysis", guarded(post_analysis), methods=["POST", "PUT"]),
        Route("/api/v1/sessions/{session_id}/replay", guarded(get_replay), methods=["GET"]),
        Route("/api/v1/sessions/{session_id}/replay", guarded(post_replay), methods=["POST", "PUT"]),
        Route("/api/v1/sessions/{session_id}/report", guarded(report)),
        Route("/api/v1/feedback", guarded(feedback), methods=["POST"]),
        Route("/api/v1/import", guarded(import_sessions), methods=["POST"]),
        Route("/api/v1/training_sessions", guarded(training_sessions)),
        Route("/api/v1/jobs", guarded(jobs), methods=["GET", "POST"]),
        Route("/api/v1/alerts", guarded(alerts)),
    ]
    return Starlette(routes=routes)
