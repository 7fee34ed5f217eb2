"""How the API answers a failure: one JSON shape for every 4xx/5xx (`error()`, described by
`schemas.answers.ErrorBody`), 429 with the delay back-pressure calls for (`busy()`), and an
OTLP/HTTP exporter's protobuf request answered in protobuf (`in_request_encoding`).
Starlette's own answers (404, 405) and our bugs (500) are written in the same shape."""
from __future__ import annotations

import json
import logging
import math
from typing import Any, Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from tracefix.collector import otlp
from tracefix.collector.responses import SECURITY_HEADERS, JSONResponse
from tracefix.collector.schemas.answers import ERROR_CODES

log = logging.getLogger("tracefix.collector")


def error(status: int, message: str, code: str | None = None, headers: Mapping[str, str] | None = None,
          **extra: Any) -> JSONResponse:
    """Every 4xx/5xx answer of the API: `schemas.answers.ErrorBody`, `code` by status unless given."""
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
