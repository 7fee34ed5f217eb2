"""The session page's outline (`Store.session_outline`) read with only the columns each kind
of span needs: a multi-agent session's outline says what its whole document says (agents
named by their spans up the tree, through spans of no kind; a call two instrumentations
described; failed and unnamed tool runs), each step filled in full as `session_step` fills it;
and a kept outline leaves Python's cycle collector few objects to walk."""
from __future__ import annotations

import gc
import json

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from tracefix import semconv as sc
from tracefix.collector.normalize import normalize_request
from tracefix.collector.store import Store

AGENTS = ("Planner", "Coder", "Reviewer")
TURNS = 240
COMPACT = ("index", "kind", "agent", "model", "started_at", "duration_ms", "input_tokens", "output_tokens",
           "cost_usd", "finish_reason", "error", "replay_source")


def team_session(session_id: str, turns: int) -> bytes:
    """Agents taking turns: each turn an `invoke_agent NAME` span (the Reviewer's names itself
    by attribute instead), a plain span under it, and under that an LLM call naming no agent
    that asks for a tool; some tool runs fail, some name no call id, and one call is also
    described by a framework's instrumentation (an OpenInference LLM span around it)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("session", attributes={sc.SESSION_ID: session_id}):
        for i in range(turns):
            agent = AGENTS[i % 3]
            named = {sc.GEN_AI_AGENT_NAME: agent} if agent == "Reviewer" else {}
            with tracer.start_as_current_span(f"invoke_agent {agent}" if not named else "turn", attributes={
                    "gen_ai.operation.name": "invoke_agent", sc.SESSION_ID: session_id, **named}), \
                    tracer.start_as_current_span("prepare prompt", attributes={sc.SESSION_ID: session_id}):
                call = {"id": f"call_{i}", "type": "function",
                        "function": {"name": f"tool_{i % 4}", "arguments": json.dumps({"turn": i})}}
                output = {"role": "assistant", "content": f"turn {i} of {agent}", "tool_calls": [call]}
                llm = {"gen_ai.operation.name": "chat", sc.SESSION_ID: session_id, sc.STEP: i, sc.CALL_SEQ: 2 * i,
                       "gen_ai.request.model": f"model-{i % 2}", "gen_ai.usage.input_tokens": 10 + i,
                       "gen_ai.usage.output_tokens": 5,
                       "gen_ai.input.messages": json.dumps([{"role": "user", "content": f"do turn {i}"}]),
                       "gen_ai.output.messages": json.dumps([output])}
                if i == 4:  # a framework's view of the same call, around tracefix's
                    with tracer.start_as_current_span("ChatModel", attributes={
                            "openinference.span.kind": "LLM", sc.SESSION_ID: session_id,
                            "gen_ai.output.messages": json.dumps([output])}), \
                            tracer.start_as_current_span(f"chat {i}", attributes=llm):
                        pass
                else:
                    with tracer.start_as_current_span(f"chat {i}", attributes=llm):
                        pass
                with tracer.start_as_current_span(f"execute_tool tool_{i % 4}", attributes={
                        "gen_ai.operation.name": "execute_tool", sc.SESSION_ID: session_id, sc.STEP: i,
                        sc.GEN_AI_TOOL_NAME: f"tool_{i % 4}", sc.CALL_SEQ: 2 * i + 1,
                        **({sc.GEN_AI_TOOL_CALL_ID: f"call_{i}"} if i % 5 else {}),
                        sc.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps({"turn": i}),
                        sc.GEN_AI_TOOL_CALL_RESULT: json.dumps({"ok": i % 7 != 3})}) as tool:
                    if i % 7 == 3:
                        tool.set_status(Status(StatusCode.ERROR, f"tool_{i % 4} refused turn {i}"))
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = Store(str(tmp_path_factory.mktemp("outline") / "outline.duckdb"))
    for session_id in ("team", "crew"):  # the crew's outline is read by one test only
        s.ingest(normalize_request(ExportTraceServiceRequest.FromString(team_session(session_id, TURNS))))
    yield s
    s.close()


def test_a_team_sessions_outline_says_what_its_document_says(store):
    doc, outline = store.get_session("team"), store.session_outline("team")
    assert outline["agents"] == doc["agents"] and sorted(doc["agents"]) == sorted(AGENTS)
    for key in ("task", "models", "tokens", "cost_usd", "cost_by_agent", "cost_by_model", "replayable"):
        assert outline[key] == doc[key], key
    assert [s["agent"] for s in outline["steps"]] == [AGENTS[i % 3] for i in range(TURNS)]
    assert len(outline["steps"]) == len(doc["steps"]) == TURNS  # the framework's view of turn 4 is no step
    for full, light in zip(doc["steps"], outline["steps"]):
        assert {k: light[k] for k in COMPACT} == {k: full[k] for k in COMPACT}
        assert light["tool_calls"] == [{k: tc[k] for k in ("id", "name", "error", "duration_ms")}
                                       for tc in full["tool_calls"]]
    failed = [s["index"] for s in outline["steps"] if any(tc["error"] for tc in s["tool_calls"])]
    assert failed == list(range(3, TURNS, 7))
    # steps in full, from the kept outline: what session_step reads (the first, one named twice,
    # one whose tool run names no call id, failed ones, the last)
    for index in (0, 3, 4, 5, 10, 17, 100, TURNS - 1):
        assert store.session_outline("team", full_step=index)["full_step"] == store.session_step("team", index)["step"]


def test_a_kept_outline_leaves_the_cycle_collector_few_objects_to_walk(store):
    gc.collect()
    before = len(gc.get_objects())
    outline = store.session_outline("crew")  # assembled now, and kept
    gc.collect()
    gc.collect()  # a tuple of tuples is left untracked a pass after its members
    kept = len(gc.get_objects()) - before
    assert len(outline["steps"]) == TURNS
    # each compact step and its list of tool calls; the steps as assembled (10 objects a step
    # with these) are not kept
    assert kept < 3 * TURNS, kept
