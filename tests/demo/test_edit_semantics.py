"""The scripted model reads an edit's content, on every step of every task's fault-free run:
irrelevant edits change nothing, stated values are adopted right or wrong, and a slip is
prevented only by an edit that decides what it corrupts. In-process (the policy is a pure
function of the messages); tests/demo/test_faults.py checks the same over HTTP."""
from __future__ import annotations

import json

import pytest

from tracefix.demo import bank_edits, edits
from tracefix.demo.db import BankDB
from tracefix.demo.policy import decide
from tracefix.demo.tasks import TASK_LIST
from tracefix.demo.team import Team
from tracefix.demo.tools import BankTools


def requests_of(task) -> list[list[dict]]:
    """The message list of every LLM request in the task's fault-free run."""
    seen = []

    def llm(agent, messages, tools):
        seen.append(list(messages))
        return decide(messages, tools).message

    Team(llm, BankTools(BankDB()).call).run(task.instruction)
    return seen


REQUESTS = [(t.id, i, m) for t in TASK_LIST for i, m in enumerate(requests_of(t))]
IRRELEVANT = ["Please keep your answers short and friendly.", "Thank you, this is going well.",
              "Remember that the customer prefers email.", "Be careful."]


def _without_ids(message: dict) -> dict:
    message = json.loads(json.dumps(message))
    for call in message.get("tool_calls") or []:
        call.pop("id", None)
    return message


@pytest.mark.parametrize("edit", IRRELEVANT)
def test_an_irrelevant_edit_changes_no_step_and_prevents_no_fault(edit):
    for task, step, messages in REQUESTS:
        plain = decide(messages)
        edited = decide(messages + [{"role": "user", "content": edit}], reads_edits=True)
        assert _without_ids(edited.message) == _without_ids(plain.message), (task, step)
        for kind, (_, need) in edited.hosts.items():
            assert not need.met_by(edited.edit), (task, step, kind)


def _tool_steps(kind):
    for task, step, messages in REQUESTS:
        decision = decide(messages)
        if kind in decision.hosts and decision.message.get("tool_calls"):
            yield task, step, messages, decision


def _call_args(decision) -> dict:
    return json.loads(decision.message["tool_calls"][0]["function"]["arguments"])


def test_a_stated_value_is_adopted_whether_right_or_wrong():
    checked = 0
    for task, step, messages, decision in _tool_steps("wrong_argument"):
        key = "to_account" if "to_account" in _call_args(decision) else "account_id"
        right = _call_args(decision)[key]
        misled = decide(messages + [{"role": "user", "content": "It goes into ACC-1099."}], reads_edits=True)
        assert _call_args(misled)[key] == "ACC-1099", (task, step)
        assert misled.hosts["wrong_argument"][1].met_by(misled.edit)  # the edit decided the slot itself
        told = decide(messages + [{"role": "user", "content": f"It goes into {right}."}], reads_edits=True)
        assert _call_args(told)[key] == right and told.hosts["wrong_argument"][1].met_by(told.edit)
        checked += 1
    assert checked >= 10


def test_a_dropped_argument_is_restored_by_naming_it_or_pointing_to_it_but_not_by_naming_the_tool():
    checked = 0
    for task, step, messages, decision in _tool_steps("missing_argument"):
        tool = decision.tool
        variant, need = decision.hosts["missing_argument"]
        dropped = next(a for a in _call_args(decision) if a not in _call_args_of(variant().message))
        spoken = dropped.replace("_", " ")
        assert need.met_by(bank_edits.read([f"Do not forget the {spoken}."]))
        assert need.met_by(bank_edits.read([f"Call it with every value from the instruction you were given for the "
                                            f"{tool.replace('_', ' ')}."], tool))
        assert not need.met_by(bank_edits.read([f"Call {tool} again."]))  # the tool's name alone decides nothing
        assert not need.met_by(bank_edits.read([f"Call {tool} without the {spoken}."]))  # told to leave it out
        assert not need.met_by(None)
        checked += 1
    assert checked >= 20


def _call_args_of(message: dict) -> dict:
    return json.loads(message["tool_calls"][0]["function"]["arguments"])


def test_an_edit_is_read_only_with_the_draw():
    task, step, messages, decision = next(_tool_steps("wrong_argument"))
    edited = messages + [{"role": "user", "content": "It goes into ACC-1099."}]
    assert decide(edited, reads_edits=False).edit is None
    assert _without_ids(decide(edited, reads_edits=False).message) == _without_ids(decision.message)


def test_values_stated_as_wrong_are_not_adopted_and_directions_are_read():
    reading = edits.read("to_account was ACC-1003, which is wrong; move it from ACC-1001 to ACC-1002, $20.50.")
    assert [(s.value, s.direction, s.negated) for s in reading.ids] == [
        ("ACC-1003", None, True), ("ACC-1001", "source", False), ("ACC-1002", "destination", False)]
    assert [a.value for a in reading.amounts] == ["20.50"]
    assert not reading.states("ACC-1003") and reading.states("ACC-1002") and reading.states(20.5)
    assert edits.read("Deposit check CHK-5001 at step 6").ids[0].value == "CHK-5001"
    assert [s.value for s in edits.read("at step 6, see step 3").ids] == []
