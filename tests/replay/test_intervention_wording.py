"""The deterministic fix text reads as a sentence whichever way the recorded call went wrong
(issue 38: "the call to `refund` at this point and failed with" had lost its verb)."""
from __future__ import annotations

import re

from replay_docs import failed_deposit_session

from tracefix.replay import interventions

# a sentence about the call must have a verb between "at this point" and what happened
DANGLING = re.compile(r"at this point and ")


def refund_session(arguments: dict, error: str | None) -> dict:
    doc = failed_deposit_session()
    doc["steps"][3]["input_messages"] = [{"role": "user", "content": "Refund order ORD-0042 for customer CUST-001."}]
    doc["steps"][3]["tool_calls"] = [{"id": "c", "name": "refund", "arguments": arguments, "result": None,
                                      "error": error}]
    return doc


def fix_text(doc: dict) -> str:
    return interventions.template(doc, {"id": "h", "step": 3, "agent": "PaymentsAgent", "evidence": {}})["text"]


def test_a_call_that_failed_for_no_argument_it_names_says_it_failed():
    text = fix_text(refund_session({"order_id": "42"}, "RuntimeError: the refund service is down"))
    assert not DANGLING.search(text), text
    assert "the call to `refund` at this point failed with `RuntimeError: the refund service is down`." in text, text


def test_a_failed_call_with_a_wrong_value_says_it_failed_then_what_was_wrong():
    text = fix_text(refund_session({"order_id": "ORD-0077"}, "LookupError: no such order"))
    assert not DANGLING.search(text), text
    assert "the call to `refund` at this point failed with `LookupError: no such order`: order_id was ORD-0077" in text, text


def test_a_left_out_argument_and_its_failure_stay_one_sentence():
    text = fix_text(refund_session({}, "MissingArgument: refund: missing required argument 'order_id'"))
    assert "at this point left out order_id and failed with `MissingArgument" in text, text
