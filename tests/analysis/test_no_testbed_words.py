"""The analysis reads who coordinates and what phase a step is in from the conversation's
shape, not from the demo testbed's words: an agent called "Orchestrator" is no coordinator
unless work goes out from it, a plan is a numbered list whatever it is called, and the
protocol's markers ("PLAN", "REVISED PLAN", "FINAL ANSWER") decide nothing. The words here
are the test's own (templates the analysis never imports), with others swapped in."""
from __future__ import annotations

import pytest

from tracefix.analysis.roles import coordinators, is_coordinator
from tracefix.analysis.units import build_units

STEPS_LIST = "1. look up {who}\n2. pay {who} 30\n3. answer the customer"


def _step(index: int, agent: str, text: str) -> dict:
    return {"index": index, "kind": "llm", "agent": agent, "input_messages": [{"role": "user", "content": "go"}],
            "output_message": {"role": "assistant", "content": text}, "tool_calls": []}


def _team(hub: str, worker: str, opening: str, again: str, closing: str) -> dict:
    """A hub that lays out its steps, hands one out, reads the report, lays them out again
    and answers; the worker in between."""
    return {"session_id": "team", "task": "Pay Dana 30", "steps": [
        _step(0, hub, opening + "\n" + STEPS_LIST.format(who="Dana")),
        _step(1, hub, f"{worker}: look up Dana and pay her 30"),
        _step(2, worker, "Dana holds ac-5501; the payment did not go through"),
        _step(3, hub, again + "\n" + STEPS_LIST.format(who="ac-5501")),
        _step(4, hub, f"{worker}: pay ac-5501 30"),
        _step(5, worker, "paid 30 to ac-5501"),
        _step(6, hub, closing + " Dana was paid 30."),
    ]}


MARKERS = [("PLAN:", "REVISED PLAN (attempt 2):", "FINAL ANSWER:"),
           ("Here is how we proceed:", "Let us try that again:", "To sum up for the customer:"),
           ("Steps ahead.", "Once more, from the failed step.", "All set.")]


@pytest.mark.parametrize("hub, worker", [("Orchestrator", "Teller"), ("Kestrel", "Wren"), ("Dispatcher", "Stocker")])
@pytest.mark.parametrize("opening, again, closing", MARKERS)
def test_phases_come_from_the_shape_whatever_the_agents_and_markers_are_called(hub, worker, opening, again, closing):
    units = build_units(_team(hub, worker, opening, again, closing))
    assert [u.phase for u in units] == ["plan", "instruct", "answer", "plan", "instruct", "answer", "answer"]


def test_a_coordinator_mentioning_a_plan_without_laying_one_out_instructs():
    doc = _team("Kestrel", "Wren", "PLAN:", "REVISED PLAN:", "FINAL ANSWER:")
    doc["steps"][1]["output_message"]["content"] = "Wren: the plan is to look up Dana first"
    doc["steps"][4]["output_message"]["content"] = "Wren: final answer pending, pay ac-5501 30"
    assert [u.phase for u in build_units(doc)][:5] == ["plan", "instruct", "answer", "plan", "instruct"]


def test_a_coordinator_is_where_work_goes_out_from_not_a_name():
    # The hub is found by the turn-taking, whatever it is called ...
    assert coordinators(["Kestrel", "Wren", "Kestrel", "Osric", "Kestrel"]) == {"Kestrel"}
    # ... and an agent named like the demo's coordinator that takes its turn after another's
    # hand-over, like any worker, coordinates nothing.
    assert not is_coordinator("Orchestrator")
    assert coordinators(["Kestrel", "Orchestrator", "Kestrel", "Wren", "Kestrel"]) == {"Kestrel"}
    # Generic role nouns still say it (a session too short to show its shape).
    assert is_coordinator("Planner") and is_coordinator("team_lead") and coordinators(["Supervisor"]) == {"Supervisor"}
