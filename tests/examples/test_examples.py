"""Each example of examples/ end to end, run as its README says against `tracefix sim` and
`tracefix serve`: the sim's plan fault makes the refund fail; the stored session has the
framework's agent names and the tool steps with arguments and results, in order; a real
`tracefix worker` replays the diagnosis' hypothesis and a verdict comes back. The four
examples share one sim, one serve and one worker (each with its own session and verdict)."""
from __future__ import annotations

import pytest
from example_runs import diagnose_with_worker, record_failure, start_recordings, start_stack, tool_steps

from tracefix.collector.access import HttpAccess

ORDER = {"order_id": "A-1001"}
WRONG_REFUND = {"order_id": "A-1001", "amount": 200}

# example -> (agent of the step each tool call belongs to, in order), (agents of the steps)
CASES = {
    "openai_sdk_refund": (["desk", "desk"], {"desk"}),
    "openai_agents_refund": (["triage", "triage", "refunds"], {"triage", "refunds"}),
    "langgraph_refund": (["lookup", "refunds"], {"lookup", "refunds"}),
    # AG2: the desk agent executes the functions; the steps are the clerk's and the refunder's
    "ag2_refund": (["clerk", "refunder"], {"clerk", "refunder"}),
}


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    """The shared sim, serve and worker, and every example already running against them."""
    running = start_stack(tmp_path_factory.mktemp("examples") / "store.duckdb", list(CASES))
    runs = start_recordings(running, list(CASES))
    yield running, runs
    for run in runs.values():
        run.kill()
        run.communicate()
    running.stop()


def _check_recorded(url: str, summary: dict, example: str) -> dict:
    tool_agents, agents = CASES[example]
    assert summary["entrypoint"] == f"{example}:refund_order" and summary["marked_replayable"], summary
    assert summary["outcome"] == "failure"
    session = HttpAccess(url).get_session(summary["session_id"])
    assert {s["agent"] for s in session["steps"]} == agents, [s["agent"] for s in session["steps"]]
    calls = [c for c in tool_steps(session) if c[1] != "transfer_to_refunds"]
    handoffs = [c for c in tool_steps(session) if c[1] == "transfer_to_refunds"]
    assert [c[1] for c in calls] == ["get_order", "refund"]
    assert calls[0][2] == ORDER and calls[0][4] is None
    assert "delivered" in str(calls[0][3])  # the order as the tool returned it
    assert calls[1][2] == WRONG_REFUND and "exceeds" in (calls[1][4] or "")
    assert [c[0] for c in tool_steps(session)] == tool_agents
    if example == "openai_agents_refund":
        assert handoffs and handoffs[0][3] == {"handoff_to": "refunds"}
    indexes = [s["index"] for s in session["steps"]]
    assert indexes == sorted(indexes)
    return session


@pytest.mark.parametrize("example", list(CASES))
def test_example_failure_is_recorded_with_framework_structure_and_a_replay_validates_the_fix(examples, example):
    stack, runs = examples
    summary = record_failure(stack, example, runs[example])
    _check_recorded(stack.url, summary, example)
    result = diagnose_with_worker(stack, summary["session_id"])
    [hypothesis] = [h for h in result["hypotheses"] if h["intervention"]["expect"].get("tool") == "refund"]
    errors = [r["error"] for r in hypothesis["runs"] if r["error"]]
    assert not errors, errors
    # the correction points the model back to the task's amount: every replay refunds 20
    assert hypothesis["verdict"] == "validated", hypothesis
    assert all(r["success"] and "refunded" in str(r["output"]) for r in hypothesis["runs"])
    # three replays of this session (not of an example that shares the worker), stored as its children
    children = {s["session_id"] for s in HttpAccess(stack.url).list_sessions(parent_session_id=summary["session_id"])}
    assert len(hypothesis["runs"]) == 3 and {r["child_session_id"] for r in hypothesis["runs"]} <= children
