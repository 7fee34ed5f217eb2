"""The HTTP side of `tracefix serve` (starlette): OTLP/HTTP `POST /v1/traces` and the JSON API.

Reads run on store cursors in the thread pool; every write goes through the single writer.
A bearer token, when configured, is required on every route but `/healthz`.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tracefix.collector import document, otlp
from tracefix.collector.imports import ImportError_
from tracefix.collector.decoding import DecodeFailed
from tracefix.collector.store import PAGE_BUDGET_CHARS, UnknownSession
from tracefix.collector.writer import QueueFull, WriterClosed, is_data_error

if TYPE_CHECKING:
    from tracefix.collector.server import Collector

log = logging.getLogger("tracefix.collector")


def error(status: int, message: str, **extra) -> JSONResponse:
    headers = {"Retry-After": "1"} if status in (429, 503) else None
    return JSONResponse({"error": message, **extra}, status_code=status, headers=headers)


def authorized(request: Request, token: str | None) -> bool:
    if not token:
        return True
    header = request.headers.get("authorization", "")
    return hmac.compare_digest(header.encode(), f"Bearer {token}".encode())


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise otlp.OtlpError(413, f"body of {declared} bytes exceeds the limit of {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise otlp.OtlpError(413, f"body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, limit: int) -> Any:
    body = await read_body(request, limit)
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise otlp.OtlpError(400, f"body is not valid UTF-8 JSON: {exc}") from exc


def int_value(raw: str, name: str, lo: int, hi: int) -> int:
    """An integer request parameter in [lo, hi], else a 422 that names it."""
    try:
        value = int(raw)
    except ValueError:
        raise otlp.OtlpError(422, f"{name} must be an integer, not {raw!r}") from None
    if not lo <= value <= hi:
        raise otlp.OtlpError(422, f"{name} must be between {lo} and {hi}, not {value}")
    return value


def int_param(query, name: str, default: int, lo: int, hi: int) -> int:
    raw = query.get(name)
    return default if raw is None else int_value(raw, name, lo, hi)


def page_params(query, default_limit: int) -> tuple[int, int]:
    """`offset` and `limit` of a paged read (every read of a session's contents is paged)."""
    return int_param(query, "offset", 0, 0, 1 << 31), int_param(query, "limit", default_limit, 1, 1000)


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
        declared = request.headers.get("content-length", "")
        reserve = int(declared) if declared.isdigit() else cfg.max_body_bytes
        if inflight["bytes"] and inflight["bytes"] + reserve > cfg.max_inflight_bytes:
            raise QueueFull(f"{inflight['bytes']} bytes of requests being decoded")
        inflight["bytes"] += reserve
        try:
            body = await read_body(request, cfg.max_body_bytes)
            batch = await collector.decoder.decode(body, ctype, request.headers.get("content-encoding"))
        except DecodeFailed as exc:
            return error(503, str(exc))
        finally:
            inflight["bytes"] -= reserve
        message = "; ".join(batch.errors)
        if batch.rejected and not batch.span_count:
            raise otlp.OtlpError(400, f"all {batch.rejected} spans rejected: {message}")
        if batch.span_count:
            fut = writer.submit_batch(batch)
            try:
                await asyncio.wrap_future(fut)
            except Exception as exc:
                log.warning("export failed to commit: %s", exc)
                if is_data_error(exc):
                    return error(400, f"these spans cannot be stored: {exc}")
                return error(503, f"could not store the spans: {exc}")
        content, media = otlp.encode_response(otlp.response(batch.rejected, message), ctype)
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
        q = request.query_params
        offset, limit = page_params(q, default_limit=100)
        max_chars = int_param(q, "max_chars", 2000, 1, 1_000_000)
        content = q.get("content", "previews")
        if content not in ("previews", "keys"):
            raise otlp.OtlpError(422, f"content must be 'previews' or 'keys', not {content!r}")
        doc = await run_in_threadpool(store.session_page, sid, offset, limit, max_chars, content)
        if doc is None:
            raise UnknownSession(sid)
        return JSONResponse(doc)

    async def get_step(request: Request) -> Response:
        sid = request.path_params["session_id"]
        index = int_value(request.path_params["index"], "step index", 0, 1 << 31)
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
        return JSONResponse({"key": document.key_ref(key), "message": json.loads(text)})

    def streamed_page(field: str, total: int, offset: int, items) -> StreamingResponse:
        """`{field: [...], "page": {...}}` written item by item as `items` yields (position,
        JSON text, size); a page ends after PAGE_BUDGET_CHARS of content (one item at least)."""
        def body():
            yield f'{{"{field}":['.encode()
            end, used = offset, 0
            for n, (position, text, size) in enumerate(items):
                if n and used > PAGE_BUDGET_CHARS:
                    break
                yield (b"," if n else b"") + text.encode("utf-8", "surrogatepass")
                end, used = position + 1, used + size
            page = {"offset": offset, "returned": end - offset, "total": total,
                    "next_offset": end if end < total else None}
            yield f'],"page":{json.dumps(page)}}}'.encode()

        return StreamingResponse(body(), media_type="application/json")

    async def get_spans(request: Request) -> Response:
        sid = request.path_params["session_id"]
        offset, limit = page_params(request.query_params, default_limit=500)
        cur = store.cursor()  # the stream reads on after this handler returns, from other threads
        try:
            rowids = await run_in_threadpool(store.session_span_rowids, sid, cur)
            if rowids is None:
                raise UnknownSession(sid)
            chosen = rowids[offset:offset + limit]

            def items():
                try:
                    for n, span in enumerate(store.iter_spans(chosen, cur)):
                        text = json.dumps(span, ensure_ascii=False)
                        yield offset + n, text, len(text)
                finally:
                    cur.close()

            return streamed_page("spans", len(rowids), offset, items())
        except BaseException:
            cur.close()
            raise

    async def list_messages(request: Request) -> Response:
        sid = request.path_params["session_id"]
        offset, limit = page_params(request.query_params, default_limit=100)
        cur = store.cursor()
        try:
            keys = await run_in_threadpool(store.session_message_keys, sid, cur)
            if keys is None:
                raise UnknownSession(sid)
            chosen = keys[offset:offset + limit]
            position = {k: offset + i for i, k in enumerate(chosen)}

            def items():
                try:
                    for key, text in store.iter_message_texts(chosen, cur):
                        yield (position[key], json.dumps({"key": document.key_ref(key), "text": text},
                                                         ensure_ascii=False), len(text))
                finally:
                    cur.close()

            return streamed_page("messages", len(keys), offset, items())
        except BaseException:
            cur.close()
            raise

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
        Route("/api/v1/sessions/{session_id}/steps/{index}", guarded(get_step)),
        Route("/api/v1/sessions/{session_id}/messages", guarded(list_messages)),
        Route("/api/v1/sessions/{session_id}/messages/{key}", guarded(get_message)),
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
