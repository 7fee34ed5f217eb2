"""Replay mode: a recorded banking-demo session re-run from its cassette in a child process
(`python -m tracefix.replay_run`, TRACEFIX_REPLAY), counting requests at the LLM server."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracefix
from tracefix import semconv as sc
from tracefix.fingerprints import fingerprint_tool

from instr_support import cassette_from_spans, replay_in_this_process, sim_requests

TASK = "t03"  # a transfer: several tool calls that change the database


@pytest.fixture(scope="module")
def recorded(sim_url):
    """One real run of the demo, traced in memory: (cassette, output, spans)."""
    from tracefix.demo.bank import run_task

    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))
    try:
        output = run_task(TASK, base_url=sim_url, seed=1)
    finally:
        handle.shutdown()
    spans = exporter.get_finished_spans()
    return cassette_from_spans(spans), output, spans


def run_replay_mode(tmp_path: Path, cassette: dict, intervention: dict | None, receiver, session_id: str,
                    allowed_modules: list[str]) -> tuple[subprocess.CompletedProcess, Path]:
    report_path = tmp_path / f"{session_id}.json"
    config = {"cassette": cassette, "intervention": intervention, "session_id": session_id,
              "parent_session_id": cassette["session_id"], "report_path": str(report_path), "guard": False,
              "allowed_modules": allowed_modules}
    config_path = tmp_path / f"{session_id}-replay.json"
    config_path.write_text(json.dumps(config))
    env = {**os.environ, "TRACEFIX_REPLAY": str(config_path), "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
           "OTEL_BSP_SCHEDULE_DELAY": "100"}
    proc = subprocess.run([sys.executable, "-m", "tracefix.replay_run"], env=env, capture_output=True, text=True,
                          timeout=120)
    return proc, report_path


def replay(tmp_path: Path, cassette: dict, intervention: dict | None, receiver, session_id: str) -> dict:
    proc, report_path = run_replay_mode(tmp_path, cassette, intervention, receiver, session_id, ["tracefix.demo"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(report_path.read_text())


def steps_with_tools(cassette: dict) -> list[int]:
    return [s["index"] for s in cassette["steps"] if s["tool_calls"]]


def test_tool_fingerprints_are_reproducible_from_recorded_attributes(recorded):
    # (a chat span's fingerprint hashes the request as the SDK sent it, which its
    # gen_ai.input.messages, the conventions' parts shape, cannot give back:
    # test_instrumentation_openai reproduces it from the request itself)
    _, _, spans = recorded
    for span in spans:
        a = span.attributes
        if a.get(sc.GEN_AI_OPERATION_NAME) == "execute_tool":
            assert a[sc.GEN_AI_TOOL_CALL_ID], "every demo tool call is linked to its LLM call"
            assert fingerprint_tool(a[sc.GEN_AI_TOOL_NAME], a[sc.GEN_AI_TOOL_CALL_ARGUMENTS]) == a[sc.TOOL_FINGERPRINT]


def test_replay_without_intervention_reproduces_the_answer_with_no_llm_request(recorded, sim_url, tmp_path,
                                                                                otlp_receiver):
    cassette, output, _ = recorded
    before = sim_requests(sim_url)
    report = replay(tmp_path, cassette, None, otlp_receiver, "s-replay-none")
    assert sim_requests(sim_url) == before  # nothing reached the server
    assert report["output"]["final_answer"] == output["final_answer"]
    n_tools = sum(len(s["tool_calls"]) for s in cassette["steps"])
    assert report["counts"]["llm_cassette"] == len(cassette["steps"]) and report["counts"]["llm_live"] == 0
    assert report["counts"]["tool_cassette"] == n_tools and report["counts"]["tool_live"] == 0
    assert report["divergence"] is None and report["error"] is None
    # tools did not run, yet the evaluator sees the recorded final state
    assert report["outcome"] == "success"
    root = [s for s in otlp_receiver.session_spans("s-replay-none") if s["attributes"].get(sc.SESSION_SPAN)]
    assert root and root[0]["attributes"][sc.PARENT_SESSION_ID] == cassette["session_id"]
    sources = {s["attributes"].get(sc.REPLAY_SOURCE) for s in otlp_receiver.session_spans("s-replay-none")
               if s["attributes"].get(sc.GEN_AI_OPERATION_NAME) in ("chat", "execute_tool")}
    assert sources == {"cassette"}


def test_replay_mode_refuses_an_entrypoint_outside_the_allowed_modules(recorded, tmp_path, otlp_receiver):
    cassette, _, _ = recorded
    for allowed in ([], ["tracefix.instrumentation"]):
        proc, report_path = run_replay_mode(tmp_path, cassette, None, otlp_receiver, "s-refused", allowed)
        assert proc.returncode == 1 and "is outside the modules allowed to run here" in proc.stderr
        report = json.loads(report_path.read_text())
        assert "is outside the modules allowed" in report["error"]
        assert report["counts"]["llm_cassette"] == 0  # the entrypoint never ran


def test_add_message_at_step_t_serves_the_past_and_runs_live_after(recorded, sim_url, tmp_path, otlp_receiver):
    cassette, _, _ = recorded
    # the first step whose state differs from the start: restoring it is observable
    t = min(s["step"] for s in cassette["snapshots"] if s["step"] > 0)
    assert t < len(cassette["steps"])
    intervention = {"id": "iv-add", "step": t, "kind": "add_message", "category": "correction",
                    "text": "CORRECTION: double-check the account ids before acting.", "role": "user"}
    before = sim_requests(sim_url)
    report = replay(tmp_path, cassette, intervention, otlp_receiver, "s-replay-add")
    counts = report["counts"]
    assert counts["llm_cassette"] == t
    assert sim_requests(sim_url) - before == counts["llm_live"] >= 1  # live from t on, and only then
    spans = otlp_receiver.session_spans("s-replay-add")
    at_t = next(s for s in spans if s["attributes"].get(sc.GEN_AI_OPERATION_NAME) == "chat"
                and s["attributes"][sc.STEP] == t)
    assert at_t["attributes"][sc.REPLAY_SOURCE] == "intervention"
    assert json.loads(at_t["attributes"][sc.GEN_AI_INPUT_MESSAGES])[-1]["parts"] == [
        {"type": "text", "content": intervention["text"]}]
    # tracked state restored to the latest snapshot at or before t, recorded on the step-t span
    expected = max((s for s in cassette["snapshots"] if s["step"] <= t), key=lambda s: s["step"])["state"]
    restored = [e for e in at_t["events"] if e["name"] == sc.SNAPSHOT_EVENT]
    assert restored and json.loads(restored[0]["attributes"][sc.SNAPSHOT_STATE]) == expected
    root = next(s for s in spans if s["attributes"].get(sc.SESSION_SPAN))
    assert root["attributes"][sc.INTERVENTION_ID] == "iv-add"
    assert json.loads(root["attributes"][sc.INTERVENTION])["kind"] == "add_message"


def test_replace_output_returns_the_text_without_calling_the_model(recorded, sim_url, tmp_path, otlp_receiver):
    cassette, _, _ = recorded
    t = len(cassette["steps"]) - 1  # the Orchestrator's final answer
    intervention = {"id": "iv-out", "step": t, "kind": "replace_output", "category": "plan",
                    "text": "FINAL ANSWER: replaced by the intervention."}
    before = sim_requests(sim_url)
    report = replay(tmp_path, cassette, intervention, otlp_receiver, "s-replay-out")
    assert sim_requests(sim_url) == before
    assert report["counts"]["llm_intervention"] == 1 and report["counts"]["llm_cassette"] == t
    assert "replaced by the intervention" in report["output"]["final_answer"]


def test_replace_tool_result_answers_that_call_without_running_the_tool(recorded, tmp_path, otlp_receiver):
    cassette, _, _ = recorded
    t = steps_with_tools(cassette)[0]
    call = cassette["steps"][t]["tool_calls"][0]
    intervention = {"id": "iv-tool", "step": t, "kind": "replace_tool_result", "category": "tool_result",
                    "text": json.dumps({"error": "account frozen"}), "tool_call_id": call["id"]}
    report = replay(tmp_path, cassette, intervention, otlp_receiver, "s-replay-tool")
    assert report["counts"]["tool_intervention"] == 1
    tool_span = next(s for s in otlp_receiver.session_spans("s-replay-tool")
                     if s["attributes"].get(sc.GEN_AI_TOOL_CALL_ID) == call["id"])
    assert tool_span["attributes"][sc.REPLAY_SOURCE] == "intervention"
    assert json.loads(tool_span["attributes"][sc.GEN_AI_TOOL_CALL_RESULT]) == {"error": "account frozen"}


def test_fingerprint_mismatch_is_a_divergence_and_the_run_goes_live(recorded, sim_url, tmp_path, otlp_receiver):
    cassette, output, _ = recorded
    tampered = json.loads(json.dumps(cassette))
    tampered["steps"][2]["fingerprint"] = "0" * 64
    before = sim_requests(sim_url)
    report = replay(tmp_path, tampered, None, otlp_receiver, "s-replay-div")
    assert report["divergence"]["step"] == 2 and report["divergence"]["expected"] == "0" * 64
    assert report["divergence"]["got"] == cassette["steps"][2]["fingerprint"]
    assert report["counts"]["llm_cassette"] == 2
    assert sim_requests(sim_url) - before == report["counts"]["llm_live"] == len(cassette["steps"]) - 2
    assert report["output"]["final_answer"] == output["final_answer"]  # live from step 2 on a restored db
    diverged = next(s for s in otlp_receiver.session_spans("s-replay-div")
                    if s["attributes"].get(sc.GEN_AI_OPERATION_NAME) == "chat" and s["attributes"][sc.STEP] == 2)
    assert json.loads(diverged["attributes"][sc.DIVERGENCE])["step"] == 2


def test_async_app_with_streams_replays_in_process_from_its_cassette(sim_url, tmp_path, monkeypatch):
    """Replay mode inside the test process: async calls, an async stream and an async tool,
    served from the cassette as the SDK's own async types, with no request to the server."""
    import asyncio

    import openai

    calls = []

    @tracefix.tool
    async def lookup_customer(name: str) -> dict:
        calls.append(name)
        return {"customer_id": "CUST-001", "name": name}

    from tracefix.demo.team import system_prompt, tools_for

    async def agent_run(question: str) -> dict:
        client = openai.AsyncOpenAI(base_url=sim_url, api_key="k", max_retries=0)
        messages = [{"role": "system", "content": system_prompt("AccountAgent")}, {"role": "user", "content": question}]
        first = await client.chat.completions.create(model="bank-agent", messages=messages,
                                                     tools=tools_for("AccountAgent"))
        call = first.choices[0].message.tool_calls[0]
        result = await lookup_customer(**json.loads(call.function.arguments))
        messages += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}]
        stream = await client.chat.completions.create(model="bank-agent", messages=messages,
                                                      tools=tools_for("AccountAgent"), stream=True)
        parts = []
        async with stream:
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.tool_calls:
                    parts.append(chunk.choices[0].delta.tool_calls[0].function.arguments or "")
                elif chunk.choices and chunk.choices[0].delta.content:
                    parts.append(chunk.choices[0].delta.content)
        await client.close()
        return {"answer": "".join(parts)}

    run = tracefix.session(entrypoint="tests:agent_run")(agent_run)
    question = "AccountAgent: look up customer Alice Chen and get her accounts."

    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))
    try:
        recorded = asyncio.run(run(question))
    finally:
        handle.shutdown()
    cassette = cassette_from_spans(exporter.get_finished_spans())
    assert len(cassette["steps"]) == 2 and calls == ["Alice Chen"]

    replay_in_this_process(tmp_path, cassette, "s-async-replay", monkeypatch)
    before = sim_requests(sim_url)
    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))
    try:
        assert tracefix.replay_active()
        replayed = asyncio.run(run(question))
    finally:
        handle.shutdown()
    assert replayed == recorded and calls == ["Alice Chen"]  # the tool did not run again
    assert sim_requests(sim_url) == before
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["counts"]["llm_cassette"] == 2 and report["counts"]["tool_cassette"] == 1
    assert report["session_id"] == "s-async-replay" and report["output"] == recorded


