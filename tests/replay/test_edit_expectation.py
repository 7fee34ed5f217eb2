"""A person's own edit is judged by what it asks (replay/edit_expectation.py), not by the
expectation of the template the product would have written at that step (issue 36)."""
from __future__ import annotations

import pytest

from tracefix.replay.edit_expectation import expectation
from tracefix.replay.judge import judge_fulfilled

DOC = {"steps": [
    {"index": 0, "agent": "Worker", "tool_calls": [{"name": "lookup_customer", "arguments": {"name": "Erin Gray"}}]},
    {"index": 1, "agent": "Worker", "tool_calls": [{"name": "deposit_check", "arguments": {"account_id": "ACC-1"}}]},
]}
DEFINITIONS = [{"type": "function", "function": {"name": "deposit_check", "parameters": {
    "properties": {"account_id": {}, "check_number": {}}}}}]


@pytest.mark.parametrize("text, action, tool, argument", [
    ("Call deposit_check with check_number CHK-5001.", "call_tool", "deposit_check", "check_number"),
    ("The check number is CHK-5001.", "call_tool", "deposit_check", "check_number"),  # a parameter names the tool
    ("deposit_check has not been called yet.", "call_tool", "deposit_check", None),
    ("Do not call deposit_check; it is not needed.", "avoid_tool", "deposit_check", None),
    ("deposit_check was already done earlier.", "avoid_tool", "deposit_check", None),
    ("Do not give the final answer yet.", "continue", None, None),
    ("Please keep your answers short and friendly.", "unknown", None, None),
])
def test_a_persons_edit_is_read_for_what_it_asks(text, action, tool, argument):
    expect = expectation(text, DOC, "Worker", DEFINITIONS)
    assert (expect["action"], expect["tool"], expect["argument"]) == (action, tool, argument)


def test_an_edit_the_heuristic_cannot_read_is_unknown_without_an_llm_judge():
    iv = {"step": 1, "text": "Be nice.", "expect": expectation("Be nice.", DOC, "Worker")}
    assert judge_fulfilled(iv, DOC, DOC) == (None, "unknown")


def test_asked_not_to_call_a_tool_is_fulfilled_only_when_it_is_not_called():
    iv = {"step": 1, "text": "Do not call deposit_check.",
          "expect": expectation("Do not call deposit_check.", DOC, "Worker")}
    assert judge_fulfilled(iv, DOC, DOC) == (False, "heuristic")
    without = {"steps": [DOC["steps"][0], {"index": 1, "agent": "Worker", "tool_calls": [],
                                           "output_message": {"content": "done"}}]}
    assert judge_fulfilled(iv, DOC, without) == (True, "heuristic")
