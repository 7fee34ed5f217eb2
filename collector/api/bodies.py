"""Reading a request's body: at most so many bytes, within deadlines (a stalled upload is
dropped), as strict UTF-8 JSON, or as the model of `tracefix.collector.schemas.bodies`."""
from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

from starlette.requests import ClientDisconnect, Request

from tracefix.attributes import MAX_JSON_DEPTH, nested_too_deeply
from tracefix.collector import jsonsafe, otlp
from tracefix.collector.schemas.bodies import InvalidBody, parse_body

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
    """The JSON body validated as `model` (tracefix.collector.schemas.bodies); InvalidBody otherwise."""
    return parse_body(model, await read_json(request, limit))