def test_live_hooks_add_messages_to_live_calls_after_t_only(recorded, sim_url, tmp_path, monkeypatch):
    from tracefix import replay_mode
    from tracefix.demo.bank import run_task

    cassette, _, _ = recorded
    t = len(cassette["steps"]) - 3
    seen = []

    def guard(step, agent, messages):
        seen.append((step, agent, messages[-1]["role"]))
        return [{"role": "user", "content": f"GUARD: step {step} checked"}]

    config = tmp_path / "replay.json"
    config.write_text(json.dumps({"cassette": cassette, "session_id": "s-guarded",
                                  "intervention": {"id": "iv-g", "step": t, "kind": "add_message",
                                                   "text": "CORRECTION: mind the amounts.", "role": "user"},
                                  "parent_session_id": cassette["session_id"],
                                  "report_path": str(tmp_path / "report.json")}))
    monkeypatch.setenv("TRACEFIX_REPLAY", str(config))
    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))
    replay_mode.add_live_hook(guard)
    try:
        run_task(**{**cassette["inputs"], "base_url": sim_url})
    finally:
        replay_mode.clear_live_hooks()
        handle.shutdown()
    chats = {s.attributes[sc.STEP]: s for s in exporter.get_finished_spans()
             if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == "chat"}
    assert seen and all(step > t for step, _, _ in seen)  # never before or at t
    assert seen[0][1] is not None  # the hook knows which agent is speaking
    for step, span in chats.items():
        last = json.loads(span.attributes[sc.GEN_AI_INPUT_MESSAGES])[-1]["parts"]
        assert (last == [{"type": "text", "content": f"GUARD: step {step} checked"}]) == (step > t)


