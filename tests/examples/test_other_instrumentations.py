"""Examples run with a framework's OpenInference instrumentor active, against real `tracefix
sim` and `tracefix serve` processes (tests/examples/with_openinference.py): beside
`tracefix.init()` each agent turn, LLM call and tool run is stored once whichever side
recorded it; with OpenInference alone the collector still reads agents and tool steps from
its span kinds (AGENT, TOOL, LangGraph node CHAINs), and from OpenLLMetry's. AG2 too, beside
`tracefix.init()`."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import procs
import pytest
from example_runs import EXAMPLES, FAULT, session_of_run, tool_steps

RUNNER = Path(__file__).with_name("with_openinference.py")
ORDER = {"order_id": "A-1001"}

# case -> (example, mode, environment, agents of the steps in order, tools called in order)
CASES = {
    "langgraph-both": ("langgraph_refund", "both", {}, ["lookup", "lookup", "refunds", "refunds"],
                       ["get_order", "refund"]),
    "langgraph-only": ("langgraph_refund", "only", {}, ["lookup", "lookup", "refunds", "refunds"],
                       ["get_order", "refund"]),
    # OpenLLMetry's LangChain instrumentor alone: traceloop.span.kind task/tool spans, no call ids
    "langgraph-openllmetry-only": ("langgraph_refund", "only", {"INSTRUMENTATION": "openllmetry"},
                                   ["lookup", "lookup", "refunds", "refunds"], ["get_order", "refund"]),
    # the SDK's tracing on: OpenInference's trace processor records agents and tools, tracefix the calls
    "agents-both": ("openai_agents_refund", "both", {"SDK_TRACING": "1"}, ["triage", "triage", "refunds", "refunds"],
                    ["get_order", "handoff to refunds", "refund"]),
    # the SDK's tracing off: OpenInference's processor sees nothing, so tracefix records agents and tools
    "agents-tracing-off": ("openai_agents_refund", "both", {}, ["triage", "triage", "refunds", "refunds"],
                           ["get_order", "transfer_to_refunds", "refund"]),
    # OpenInference's AG2 instrumentor: its AGENT spans (agent.name) and TOOL spans (tool_call.id)
    "ag2-both": ("ag2_refund", "both", {}, ["clerk", "clerk", "refunder", "refunder"], ["get_order", "refund"]),
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One sim and one serve; every case's process started at once (cold framework imports)."""
    sim = procs.start_sim("--plan-fault", FAULT)
    serve = procs.start_serve(tmp_path_factory.mktemp("oi") / "store.duckdb")
    url = serve.match["http"]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TRACEFIX_LLM_")},
           "OPENAI_BASE_URL": sim.match["base_url"], "OPENAI_API_KEY": "sim", "OTEL_EXPORTER_OTLP_ENDPOINT": url,
           "PYTHONPATH": str(EXAMPLES)}
    runs = {case: subprocess.Popen([sys.executable, str(RUNNER), example, mode, f"oi-{case}"],
                                   env={**env, **extra},
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for case, (example, mode, extra, _, _) in CASES.items()}
    yield url, runs
    for run in runs.values():
        run.kill()
        run.communicate()
    serve.stop()
    sim.stop()


@pytest.mark.parametrize("case", list(CASES))
def test_each_agent_turn_llm_call_and_tool_run_is_stored_once(recorded, case):
    url, runs = recorded
    _, mode, _, agents, tools = CASES[case]
    session = session_of_run(url, runs[case], f"oi-{case}", len(agents))
    assert [s["agent"] for s in session["steps"]] == agents, [(s["agent"], s["span_id"]) for s in session["steps"]]
    calls = tool_steps(session)
    assert [c[1] for c in calls] == tools, calls
    get_order, refund = calls[0], calls[-1]
    assert get_order[0] == agents[0] and "delivered" in str(get_order[3]) and get_order[4] is None
    # the model's wrong amount, and the tool's error, as the agent saw them
    assert refund[0] == agents[-1] and "exceeds" in (refund[4] or "")
    assert refund[2] == {"order_id": "A-1001", "amount": 200}
    if mode == "both":
        assert get_order[2] == ORDER
    assert session["tokens"]["input"] > 0
    assert [s["index"] for s in session["steps"]] == list(range(len(agents)))
