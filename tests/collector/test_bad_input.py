"""Bad input gets a clear 4xx, loses nothing already stored, and the server keeps serving."""
from __future__ import annotations

import gzip
import json
import uuid

import grpc
import pytest
from collector_support import TOKEN, otlp_error, tracer_provider
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from test_ingest import _otlp_request, post

PROTOBUF = "application/x-protobuf"


@pytest.fixture(scope="module")
def stored(collector, api):
    """A session stored before the abuse starts; every test checks it is still whole."""
    sid = f"keep-{uuid.uuid4().hex[:8]}"
    assert post(collector.match["http"] + "/v1/traces", _otlp_request(sid, n=3))[0] == 200
    return sid


def assert_still_serving(api, sid):
    doc = api.get_session(sid)
    assert doc is not None and len(doc["steps"]) == 3


def _error(body: bytes, request_type: str = "application/json") -> str:
    """The answer's error text, decoded as the request's encoding calls for (a protobuf
    request to /v1/traces is answered a google.rpc.Status)."""
    return otlp_error(body, request_type)[0]


def test_token_is_required_everywhere_but_healthz(collector):
    http = collector.match["http"]
    import urllib.request

    with urllib.request.urlopen(http + "/healthz", timeout=5) as r:
        assert r.status == 200
    for token in (None, "wrong"):
        status, body, _ = post(http + "/v1/traces", _otlp_request("nope"), token=token)
        assert status == 401 and "bearer token" in _error(body, PROTOBUF)
        req = urllib.request.Request(http + "/api/v1/sessions",
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert err.value.code == 401
    channel = grpc.insecure_channel(collector.match["grpc"])
    stub = TraceServiceStub(channel)
    request = ExportTraceServiceRequest.FromString(_otlp_request("nope-grpc"))
    with pytest.raises(grpc.RpcError) as err:
        stub.Export(request, timeout=5, metadata=(("authorization", "Bearer wrong"),))
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert isinstance(stub.Export(request, timeout=5, metadata=(("authorization", f"Bearer {TOKEN}"),)),
                      ExportTraceServiceResponse)
    channel.close()


def test_malformed_grpc_export_is_invalid_argument_and_the_server_goes_on(collector, api):
    """gRPC requests reach the decode worker as raw bytes: a body that is no
    ExportTraceServiceRequest must come back as INVALID_ARGUMENT, not crash a worker."""
    channel = grpc.insecure_channel(collector.match["grpc"])
    raw = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                              request_serializer=None, response_deserializer=ExportTraceServiceResponse.FromString)
    auth = (("authorization", f"Bearer {TOKEN}"),)
    with pytest.raises(grpc.RpcError) as err:
        raw(b"\x0a\xff\xff\xff\xff\x0f-not-protobuf", timeout=5, metadata=auth)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "ExportTraceServiceRequest" in err.value.details()
    sid = f"after-bad-grpc-{uuid.uuid4().hex[:6]}"
    assert isinstance(raw(_otlp_request(sid), timeout=10, metadata=auth), ExportTraceServiceResponse)
    assert len(api.get_spans(sid)) == 3
    big = _otlp_request(sid + "-big", 300)  # over 64 KiB: decoded in the worker process
    assert len(big) > 64 * 1024
    assert isinstance(raw(big, timeout=30, metadata=auth), ExportTraceServiceResponse)
    assert len(api.get_spans(sid + "-big")) == 300
    channel.close()


def test_exporter_without_token_is_refused_and_stores_nothing(collector, api):
    sid = f"notoken-{uuid.uuid4().hex[:8]}"
    provider = tracer_provider(collector, "http", token=None)
    with provider.get_tracer("t").start_as_current_span("chat m", attributes={
            "gen_ai.operation.name": "chat", "tracefix.session.id": sid}):
        pass
    provider.force_flush(5000)
    provider.shutdown()
    assert api.get_session(sid) is None