def test_raw_and_streaming_response_shapes_replay_from_the_cassette(sim_url, tmp_path, monkeypatch):
    """langchain-openai calls `with_raw_response.create(...).parse()` for every request:
    a replay must hand back what that call shape returns, not a bare ChatCompletion."""
    import asyncio

    import openai

    from tracefix.demo.team import system_prompt

    messages = [{"role": "system", "content": system_prompt("AccountAgent")},
                {"role": "user", "content": "AccountAgent: look up customer Alice Chen."}]

    def agent_run() -> dict:
        client = openai.OpenAI(base_url=sim_url, api_key="k", max_retries=0)
        raw = client.chat.completions.with_raw_response.create(model="bank-agent", messages=messages)
        first = raw.parse()
        with client.chat.completions.with_streaming_response.create(model="bank-agent", messages=messages) as resp:
            second = resp.parse()
            assert resp.status_code == 200 and resp.headers.get("content-type") == "application/json"

        async def async_calls():
            aclient = openai.AsyncOpenAI(base_url=sim_url, api_key="k", max_retries=0)
            legacy = await aclient.chat.completions.with_raw_response.create(model="bank-agent", messages=messages)
            async with aclient.chat.completions.with_streaming_response.create(model="bank-agent",
                                                                              messages=messages) as resp:
                streamed = await resp.parse()
            await aclient.close()
            return legacy.parse(), streamed

        third, fourth = asyncio.run(async_calls())
        return {"answers": [c.choices[0].message.model_dump(exclude_none=True) for c in (first, second, third, fourth)],
                "request_id_types": [type(raw.http_response).__name__, dict(raw.headers).get("content-type")]}

    run = tracefix.session(entrypoint="tests:agent_run")(agent_run)
    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))
    try:
        recorded = run()
    finally:
        handle.shutdown()
    cassette = cassette_from_spans(exporter.get_finished_spans())
    assert len(cassette["steps"]) == 4

    replay_in_this_process(tmp_path, cassette, "s-raw-replay", monkeypatch)
    before = sim_requests(sim_url)
    handle = tracefix.init(span_processor=SimpleSpanProcessor(InMemorySpanExporter()))
    try:
        replayed = run()
    finally:
        handle.shutdown()
    assert replayed["answers"] == recorded["answers"]
    assert sim_requests(sim_url) == before  # every shape was served from the cassette
    assert json.loads((tmp_path / "report.json").read_text())["counts"]["llm_cassette"] == 4
