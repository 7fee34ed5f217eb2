"""OTLP/HTTP trace payloads: decompress, decode (protobuf or JSON), encode the response.

Errors are `OtlpError(status, message)` so the receiver answers a clear 4xx and stores
nothing from a request it could not read.
"""
from __future__ import annotations

import base64
import json
import zlib
from typing import TYPE_CHECKING, Iterable

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tracefix.errors import TracefixError

if TYPE_CHECKING:
    from tracefix.collector.normalize import Batch

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class OtlpError(TracefixError):
    """A request the OTLP receivers refuse, with the HTTP status to answer."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = self.http_status = status
        self.message = message

    def __reduce__(self):  # raised in a decode worker process, re-raised in the receiver
        return (OtlpError, (self.status, self.message))


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise OtlpError(415, f"unsupported Content-Encoding {encoding!r} (use gzip or none)")
    wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    d = zlib.decompressobj(wbits)
    try:
        out = d.decompress(body, limit + 1)  # bounded: a small gzip bomb cannot inflate past the limit
    except zlib.error as exc:
        raise OtlpError(400, f"body is not valid {encoding}: {exc}") from exc
    if len(out) > limit or d.unconsumed_tail:
        raise OtlpError(413, f"decompressed body exceeds {limit} bytes")
    return out


_ID_FIELDS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}


def _hex_ids_to_base64(obj) -> None:
    """OTLP/JSON writes trace and span ids as hex; protobuf's JSON mapping expects base64."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in _ID_FIELDS and isinstance(value, str):
                if value == "":
                    continue
                try:
                    raw = bytes.fromhex(value)
                except ValueError as exc:
                    raise OtlpError(400, f"{key} {value[:40]!r} is not hex") from exc
                obj[key] = base64.b64encode(raw).decode()
            elif isinstance(value, (dict, list)):
                _hex_ids_to_base64(value)
    elif isinstance(obj, list):
        for item in obj:
            _hex_ids_to_base64(item)


def decode(body: bytes, content_type: str | None) -> ExportTraceServiceRequest:
    mt = media_type(content_type)
    if mt == PROTOBUF:
        try:
            return ExportTraceServiceRequest.FromString(body)
        except (DecodeError, ValueError, RuntimeError) as exc:
            raise OtlpError(400, f"body is not a valid ExportTraceServiceRequest protobuf: {exc}") from exc
    if mt == JSON:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise OtlpError(400, f"JSON body is not valid UTF-8: {exc}") from exc
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise OtlpError(400, f"body is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise OtlpError(400, "OTLP/JSON body must be an object with resourceSpans")
        try:
            _hex_ids_to_base64(data)
            return json_format.ParseDict(data, ExportTraceServiceRequest(), ignore_unknown_fields=True)
        except OtlpError:
            raise
        except Exception as exc:  # ParseError, TypeError, RecursionError...: all mean a bad body
            raise OtlpError(400, f"body is not a valid OTLP/JSON ExportTraceServiceRequest: {exc}") from exc
    raise OtlpError(415, f"unsupported Content-Type {content_type!r}: use {PROTOBUF} or {JSON}")


def response(rejected: int = 0, message: str = "") -> ExportTraceServiceResponse:
    """An export's answer; a message without rejected spans is a warning (OTLP allows it)."""
    resp = ExportTraceServiceResponse()
    if rejected or message:
        resp.partial_success.rejected_spans = rejected
        resp.partial_success.error_message = message
    return resp


def export_response(batch: "Batch", refused: Iterable[tuple[int, str]] = ()) -> ExportTraceServiceResponse:
    """The answer to an export whose spans were normalized into `batch` and, of those, the
    ones in `refused` ((count, reason), the writer's) refused by the database: partial
    success naming the rejected spans and why, then what was stored differently than sent.
    Raises OtlpError(400) when spans came and none could be stored."""
    refused = list(refused)
    rejected = batch.rejected + sum(n for n, _ in refused)
    reasons = batch.errors + [reason for _, reason in refused]
    if rejected and rejected == batch.rejected + batch.span_count:
        raise OtlpError(400, f"all {rejected} spans rejected: {'; '.join(reasons)}")
    return response(rejected, "; ".join(reasons + batch.warnings))


def encode_response(resp: ExportTraceServiceResponse, content_type: str) -> tuple[bytes, str]:
    if media_type(content_type) == JSON:
        body = json_format.MessageToJson(resp, indent=None).encode()
        return body, JSON
    return resp.SerializeToString(), PROTOBUF
