"""One bad span never costs the request: what is valid is stored, the rest rejected by
name through OTLP partial success, over OTLP/HTTP (protobuf, JSON, gzip) and OTLP/gRPC.

The bad spans are the ones an outside check found (null and non-string content parts, an
operation name sent as an array, messages nested 5,000 deep, tool arguments and results
nested past MAX_JSON_DEPTH), scores that are NaN or infinite, a message the database
refuses, and attribute limits on a small body. A store that already holds tool values or
messages nested that deeply (an older collector took them) still serves every read."""
from __future__ import annotations

import base64
import gzip
import json
import math
import os
import subprocess
import uuid

import grpc
import pytest
from collector_support import TOKEN, http, otlp_error, strict_json
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from test_ingest import post
from test_normalize_parity import _kvs

import procs
from tracefix.attributes import MAX_JSON_DEPTH
from tracefix.collector.normalize import normalize_request

T0 = 1_700_000_000_000_000_000
VIAS = ["protobuf", "json", "gzip", "grpc"]


def make_span(trace: bytes, n: int, name: str, attrs: dict, events=()) -> Span:
    return Span(trace_id=trace, span_id=(0x5000 + n).to_bytes(8, "big"), name=name,
                start_time_unix_nano=T0 + n * 1000, end_time_unix_nano=T0 + n * 1000 + 500,
                attributes=_kvs(attrs),
                events=[Span.Event(name=e, time_unix_nano=T0 + n * 1000 + 1, attributes=_kvs(a)) for e, a in events])


def make_request(spans: list[Span], service: str = "partial-app") -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource={"attributes": _kvs({"service.name": service})}, scope_spans=[ScopeSpans(spans=spans)])])