@pytest.mark.parametrize("body,ctype,status,needle", [
    (b"\x0a\xff\xff\xff\xff\x0f garbage", "application/x-protobuf", 400, "protobuf"),
    (b'{"resourceSpans": [', "application/json", 400, "JSON"),
    (b'{"resourceSpans": "nope"}', "application/json", 400, "OTLP/JSON"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', "application/json", 400, "hex"),
    (b'\xff\xfe{"a": 1}', "application/json", 400, "UTF-8"),
    (b"hello", "text/plain", 415, "Content-Type"),
])
def test_malformed_bodies_get_a_clear_4xx(collector, api, stored, body, ctype, status, needle):
    got, resp, _ = post(collector.match["http"] + "/v1/traces", body, ctype)
    assert got == status
    assert needle in _error(resp, ctype)
    assert_still_serving(api, stored)


def test_invalid_utf8_inside_protobuf_string_is_rejected(collector, api, stored):
    req = ExportTraceServiceRequest.FromString(_otlp_request("utf8"))
    raw = bytearray(req.SerializeToString())
    name = b"chat m"
    pos = raw.index(name)
    raw[pos:pos + 2] = b"\xc3\x28"  # an invalid two-byte sequence in the span name
    got, resp, _ = post(collector.match["http"] + "/v1/traces", bytes(raw))
    assert got == 400 and "protobuf" in _error(resp, PROTOBUF)
    assert_still_serving(api, stored)


def test_oversized_body_gets_413_without_reading_it_all(collector, api, stored):
    import http.client
    import urllib.parse

    url = urllib.parse.urlsplit(collector.match["http"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    conn.putrequest("POST", "/v1/traces")
    conn.putheader("Content-Type", "application/x-protobuf")
    conn.putheader("Authorization", f"Bearer {TOKEN}")
    conn.putheader("Content-Length", str(100 * 1024 * 1024))  # a 100 MB body, never sent
    conn.endheaders()
    resp = conn.getresponse()  # answered from the headers alone
    assert resp.status == 413 and "limit" in _error(resp.read(), PROTOBUF)
    conn.close()
    bomb = gzip.compress(b"\x00" * (40 * 1024 * 1024))  # 40 KB on the wire, 40 MB inflated
    got, resp, _ = post(collector.match["http"] + "/v1/traces", bomb, headers={"Content-Encoding": "gzip"})
    assert got == 413
    assert_still_serving(api, stored)


def test_absurd_attribute_is_rejected_by_partial_success(collector, api, stored):
    req = ExportTraceServiceRequest.FromString(_otlp_request(f"huge-{uuid.uuid4().hex[:6]}", n=2))
    spans = req.resource_spans[0].scope_spans[0].spans
    huge = spans[0].attributes.add()
    huge.key = "junk"
    huge.value.string_value = "x" * (9 * 1024 * 1024)
    got, resp, _ = post(collector.match["http"] + "/v1/traces", req.SerializeToString())
    assert got == 200
    answer = ExportTraceServiceResponse.FromString(resp)
    assert answer.partial_success.rejected_spans == 1
    assert "junk" in answer.partial_success.error_message
    del spans[1]  # only the absurd span left: nothing to store at all
    got, resp, _ = post(collector.match["http"] + "/v1/traces", req.SerializeToString())
    assert got == 400 and "rejected" in _error(resp, PROTOBUF)
    assert_still_serving(api, stored)


def test_span_with_bad_ids_is_rejected_others_kept(collector, api):
    sid = f"ids-{uuid.uuid4().hex[:8]}"
    req = ExportTraceServiceRequest.FromString(_otlp_request(sid, n=2))
    req.resource_spans[0].scope_spans[0].spans[0].span_id = b"\x01\x02"
    got, resp, _ = post(collector.match["http"] + "/v1/traces", req.SerializeToString())
    assert got == 200
    assert ExportTraceServiceResponse.FromString(resp).partial_success.rejected_spans == 1
    assert len(api.get_spans(sid)) == 1


def test_feedback_on_unknown_session_is_404_and_bad_feedback_is_400(collector, api):
    url = collector.match["http"] + "/api/v1/feedback"
    got, resp, _ = post(url, json.dumps({"session_id": "no-such-session", "score": -1}).encode(), "application/json")
    assert got == 404 and "unknown session" in _error(resp)
    got, resp, _ = post(url, json.dumps({"session_id": "x", "score": "very bad"}).encode(), "application/json")
    assert got == 400 and "score" in _error(resp)
    got, resp, _ = post(url, b"not json", "application/json")
    assert got == 400


def _any_value(v) -> dict:
    if isinstance(v, bool):
        return {"bool_value": v}
    if isinstance(v, int):
        return {"int_value": v}
    if isinstance(v, float):
        return {"double_value": v}
    return {"string_value": v}


ATTRIBUTE_KEYS = ["gen_ai.operation.name", "gen_ai.input.messages", "gen_ai.output.messages", "tracefix.step",
                  "tracefix.call.seq", "session.id", "gen_ai.agent.name", "gen_ai.usage.input_tokens",
                  "llm.input_messages.0.message.role", "gen_ai.prompt.0.content", "tracefix.session.root",
                  "tracefix.session.score", "gen_ai.tool.definitions", "service.name"]
VALUES = st.one_of(st.text(max_size=30), st.integers(-(1 << 63), (1 << 63) - 1), st.booleans(),
                   st.floats(allow_nan=True), st.sampled_from(["chat", "execute_tool", "[{\"role\": 1}]", "{}", "[]"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(
    st.binary(max_size=300),
    st.builds(lambda name, attrs, tid, start: ExportTraceServiceRequest(resource_spans=[{
        "resource": {"attributes": [{"key": "service.name", "value": _any_value(attrs.get("service.name", "svc"))}]},
        "scope_spans": [{"spans": [Span(trace_id=tid, span_id=tid[:8], name=name, start_time_unix_nano=start,
                                        end_time_unix_nano=start,
                                        attributes=[{"key": k, "value": _any_value(v)} for k, v in attrs.items()])]}]}]
    ).SerializeToString(),
              st.text(max_size=20),
              st.dictionaries(st.sampled_from(ATTRIBUTE_KEYS), VALUES, max_size=5),
              st.binary(min_size=0, max_size=16),
              st.integers(0, (1 << 64) - 1)),
), ctype=st.sampled_from(["application/x-protobuf", "application/json"]))
def test_fuzzed_traces_never_break_the_server(collector, body, ctype):
    got, resp, _ = post(collector.match["http"] + "/v1/traces", body, ctype)
    assert got in (200, 400), (got, resp[:200])
    if got == 400:
        assert _error(resp, ctype)


def test_server_still_answers_after_the_abuse(collector, api, stored):
    assert_still_serving(api, stored)


def test_deeply_nested_json_is_a_400_not_a_crash(collector, api, stored):
    deep = b"[" * 100_000 + b"]" * 100_000
    for path in ("/v1/traces", "/api/v1/feedback"):
        got, resp, _ = post(collector.match["http"] + path, deep, "application/json")
        assert got == 400, (path, resp[:200])
    nested = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "x",
                                                            "attributes": [{"key": "k", "value": {}}]}]}]}]}
    value = nested["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"][0]["value"]
    for _ in range(200):  # an AnyValue nested deeper than protobuf allows
        value["arrayValue"] = {"values": [{}]}
        value = value["arrayValue"]["values"][0]
    got, resp, _ = post(collector.match["http"] + "/v1/traces", json.dumps(nested).encode(), "application/json")
    assert got == 400, resp[:300]
    assert_still_serving(api, stored)


