"""Real instrumentations exporting to `tracefix serve`: tracefix's own (the banking demo, over
OTLP/HTTP and OTLP/gRPC), OpenInference's and OpenLLMetry's openai instrumentors calling the
scripted LLM server."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid

import pytest
from collector_support import TOKEN, tracer_provider
from test_ingest import post

QUESTION = "Task: Alice Chen asks how much money is in her savings account."


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_instrumented_banking_app_sessions_are_complete(collector, api, sim_url, protocol):
    endpoint = collector.match["http"] if protocol == "http/protobuf" else "http://" + collector.match["grpc"]
    env = {**os.environ, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
           "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer {TOKEN}",
           "OTEL_SERVICE_NAME": f"bank-{protocol.split('/')[0]}"}
    before = {s["session_id"] for s in api.list_sessions(limit=1000)}
    run = subprocess.run([sys.executable, "-m", "tracefix.cli", "demo-run", "--base-url", sim_url, "--tasks", "t01",
                          "--otlp-endpoint", endpoint], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    new = [s for s in api.list_sessions(limit=1000) if s["session_id"] not in before]
    assert len(new) == 1, "one task, one session"
    doc = api.get_session(new[0]["session_id"])
    assert doc["entrypoint"] == "tracefix.demo.bank:run_task"
    assert doc["inputs"]["task_id"] == "t01"
    assert doc["replayable"] is True
    assert doc["outcome"] == "success" and doc["evaluation"]["milestones"]
    assert doc["task"] == QUESTION
    steps = doc["steps"]
    assert [s["index"] for s in steps] == list(range(len(steps))) and len(steps) >= 4
    assert steps[0]["agent"] == "Orchestrator" and "AccountAgent" in doc["agents"]
    assert steps[0]["snapshots"].get("db"), "the tracked database is snapshotted at step 0"
    tools = [tc for s in steps for tc in s["tool_calls"]]
    assert tools and all(tc["id"] for tc in tools)
    for s in steps:  # each tool call sits on the step whose LLM output asked for it
        asked = {tc["id"] for tc in (s["output_message"] or {}).get("tool_calls") or []}
        assert {tc["id"] for tc in s["tool_calls"]} <= asked
    assert doc["output"]["final_answer"] in steps[-1]["output_message"]["content"]
    chats = [s for s in api.get_spans(doc["session_id"]) if s["kind"] == "llm"]
    defs = [c["attributes"]["gen_ai.tool.definitions"] for c in chats if "gen_ai.tool.definitions" in c["attributes"]]
    assert defs, "tool definitions are stored once and given back whole"
    assert "lookup_customer" in {t["function"]["name"] for t in json.loads(defs[0])}


@contextlib.contextmanager
def instrumented(instrumentor, provider):
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()
        _unwrap_leftovers()
        provider.force_flush(10_000)
        provider.shutdown()


def _unwrap_leftovers() -> None:
    """OpenLLMetry's OpenAIInstrumentor.uninstrument() leaves its wrappers on the Responses
    API's methods (wrapt proxies around the SDK's functions); later tests in this process
    would record through them. Take them off so this module leaves the SDK as it found it."""
    from openai.resources.responses import AsyncResponses, Responses

    for cls in (Responses, AsyncResponses):
        for name, value in list(vars(cls).items()):
            if hasattr(value, "__wrapped__") and type(value).__module__.startswith(("wrapt", "_wrappers")):
                setattr(cls, name, value.__wrapped__)


def _chat(sim_url: str, content: str) -> str:
    import openai

    client = openai.OpenAI(base_url=sim_url, api_key="sim")
    reply = client.chat.completions.create(model="bank-agent", messages=[
        {"role": "system", "content": "You are the Orchestrator of a bank."},
        {"role": "user", "content": content}])
    return reply.choices[0].message.content


def test_openinference_openai_spans_are_normalized(collector, api, sim_url):
    from openinference.instrumentation import using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor

    sid = f"oi-{uuid.uuid4().hex[:8]}"
    provider = tracer_provider(collector, "grpc", service="oi-app")
    with instrumented(OpenAIInstrumentor(), provider), using_session(sid):
        answers = [_chat(sim_url, QUESTION), _chat(sim_url, QUESTION + " Please hurry.")]
    doc = api.get_session(sid)
    assert doc is not None, "session.id names the session"
    assert [s["kind"] for s in doc["steps"]] == ["llm", "llm"]
    first = doc["steps"][0]
    assert first["input_messages"] == [{"role": "system", "content": "You are the Orchestrator of a bank."},
                                       {"role": "user", "content": QUESTION}]
    assert first["output_message"] == {"role": "assistant", "content": answers[0]}
    assert first["model"] == "bank-agent" and first["input_tokens"] > 0 and first["output_tokens"] > 0
    assert first["finish_reason"] == "stop"
    assert doc["task"] == QUESTION
    spans = api.get_spans(sid)
    assert spans[0]["attributes"]["openinference.span.kind"] == "LLM", "attributes are kept whole"


def test_openllmetry_openai_spans_are_normalized(collector, api, sim_url):
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    provider = tracer_provider(collector, "http", service="openllmetry-app")
    tracer = provider.get_tracer("app")
    with instrumented(OpenAIInstrumentor(), provider):
        with tracer.start_as_current_span("workflow") as root:
            answer = _chat(sim_url, QUESTION)
            trace_id = format(root.get_span_context().trace_id, "032x")
    doc = api.get_session(trace_id)
    assert doc is not None, "without a session attribute the trace is the session"
    assert doc["service"] == "openllmetry-app"
    (step,) = doc["steps"]
    assert step["input_messages"][1] == {"role": "user", "content": QUESTION}
    assert step["output_message"]["content"] == answer
    assert step["model"] == "bank-agent" and step["output_tokens"] > 0


def test_flattened_openllmetry_prompt_attributes_are_normalized(collector, api):
    """Older OpenLLMetry releases flatten messages into gen_ai.prompt.N.* / gen_ai.completion.N.*."""
    sid = f"tl-{uuid.uuid4().hex[:8]}"
    attrs = {"llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-x",
             "traceloop.association.properties.session_id": sid,
             "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "what is my balance?",
             "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.finish_reason": "tool_calls",
             "gen_ai.completion.0.tool_calls.0.id": "call_7", "gen_ai.completion.0.tool_calls.0.name": "get_balance",
             "gen_ai.completion.0.tool_calls.0.arguments": '{"account": "ACC-1"}',
             "gen_ai.usage.prompt_tokens": 9, "gen_ai.usage.completion_tokens": 4}
    payload = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": uuid.uuid4().hex, "spanId": uuid.uuid4().hex[:16], "name": "openai.chat",
        "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000500000000",
        "attributes": [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}
                       for k, v in attrs.items()]}]}]}]}
    assert post(collector.match["http"] + "/v1/traces", json.dumps(payload).encode(), "application/json")[0] == 200
    (step,) = api.get_session(sid)["steps"]
    assert step["input_messages"] == [{"role": "user", "content": "what is my balance?"}]
    assert step["output_message"]["tool_calls"] == [
        {"id": "call_7", "type": "function", "function": {"name": "get_balance", "arguments": '{"account": "ACC-1"}'}}]
    assert step["finish_reason"] == "tool_calls"
    assert (step["input_tokens"], step["output_tokens"]) == (9, 4)