def good_chat(sid: str, trace: bytes, n: int) -> Span:
    return make_span(trace, n, f"chat good-{n}", {
        "gen_ai.operation.name": "chat", "tracefix.session.id": sid, "tracefix.step": n,
        "gen_ai.input.messages": json.dumps([{"role": "user", "content": f"question {n}"}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": f"answer {n}"}])})


def otlp_json(request: ExportTraceServiceRequest) -> bytes:
    """OTLP/JSON as exporters write it: ids in hex, not protobuf JSON's base64."""
    data = json_format.MessageToDict(request)
    for rs in data.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(data).encode()


def export(collector, request: ExportTraceServiceRequest | bytes, via: str) -> tuple[int | grpc.StatusCode, object]:
    """Send one export; (HTTP status or gRPC code, ExportTraceServiceResponse or error text)."""
    body = request if isinstance(request, bytes) else request.SerializeToString()
    if via == "grpc":
        channel = grpc.insecure_channel(collector.match["grpc"])
        raw = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                  request_serializer=None, response_deserializer=ExportTraceServiceResponse.FromString)
        try:
            return grpc.StatusCode.OK, raw(body, timeout=30, metadata=(("authorization", f"Bearer {TOKEN}"),))
        except grpc.RpcError as exc:
            return exc.code(), exc.details()
        finally:
            channel.close()
    url = collector.match["http"] + "/v1/traces"
    if via == "json":
        payload = body if isinstance(request, bytes) else otlp_json(request)
        status, resp, _ = post(url, payload, "application/json")
        if status == 200:
            return status, json_format.Parse(resp, ExportTraceServiceResponse())
    else:
        headers = {"Content-Encoding": "gzip"} if via == "gzip" else None
        status, resp, _ = post(url, gzip.compress(body) if via == "gzip" else body, headers=headers)
        if status == 200:
            return status, ExportTraceServiceResponse.FromString(resp)
    return status, otlp_error(resp, "application/json" if via == "json" else "application/x-protobuf")[0]


def accepted(collector, request, via: str) -> ExportTraceServiceResponse:
    status, answer = export(collector, request, via)
    assert status in (200, grpc.StatusCode.OK), (status, answer)
    return answer


def nested_messages(depth: int) -> str:
    return "[" + '{"role":"user","content":[' * depth + '"x"' + "]}" * depth + "]"


@pytest.mark.parametrize("via", VIAS)
def test_malformed_content_is_stored_or_rejected_per_span_never_for_the_request(collector, api, via):
    sid = f"partial-{via}-{uuid.uuid4().hex[:8]}"
    trace = uuid.uuid4().bytes
    oi_text = "llm.input_messages.0.message.contents.0.message_content.text"
    spans = [good_chat(sid, trace, 0), good_chat(sid, trace, 1),
             make_span(trace, 2, "chat null-text", {
                 "gen_ai.operation.name": "chat", "tracefix.session.id": sid,
                 "gen_ai.input.messages": json.dumps([{"role": "user", "content": [{"type": "text", "text": None}]}])}),
             make_span(trace, 3, "chat operation-array", {"gen_ai.operation.name": ["chat"],
                                                          "tracefix.session.id": sid}),
             make_span(trace, 4, "chat odd-instructions", {
                 "gen_ai.operation.name": "chat", "tracefix.session.id": sid, "gen_ai.input.messages": "[]",
                 "gen_ai.system_instructions": json.dumps([{"type": "text", "content": 7}, None, ["x"]])}),
             make_span(trace, 5, "openinference int-text", {
                 "openinference.span.kind": "LLM", "session.id": sid,
                 "llm.input_messages.0.message.role": "user", oi_text: 42}),
             make_span(trace, 6, "chat deep", {"gen_ai.operation.name": "chat", "tracefix.session.id": sid,
                                               "gen_ai.input.messages": nested_messages(5000)})]
    answer = accepted(collector, make_request(spans), via)
    assert answer.partial_success.rejected_spans == 1
    message = answer.partial_success.error_message
    assert "'chat deep'" in message and (0x5006).to_bytes(8, "big").hex() in message and "nested" in message

    stored = {s["name"]: s for s in api.get_spans(sid)}
    assert set(stored) == {s.name for s in spans} - {"chat deep"}
    assert json.loads(stored["chat null-text"]["attributes"]["gen_ai.input.messages"]) == [
        {"role": "user", "content": ""}]
    assert stored["chat operation-array"]["kind"] == "other"
    doc = api.get_session(sid)
    assert [s["index"] for s in doc["steps"]] == list(range(len(doc["steps"]))) and len(doc["steps"]) >= 2


@pytest.mark.parametrize("via", ["protobuf", "grpc"])
def test_non_finite_scores_are_stored_as_null_with_a_warning_and_raise_no_alert(collector, api, webhook, via):
    sid = f"nan-{via}-{uuid.uuid4().hex[:8]}"
    trace = uuid.uuid4().bytes
    spans = [make_span(trace, 0, "session run", {"tracefix.session.id": sid, "tracefix.session.root": True,
                                                 "tracefix.session.score": math.nan}),
             good_chat(sid, trace, 1),
             make_span(trace, 2, "evaluate", {"tracefix.session.id": sid}, events=[
                 ("gen_ai.evaluation.result", {"gen_ai.evaluation.score.value": -math.inf}),
                 ("gen_ai.evaluation.result", {"gen_ai.evaluation.score.value": math.nan}),
                 ("gen_ai.evaluation.result", {"gen_ai.evaluation.score.value": "-Infinity"})])]
    answer = accepted(collector, make_request(spans), via)
    assert answer.partial_success.rejected_spans == 0
    assert answer.partial_success.error_message.count("not a finite number") == 4

    doc = api.get_session(sid)  # readable: no NaN went into the store
    assert doc["score"] is None and doc["feedback"] == []
    assert sid in [s["session_id"] for s in api.list_sessions(limit=500)]
    events = next(s for s in api.get_spans(sid) if s["name"] == "evaluate")["events"]
    assert [e["attributes"]["gen_ai.evaluation.score.value"] for e in events] == [None, None, "-Infinity"]
    assert api.list_alerts(sid) == []  # alerts are written with the feedback, in the same transaction
    assert not [r for r in webhook.received if r["json"].get("session_id") == sid]


@pytest.mark.parametrize("via", ["json", "grpc"])
def test_a_span_the_database_refuses_is_rejected_and_the_others_stored(collector, api, via):
    """A lone UTF-16 surrogate in message JSON passes decoding and normalization, but the
    store cannot encode it: the writer must find that span and store the rest."""
    sid = f"refused-{via}-{uuid.uuid4().hex[:8]}"
    trace = uuid.uuid4().bytes
    spans = [good_chat(sid, trace, n) for n in range(5)]
    spans[3].attributes.add(key="gen_ai.input.messages").value.string_value = \
        '[{"role":"user","content":"lone \\ud800 surrogate"}]'
    answer = accepted(collector, make_request(spans), via)
    assert answer.partial_success.rejected_spans == 1
    assert "'chat good-3'" in answer.partial_success.error_message
    assert "database refused" in answer.partial_success.error_message
    assert sorted(s["name"] for s in api.get_spans(sid)) == [f"chat good-{n}" for n in (0, 1, 2, 4)]

    only_bad = make_request([spans[3]])  # nothing left to store: a 4xx, never a 5xx
    status, text = export(collector, only_bad, via)
    assert status in (400, grpc.StatusCode.INVALID_ARGUMENT) and "all 1 spans rejected" in text


@pytest.mark.parametrize("via", ["protobuf", "grpc"])
def test_attribute_element_limit_applies_to_small_bodies(collector, api, via):
    sid = f"limits-{via}-{uuid.uuid4().hex[:8]}"
    trace = uuid.uuid4().bytes
    spans = [good_chat(sid, trace, 0), make_span(trace, 1, "many", {"tracefix.session.id": sid,
                                                                     "junk": list(range(10_001))}),
             make_span(trace, 2, "nested", {"tracefix.session.id": sid,
                                            "junk": {f"k{i}": list(range(100)) for i in range(101)}})]
    body = make_request(spans).SerializeToString()
    assert len(body) < 1 << 20
    answer = accepted(collector, body, via)
    assert answer.partial_success.rejected_spans == 2
    assert answer.partial_success.error_message.count("more than 10000 elements") == 2
    assert [s["name"] for s in api.get_spans(sid)] == ["chat good-0"]


def test_attribute_length_limit_holds_whatever_size_the_caller_gives():
    """The per-attribute character limit no longer trusts `wire_bytes` to skip the check."""
    trace = uuid.uuid4().bytes
    request = make_request([make_span(trace, 0, "long", {"tracefix.session.id": "s", "text": "x" * 500}),
                            make_span(trace, 1, "short", {"tracefix.session.id": "s", "text": "x" * 50})])
    batch = normalize_request(request, max_attribute_chars=100, wire_bytes=60)
    assert batch.rejected == 1 and batch.span_count == 1
    assert "'long'" in batch.errors[0] and "500 characters (limit 100)" in batch.errors[0]


def tool_span(sid: str, trace: bytes, n: int, arguments: str, result: str) -> Span:
    return make_span(trace, n, f"execute_tool lookup-{n}", {
        "gen_ai.operation.name": "execute_tool", "tracefix.session.id": sid, "tracefix.step": n - 1,
        "gen_ai.tool.name": "lookup", "gen_ai.tool.call.arguments": arguments, "gen_ai.tool.call.result": result})


def deep(depth: int, closed: bool = True) -> str:
    return "[" * depth + ("]" * depth if closed else "")


def session_reads(base: str, sid: str, step: int) -> list[str]:
    """The routes that read a session's tool calls whole or in part, and one that reads every session."""
    one = f"{base}/api/v1/sessions/{sid}"
    return [one, f"{one}/steps/{step}", f"{one}/report", f"{one}/report?format=md",
            f"{base}/api/v1/training_sessions?criterion=all"]


@pytest.mark.parametrize("via", ["protobuf", "grpc"])
def test_tool_values_nested_too_deeply_are_rejected_like_messages_and_the_rest_reads(collector, api, via):
    sid = f"deep-tool-{via}-{uuid.uuid4().hex[:8]}"
    trace = uuid.uuid4().bytes
    spans = [good_chat(sid, trace, 0), tool_span(sid, trace, 1, "{}", deep(1000, closed=False)),
             tool_span(sid, trace, 2, deep(1500), "ok"), tool_span(sid, trace, 3, "{}", deep(MAX_JSON_DEPTH)),
             make_span(trace, 4, "chat deep", {"gen_ai.operation.name": "chat", "tracefix.session.id": sid,
                                               "gen_ai.output.messages": deep(MAX_JSON_DEPTH + 1)}),
             good_chat(sid, trace, 5)]
    answer = accepted(collector, make_request(spans), via)
    assert answer.partial_success.rejected_spans == 3
    message = answer.partial_success.error_message
    assert message.count("nested too deeply") == 3
    assert "'gen_ai.tool.call.result'" in message and "'gen_ai.tool.call.arguments'" in message
    stored = {s["name"] for s in api.get_spans(sid)}
    assert stored == {"chat good-0", "execute_tool lookup-3", "chat good-5"}
    # the tool value at the limit is stored and read as JSON, by every read of the session
    base = collector.match["http"]
    for url in session_reads(base, sid, 0):
        status, body, _ = http("GET", url)
        assert status == 200, (url, body[:300])
    (call,) = [call for step in api.get_session(sid)["steps"] for call in step["tool_calls"]]
    assert call["result"] == json.loads(deep(MAX_JSON_DEPTH))


def _store_then_rewrite(db, sid: str, sql: str, params: list) -> None:
    """A three-step session stored by a real collector, then rewritten in the file as an older
    collector could have left it (what ingest now refuses)."""
    serve = procs.start_serve(db, "--diagnose", "off")
    try:
        trace = uuid.uuid4().bytes
        request = make_request([good_chat(sid, trace, 0), tool_span(sid, trace, 1, "{}", "ok"), good_chat(sid, trace, 2)])
        assert post(serve.match["http"] + "/v1/traces", request.SerializeToString(), token=None)[0] == 200
    finally:
        assert serve.stop() == 0
    import duckdb

    con = duckdb.connect(str(db))
    try:
        con.execute(sql, params)
    finally:
        con.close()


def _cli_reads(db, sid: str, tmp_path) -> None:
    for verb in (["show", sid], ["report", sid, "-o", str(tmp_path / "deep.md")]):
        done = subprocess.run([*procs.TRACEFIX, *verb, "--db", str(db)], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "TRACEFIX_SERVER": "", "TRACEFIX_TOKEN": ""})
        assert done.returncode == 0 and "Traceback" not in done.stderr, (verb, done.stderr[-2000:])


def test_a_store_holding_tool_values_nested_too_deeply_serves_every_read(tmp_path):
    """What an older collector stored (a tool result 1,000 `[` deep, arguments 1,500 deep) is
    read as text: the session, its step, its report, the UI's step, the training sessions of
    the whole store and the CLI all answer."""
    db = tmp_path / "deep.duckdb"
    sid = "deep-stored"
    _store_then_rewrite(db, sid, "UPDATE spans SET tool_result = ?, tool_arguments = ? WHERE kind = 'tool'",
                        [deep(1000, closed=False), deep(1500)])

    serve = procs.start_serve(db, "--diagnose", "off")
    try:
        base = serve.match["http"]
        for url in [*session_reads(base, sid, 0), f"{base}/session?id={sid}&step=0"]:
            status, body, _ = http("GET", url, token=None)
            assert status == 200, (url, body[:300])
        call = strict_json(http("GET", f"{base}/api/v1/sessions/{sid}/steps/0", token=None)[1])["step"]["tool_calls"][0]
        assert call["result"] == deep(1000, closed=False) and call["arguments"] == deep(1500)
    finally:
        assert serve.stop() == 0
    _cli_reads(db, sid, tmp_path)


@pytest.mark.parametrize("depth", [600, 1200])
def test_a_store_holding_messages_nested_too_deeply_serves_every_read(tmp_path, depth):
    """Messages an older collector stored nested deeper than MAX_JSON_DEPTH (600 deep parses
    but is too deep to walk; 1,200 deep does not parse) are read as text by every read: the
    session, its step, its messages, its report, the UI and the CLI."""
    db = tmp_path / "deep-messages.duckdb"
    sid = "deep-messages"
    _store_then_rewrite(db, sid, "UPDATE messages SET message = ?", ['{"role": "user", "content": ' + deep(depth) + "}"])

    serve = procs.start_serve(db, "--diagnose", "off")
    try:
        base = serve.match["http"]
        listed = strict_json(http("GET", f"{base}/api/v1/sessions/{sid}/messages", token=None)[1])
        keys = [m["key"] for m in listed["messages"]]
        assert keys
        one = f"{base}/api/v1/sessions/{sid}"
        for url in [*session_reads(base, sid, 0), f"{one}/spans", f"{one}/messages/{keys[0]}",
                    f"{base}/session?id={sid}", f"{base}/session?id={sid}&step=0"]:
            status, body, _ = http("GET", url, token=None)
            assert status == 200, (url, body[:300])
        # and through the HTTP client a worker or the CLI uses against a server
        done = subprocess.run([*procs.TRACEFIX, "show", sid, "--json"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "TRACEFIX_SERVER": base, "TRACEFIX_TOKEN": ""})
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    finally:
        assert serve.stop() == 0
    _cli_reads(db, sid, tmp_path)