def test_a_body_nested_deeper_than_a_span_may_be_is_a_400_and_nothing_is_stored(collector, api, stored):
    """What the API stores from a body (an imported message, a posted result) is held to the
    depth a span's messages and tool calls are held to: every reader walks it."""
    from tracefix.attributes import MAX_JSON_DEPTH

    content = "x"
    for _ in range(MAX_JSON_DEPTH + 1):
        content = {"deeper": content}
    sid = f"deep-import-{uuid.uuid4().hex[:8]}"
    body = json.dumps([{"session_id": sid, "messages": [{"role": "user", "content": content}]}]).encode()
    got, resp, _ = post(collector.match["http"] + "/api/v1/import", body, "application/json")
    assert got == 400 and "nested too deeply" in _error(resp), resp[:300]
    assert api.get_session(sid) is None
    got, resp, _ = post(f"{collector.match['http']}/api/v1/sessions/{stored}/analysis",
                        json.dumps({"hypotheses": [{"evidence": content}]}).encode(), "application/json")
    assert got == 400 and "nested too deeply" in _error(resp), resp[:300]
    assert api.get_analysis(stored) is None


# JSON texts of a session's `started_at` that no int64 nanosecond time can hold: epoch seconds
# past 2262, numbers beyond a double, ±Infinity, an integer beyond int64, the same as text, a
# time before 1678, and one that leaves its two messages (a millisecond apart) past the end
UNSTORABLE_STARTS = ["1e11", "1e400", "Infinity", "-Infinity", str(2 ** 70), '"1e30"', '"9999-01-01T00:00:00Z"',
                     '"0001-01-01"', '"2262-04-11T23:47:16.854Z"']


@pytest.mark.parametrize("started_at", UNSTORABLE_STARTS)
def test_import_with_a_start_the_store_cannot_hold_is_a_400_naming_the_field(collector, api, started_at):
    sid = f"start-{uuid.uuid4().hex[:8]}"
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    body = f'[{{"session_id": "{sid}", "messages": {json.dumps(messages)}, "started_at": {started_at}}}]'
    got, resp, _ = post(collector.match["http"] + "/api/v1/import", body.encode(), "application/json")
    assert got == 400, resp[:300]
    assert "session 0 (counting from 0): 'started_at' must " in _error(resp)
    assert api.get_session(sid) is None


def test_import_takes_a_start_in_range_and_ignores_times_on_steps(collector, api):
    """A step's own times are not read by the importer (its messages are timed from the
    session's start), so what they hold cannot fail it later."""
    sid = f"start-{uuid.uuid4().hex[:8]}"
    steps = [{"kind": "llm", "started_at": "9999-01-01T00:00:00Z", "duration_ms": 1e300,
              "output_message": {"role": "assistant", "content": "x"}}]
    body = json.dumps([{"session_id": sid, "steps": steps, "started_at": "2262-04-11T00:00:00Z"}]).encode()
    got, resp, _ = post(collector.match["http"] + "/api/v1/import", body, "application/json")
    assert got == 201, resp[:300]
    doc = api.get_session(sid)
    assert doc["started_at"].startswith("2262-04-11T00:00:00") and len(doc["steps"]) == 1
    assert sid in [s["session_id"] for s in api.list_sessions(limit=1000)]
