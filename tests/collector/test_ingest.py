"""Spans from real OpenTelemetry SDK exporters (OTLP/HTTP and OTLP/gRPC) become sessions."""
from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request
import uuid

import pytest
from collector_support import TOKEN, tracer_provider
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

SYSTEM = {"role": "system", "content": "You are the bank's orchestrator. " + "Policy text. " * 40}


class InsufficientFunds(Exception):
    """A tool's own exception: OTel records its type module-qualified."""


def record_agent_session(tracer, session_id: str, steps: int = 4) -> None:
    """An agent session in tracefix/GenAI conventions: each step an LLM call that asks for a
    tool, the tool span linked by its call id; the prompt grows with every step."""
    history = [SYSTEM, {"role": "user", "content": "Move 5 EUR from ACC-1 to ACC-2"}]
    root_attrs = {"tracefix.session.id": session_id, "tracefix.session.root": True,
                  "tracefix.entrypoint": "bank.app:run_task", "tracefix.inputs": json.dumps({"task_id": "t03"}),
                  "tracefix.session.replayable": True}
    with tracer.start_as_current_span(f"session {session_id}", attributes=root_attrs) as root:
        for step in range(steps):
            agent = "Orchestrator" if step % 2 == 0 else "AccountAgent"
            with tracer.start_as_current_span(f"invoke_agent {agent}", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
                    "tracefix.session.id": session_id}):
                call_id = f"call_{step}"
                out = {"role": "assistant", "content": f"thinking at step {step}",
                       "tool_calls": [{"id": call_id, "type": "function",
                                       "function": {"name": "transfer", "arguments": json.dumps({"amount": step})}}]}
                with tracer.start_as_current_span("chat bank-agent", attributes={
                        "gen_ai.operation.name": "chat", "gen_ai.request.model": "bank-agent",
                        "gen_ai.response.model": "bank-agent", "tracefix.step": step,
                        "tracefix.session.id": session_id,
                        "gen_ai.input.messages": json.dumps(history),
                        "gen_ai.output.messages": json.dumps([out]),
                        "gen_ai.response.finish_reasons": ["tool_calls"],
                        "gen_ai.usage.input_tokens": 100 + step, "gen_ai.usage.output_tokens": 7}) as chat:
                    chat.add_event("tracefix.snapshot", {"tracefix.snapshot.key": "db",
                                                         "tracefix.snapshot.state": json.dumps({"balance": 100 - step})})
                tool_attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "transfer",
                              "gen_ai.tool.call.id": call_id, "tracefix.step": step,
                              "gen_ai.tool.call.arguments": json.dumps({"amount": step}),
                              "tracefix.session.id": session_id}
                with tracer.start_as_current_span("execute_tool transfer", attributes=tool_attrs) as tool:
                    if step == steps - 1:
                        tool.record_exception(InsufficientFunds("insufficient funds"))
                        tool.set_status(2, "insufficient funds")
                    else:
                        tool.set_attribute("gen_ai.tool.call.result", json.dumps({"ok": True}))
                history = history + [out, {"role": "tool", "tool_call_id": call_id, "content": '{"ok": true}'}]
        root.set_attribute("tracefix.session.output", json.dumps({"final_answer": "transferred"}))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_exported_session_becomes_a_document_with_steps_tools_and_snapshots(collector, api, protocol):
    sid = f"s-{protocol}-{uuid.uuid4().hex[:8]}"
    provider = tracer_provider(collector, protocol, service="bank-demo")
    record_agent_session(provider.get_tracer("test"), sid)
    assert provider.force_flush(10_000)
    provider.shutdown()

    doc = api.get_session(sid)
    assert doc is not None, "an acknowledged export must be readable at once"
    assert doc["service"] == "bank-demo"
    assert doc["entrypoint"] == "bank.app:run_task" and doc["inputs"] == {"task_id": "t03"}
    # tracefix's conventions from another tracer ("test"): no full responses for a replay to serve
    assert doc["replayable"] is False
    assert doc["replayable_reason"].startswith("step 0's LLM call was recorded by test only"), doc["replayable_reason"]
    assert doc["output"] == {"final_answer": "transferred"}
    assert [s["index"] for s in doc["steps"]] == [0, 1, 2, 3]
    assert [s["agent"] for s in doc["steps"]] == ["Orchestrator", "AccountAgent"] * 2
    assert doc["agents"] == ["Orchestrator", "AccountAgent"]
    assert doc["models"] == ["bank-agent"]
    assert doc["tokens"] == {"input": 100 + 101 + 102 + 103, "output": 28}
    step2 = doc["steps"][2]
    assert len(step2["input_messages"]) == 2 + 2 * 2, "step k sees the growing history"
    assert step2["input_messages"][0] == SYSTEM
    assert step2["output_message"]["tool_calls"][0]["id"] == "call_2"
    assert step2["finish_reason"] == "tool_calls"
    assert step2["tool_calls"] == [{**step2["tool_calls"][0], "id": "call_2", "name": "transfer",
                                    "arguments": {"amount": 2}, "result": {"ok": True}, "error": None}]
    assert step2["snapshots"] == {"db": {"balance": 98}}
    last = doc["steps"][3]["tool_calls"][0]
    # "Type: message" with the short type name, as the agent saw it (contracts §1)
    assert last["error"] == "InsufficientFunds: insufficient funds" and last["result"] is None

    listed = {s["session_id"]: s for s in api.list_sessions(limit=1000)}
    assert listed[sid]["steps"] == 4 and listed[sid]["service"] == "bank-demo"

    spans = api.get_spans(sid)
    assert len(spans) == 1 + 4 * 3
    chats = [s for s in spans if s["name"] == "chat bank-agent"]
    # attributes come back whole, the content-addressed messages included
    assert json.loads(chats[1]["attributes"]["gen_ai.input.messages"])[0] == SYSTEM
    assert chats[1]["attributes"]["tracefix.step"] == 1


