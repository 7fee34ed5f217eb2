"""A protobuf export whose bytes hold no secret hint skips the scan of each span's strings
(collector/decoding.py scans the body once); what is not among those bytes is still judged.

Bytes values are stored as base64 text, which is not in the body: an AWS key id that is the
base64 of 15 plain bytes must be redacted wherever such a value sits (a span's attribute, an
array, an event, the resource). Keys that name a credential are judged by name, hint or not.
The export goes to a real `tracefix serve` over OTLP/HTTP and the stored span is read back."""
from __future__ import annotations

import base64
import json
import uuid
from urllib.parse import quote

import pytest
from collector_support import http
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from test_ingest import post

from tracefix.secret_rules import utf8_may_hold_secret

T0 = 1_700_000_000_000_000_000


def key_id(n: int) -> str:
    """An AWS access key id (a secret to the rules) whose base64 decoding is plain bytes."""
    text = f"AKIA{n:02d}" + "QWERTYUIOPASDF"
    assert base64.b64encode(base64.b64decode(text)).decode() == text
    return text


def raw(text: str) -> AnyValue:
    return AnyValue(bytes_value=base64.b64decode(text))


def kv(key: str, value: AnyValue) -> KeyValue:
    return KeyValue(key=key, value=value)


def span(sid: str, name: str, attrs: list[KeyValue], events=()) -> Span:
    return Span(trace_id=uuid.uuid4().bytes, span_id=uuid.uuid4().bytes[:8], name=name,
                start_time_unix_nano=T0, end_time_unix_nano=T0 + 1000,
                attributes=[kv("tracefix.session.id", AnyValue(string_value=sid)), *attrs], events=events)


def export(sid: str) -> bytes:
    # a kvlist has its every value judged on its own: it goes in a span of its own, so that
    # the first span's strings are judged only by the body's scan and the bytes' own check
    with_bytes = span(sid, "fetch report", [
        kv("payload", raw(key_id(1))),
        kv("parts", AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="plain words"), raw(key_id(2))]))),
    ], events=[Span.Event(name="fetched", time_unix_nano=T0 + 500, attributes=[kv("blob", raw(key_id(3)))])])
    with_keys = span(sid, "configure", [
        kv("api_key", AnyValue(string_value="plainvaluewithouthint")),
        kv("config", AnyValue(kvlist_value=KeyValueList(values=[
            kv("password", AnyValue(string_value="correcthorsebattery"))]))),
    ])
    resource = {"attributes": [kv("service.name", AnyValue(string_value="wire-scan-app")),
                               kv("host.blob", raw(key_id(4)))]}
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=resource, scope_spans=[ScopeSpans(spans=[with_bytes, with_keys])])]).SerializeToString()


def test_values_not_among_a_clean_bodys_bytes_are_still_redacted(collector):
    sid = f"wire-scan-{uuid.uuid4().hex[:8]}"
    body = export(sid)
    if utf8_may_hold_secret(body):
        pytest.skip("no Hyperscan here: every span's strings are scanned, the body is not")
    status, answer, _ = post(collector.match["http"] + "/v1/traces", body)
    assert status == 200, answer[:300]
    status, page, _ = http("GET", f"{collector.match['http']}/api/v1/sessions/{quote(sid, safe='')}/spans")
    assert status == 200, page[:300]
    spans = json.loads(page)["spans"]
    assert len(spans) == 2
    stored = json.dumps(spans)
    for n in (1, 2, 3, 4):
        assert key_id(n) not in stored, (n, stored)
    for secret in ("plainvaluewithouthint", "correcthorsebattery"):
        assert secret not in stored
    assert "plain words" in stored and "fetch report" in stored  # the rest is kept as sent
    assert stored.count("[REDACTED]") >= 6
