"""OTLP/HTTP payloads of each signal (`otlp_signals`: traces, logs, metrics): decompress, decode
(protobuf or JSON), encode the response.

Errors are `OtlpError(status, message)` so the receiver answers a clear 4xx and stores
nothing from a request it could not read.
"""
from __future__ import annotations

import base64
import json
import zlib
from typing import TYPE_CHECKING, Iterable

from google.protobuf import any_pb2, duration_pb2, json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2
from tracefix.collector.otlp_signals import TRACES, Signal
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


# OTLP/JSON writes trace and span ids as hex (the protobuf JSON mapping would say base64)
HEX_ID_FIELDS = {"trace_id", "span_id", "parent_span_id"}
_INTEGER_TYPES = {FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64,
                  FieldDescriptor.TYPE_SFIXED64, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_INT32,
                  FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_SFIXED32,
                  FieldDescriptor.TYPE_SINT32}
_FLOAT_TYPES = {FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT}
# per message type: JSON name and field name -> (field name, type, repeated, message type, enum type)
_FIELD_PLANS: dict = {}


def _plan(descriptor) -> dict:
    plan = _FIELD_PLANS.get(descriptor)
    if plan is None:
        plan = {}
        for f in descriptor.fields:
            repeated = f.is_repeated if hasattr(f, "is_repeated") else f.label == FieldDescriptor.LABEL_REPEATED
            entry = (f.name, f.type, repeated, f.message_type, f.enum_type)
            plan[f.json_name] = plan[f.name] = entry
        _FIELD_PLANS[descriptor] = plan
    return plan


def _scalar(name: str, kind: int, enum, value):
    if kind == FieldDescriptor.TYPE_BYTES:
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string")
        if name in HEX_ID_FIELDS:
            try:
                return bytes.fromhex(value)
            except ValueError:
                raise OtlpError(400, f"{name} {value[:40]!r} is not hex") from None
        return base64.b64decode(value)
    if kind in _INTEGER_TYPES:  # 64-bit integers come as strings in JSON
        if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{name} must be an integer, not {value!r}")
        return int(value)
    if kind in _FLOAT_TYPES and isinstance(value, str):  # "NaN", "Infinity", "-Infinity"
        return float(value)
    if kind == FieldDescriptor.TYPE_ENUM and isinstance(value, str):
        found = enum.values_by_name.get(value)
        return None if found is None else found.number  # an unknown name is ignored, as unknown fields
    return value


# messages nested deeper than this are refused, as protobuf's own parsers do (its default limit)
MAX_NESTING = 100


def _message_fields(obj, descriptor, depth: int = 0) -> dict:
    """OTLP/JSON object -> keyword arguments of the protobuf message (nested dicts and lists,
    which the message's constructor builds in C): what json_format.ParseDict does, ~6x faster.
    Unknown fields are ignored, as the OTLP specification asks of receivers."""
    if not isinstance(obj, dict):
        raise ValueError(f"{descriptor.name} must be a JSON object")
    if depth > MAX_NESTING:
        raise ValueError(f"messages nested deeper than {MAX_NESTING}")
    plan = _plan(descriptor)
    fields = {}
    for key, value in obj.items():
        entry = plan.get(key)
        if entry is None or value is None:
            continue
        name, kind, repeated, message_type, enum = entry
        if repeated:
            if not isinstance(value, list):
                raise ValueError(f"{name} must be a JSON array")
            if message_type is not None:
                fields[name] = [_message_fields(item, message_type, depth + 1) for item in value]
            else:
                fields[name] = [v for v in (_scalar(name, kind, enum, item) for item in value) if v is not None]
        elif message_type is not None:
            fields[name] = _message_fields(value, message_type, depth + 1)
        elif (converted := _scalar(name, kind, enum, value)) is not None:
            fields[name] = converted
    return fields