def _otlp_request(session_id: str, n: int = 3) -> bytes:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    for i in range(n):
        with tracer.start_as_current_span("chat m", attributes={
                "gen_ai.operation.name": "chat", "tracefix.session.id": session_id, "tracefix.step": i,
                "gen_ai.input.messages": json.dumps([SYSTEM, {"role": "user", "content": f"q{i}"}]),
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": f"a{i}"}])}):
            pass
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


def post(url: str, body: bytes, content_type: str = "application/x-protobuf", token: str | None = TOKEN,
         headers: dict | None = None) -> tuple[int, bytes, dict]:
    h = {"Content-Type": content_type, **(headers or {})}
    if token:
        h["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body, method="POST", headers=h)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def test_span_exported_twice_is_stored_once_and_messages_once(collector, api):
    sid = f"dup-{uuid.uuid4().hex[:8]}"
    body = _otlp_request(sid, n=3)
    for _ in range(2):  # an exporter retry after a lost response
        status, _, _ = post(collector.match["http"] + "/v1/traces", body)
        assert status == 200
    assert len(api.get_spans(sid)) == 3
    doc = api.get_session(sid)
    assert [s["output_message"]["content"] for s in doc["steps"]] == ["a0", "a1", "a2"]


def test_otlp_json_with_gzip_is_accepted(collector, api):
    sid = f"json-{uuid.uuid4().hex[:8]}"
    payload = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "json-svc"}}]},
        "scopeSpans": [{"scope": {"name": "manual"}, "spans": [{
            "traceId": uuid.uuid4().hex, "spanId": uuid.uuid4().hex[:16], "name": "chat m", "kind": 3,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                {"key": "gen_ai.conversation.id", "value": {"stringValue": sid}},
                {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
                {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "hello"}]}])}},
                {"key": "gen_ai.output.messages", "value": {"stringValue": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "hi there"}],
                      "finish_reason": "stop"}])}}]}]}]}]}
    status, body, headers = post(collector.match["http"] + "/v1/traces", gzip.compress(json.dumps(payload).encode()),
                                 "application/json", headers={"Content-Encoding": "gzip"})
    assert status == 200, body
    assert headers["content-type"].startswith("application/json")
    doc = api.get_session(sid)
    assert doc["service"] == "json-svc"
    assert doc["started_at"].startswith("2023-11-14T22:13:20")
    step = doc["steps"][0]
    assert step["input_messages"] == [{"role": "user", "content": "hello"}]
    assert step["output_message"]["content"] == "hi there"
    assert step["input_tokens"] == 12


def agent_run_with_sessionless_chat(session_id: str):
    """(root, child) finished spans: an agent run naming its session, and a chat span under it
    that names none (it belongs to the session through its trace)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("agent run", attributes={"session.id": session_id}):
        with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
            pass
    root, child = sorted(exporter.get_finished_spans(), key=lambda s: s.parent is not None)
    return root, child


def test_span_without_session_attribute_joins_its_traces_session_across_requests(collector, api):
    sid = f"late-{uuid.uuid4().hex[:8]}"
    root, child = agent_run_with_sessionless_chat(sid)
    assert post(collector.match["http"] + "/v1/traces", encode_spans([root]).SerializeToString())[0] == 200
    assert post(collector.match["http"] + "/v1/traces", encode_spans([child]).SerializeToString())[0] == 200
    assert {s["name"] for s in api.get_spans(sid)} == {"agent run", "chat m"}
    assert len(api.get_session(sid)["steps"]) == 1


def test_spans_stored_before_the_root_naming_their_session_move_into_it(collector, api):
    """The usual order of a batch span processor: the chat span ends, and is exported, before
    the agent run that names the session. Its evaluation event's feedback moves along, and no
    session named by the trace id is left behind."""
    sid = f"early-{uuid.uuid4().hex[:8]}"
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("agent run", attributes={"session.id": sid}):
        for i in range(2):
            with tracer.start_as_current_span(f"chat {i}", attributes={"gen_ai.operation.name": "chat"}) as chat:
                if i == 1:
                    chat.add_event("gen_ai.evaluation.result", {"gen_ai.evaluation.score.value": 0.9})
    root, *children = sorted(exporter.get_finished_spans(), key=lambda s: s.parent is not None)
    trace_id = f"{root.context.trace_id:032x}"
    for spans in ([children[0]], [children[1]], [root]):
        assert post(collector.match["http"] + "/v1/traces", encode_spans(spans).SerializeToString())[0] == 200
    assert {s["name"] for s in api.get_spans(sid)} == {"agent run", "chat 0", "chat 1"}
    session = api.get_session(sid)
    assert [s["index"] for s in session["steps"]] == [0, 1]
    assert [f["score"] for f in session["feedback"]] == [0.9]
    assert trace_id not in {s["session_id"] for s in api.list_sessions()}


def test_large_request_decoded_by_the_worker_process_joins_its_session_once(collector, api):
    """Bodies over 64 KiB are decoded in the decode worker process and cross back as Arrow
    tables without rows: a late session reassignment and the dedup of a resend must still hold."""
    sid = f"big-{uuid.uuid4().hex[:8]}"
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    padding = "policy text " * 8000  # ~96 KB: over the inline-decoding limit
    with tracer.start_as_current_span("agent run", attributes={"session.id": sid}):
        for i in range(3):
            with tracer.start_as_current_span(f"chat {i}", attributes={"gen_ai.operation.name": "chat",
                                                                        "bench.padding": padding}):
                pass
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.parent is not None)
    root, children = spans[0], spans[1:]
    big = encode_spans(children).SerializeToString()
    assert len(big) > 64 * 1024
    assert post(collector.match["http"] + "/v1/traces", encode_spans([root]).SerializeToString())[0] == 200
    for _ in range(2):  # the second is an exporter retry
        assert post(collector.match["http"] + "/v1/traces", big)[0] == 200
    stored = api.get_spans(sid)
    assert sorted(s["name"] for s in stored) == ["agent run", "chat 0", "chat 1", "chat 2"]
    assert all(s["attributes"]["bench.padding"] == padding for s in stored if s["name"].startswith("chat"))
    assert len(api.get_session(sid)["steps"]) == 3