def decode(body: bytes, content_type: str | None, signal: Signal = TRACES):
    """The signal's Export*ServiceRequest the body holds (OtlpError when it holds none)."""
    mt = media_type(content_type)
    kind = signal.request.DESCRIPTOR.name
    if mt == PROTOBUF:
        try:
            return signal.request.FromString(body)
        except (DecodeError, ValueError, RuntimeError) as exc:
            raise OtlpError(400, f"body is not a valid {kind} protobuf: {exc}") from exc
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
            raise OtlpError(400, f"OTLP/JSON body must be an object with {signal.top_field}")
        try:
            return signal.request(**_message_fields(data, signal.request.DESCRIPTOR))
        except OtlpError:
            raise
        except Exception as exc:  # ParseError, TypeError, RecursionError...: all mean a bad body
            raise OtlpError(400, f"body is not a valid OTLP/JSON {kind}: {exc}") from exc
    raise OtlpError(415, f"unsupported Content-Type {content_type!r}: use {PROTOBUF} or {JSON}")


def response(rejected: int = 0, message: str = "", signal: Signal = TRACES):
    """An export's answer; a message without rejected records is a warning (OTLP allows it)."""
    resp = signal.response()
    if rejected or message:
        setattr(resp.partial_success, signal.rejected_field, rejected)
        resp.partial_success.error_message = message
    return resp


def export_response(batch: "Batch", refused: Iterable[tuple[int, str]] = (), signal: Signal = TRACES):
    """The answer to an export whose records were normalized into `batch` and, of those, the
    ones in `refused` ((count, reason), the writer's) refused by the database: partial
    success naming the rejected records and why, then what was stored differently than sent.
    Raises OtlpError(400) when records came and none could be stored."""
    refused = list(refused)
    rejected = batch.rejected + sum(n for n, _ in refused)
    reasons = batch.errors + [reason for _, reason in refused]
    if rejected and rejected == batch.rejected + batch.records:
        raise OtlpError(400, f"all {rejected} {signal.noun} rejected: {'; '.join(reasons)}")
    return response(rejected, "; ".join(reasons + batch.warnings), signal)


def encode_response(resp, content_type: str | None) -> tuple[bytes, str]:
    if media_type(content_type) == JSON:
        body = json_format.MessageToJson(resp, indent=None).encode()
        return body, JSON
    return resp.SerializeToString(), PROTOBUF


# google.rpc.Code of an HTTP error status: OTLP/HTTP leaves Status.code to the server (clients
# go by the HTTP status), so it is set as gRPC's HTTP mapping names it, for whoever logs it
_RPC_CODES = {400: code_pb2.INVALID_ARGUMENT, 401: code_pb2.UNAUTHENTICATED, 403: code_pb2.PERMISSION_DENIED,
              404: code_pb2.NOT_FOUND, 405: code_pb2.UNIMPLEMENTED, 408: code_pb2.DEADLINE_EXCEEDED,
              409: code_pb2.ABORTED, 413: code_pb2.RESOURCE_EXHAUSTED, 415: code_pb2.INVALID_ARGUMENT,
              422: code_pb2.INVALID_ARGUMENT, 429: code_pb2.RESOURCE_EXHAUSTED, 500: code_pb2.INTERNAL,
              503: code_pb2.UNAVAILABLE}


def retry_info(delay_s: float) -> error_details_pb2.RetryInfo:
    """`google.rpc.RetryInfo` asking a client to retry after `delay_s` seconds."""
    seconds = int(delay_s)
    return error_details_pb2.RetryInfo(
        retry_delay=duration_pb2.Duration(seconds=seconds, nanos=int((delay_s - seconds) * 1e9)))


def error_status(http_status: int, message: str, retry_after_s: float | None = None) -> bytes:
    """The body of an OTLP/HTTP error answer to a protobuf request: a serialized
    `google.rpc.Status` (the specification's "Failures"), RetryInfo in its details when the
    client should retry later (429, 503)."""
    status = status_pb2.Status(code=_RPC_CODES.get(http_status, code_pb2.UNKNOWN), message=message)
    if retry_after_s is not None:
        detail = any_pb2.Any()
        detail.Pack(retry_info(retry_after_s))
        status.details.append(detail)
    return status.SerializeToString()
