"""The scripted model's reader turns an edit into the actions it asks for, with negation and
scope applied to every part; inputs here are written as a person would write them, not from
the reader's word lists, and include the misleading edits of issue 36."""
from __future__ import annotations

import pytest

from tracefix.demo import bank_edits, warehouse_edits
from tracefix.demo.needs import Need


def bank(text: str, own: str | None = None):
    return bank_edits.read([text], own)


def house(text: str, own: str | None = None):
    return warehouse_edits.read([text], own)


@pytest.mark.parametrize("text", [
    "Do not call transfer; it was already carried out earlier. Just report it as done.",
    "The transfer already went through, no need to do it again.",
    "Don't move the money, that has been done.",
    "Skip the transfer.",
    "Never wire anything here.",
])
def test_a_tool_said_not_to_be_called_or_already_done_is_forbidden_not_asked_for(text):
    asks = bank(text, "transfer")
    assert "transfer" in asks.forbid and "transfer" not in asks.call
    assert not Need("skipped_action", "transfer").met_by(asks)


@pytest.mark.parametrize("text", [
    "The transfer has not been carried out yet; do it now.",
    "You never actually moved the money. Go ahead with it.",
    "deposit_check was never called: call it.",
    "Please deposit the cheque now, it is still pending.",
])
def test_an_action_said_not_done_is_asked_for(text):
    own = "deposit_check" if "deposit" in text else "transfer"
    asks = bank(text, own)
    assert own in asks.call and own not in asks.forbid


@pytest.mark.parametrize("text", [
    "Call lookup_customer without the name; that argument is optional and must be left out.",
    "Leave out the name this time.",
    "The customer's name is not needed, do not pass it.",
])
def test_an_argument_to_leave_out_is_omitted_and_does_not_restore_a_dropped_one(text):
    asks = bank(text, "lookup_customer")
    assert "name" in asks.omit and "name" not in asks.values
    assert not Need("missing_argument", "lookup_customer", "name").met_by(asks)
    assert bank_edits.adopt_arguments("lookup_customer", {"name": "Erin Gray"}, asks) == {}


@pytest.mark.parametrize("text, stop", [
    ("Nothing is pending: everything is done, give the final answer now.", True),
    ("All the work is complete; answer the customer right away.", True),
    ("Do not give the final answer yet: the transfer has not been carried out.", False),
    ("The task is not finished, keep going.", False),
    ("Hold off on answering until the deposit is done.", False),
    ("Only answer once every step of the plan is done.", False),
])
def test_stop_now_and_not_yet_are_told_apart(text, stop):
    assert bank(text).stop is stop


@pytest.mark.parametrize("text", [
    "Send it to ACC-1002, not ACC-1003.",
    "ACC-1003 is wrong; the destination account is ACC-1002.",
    "to_account must be ACC-1002 rather than ACC-1003",
    "The money should go into ACC-1002 instead of ACC-1003.",
])
def test_the_right_value_is_adopted_and_the_one_called_wrong_is_not(text):
    asks = bank(text, "transfer")
    args = bank_edits.adopt_arguments("transfer", {"from_account": "ACC-1001", "to_account": "ACC-1003",
                                                   "amount": 5.0}, asks)
    assert args["to_account"] == "ACC-1002" and args["from_account"] == "ACC-1001"
    assert "ACC-1003" in asks.wrong


@pytest.mark.parametrize("text", ["Transfer $1,000 to ACC-1002.", "Move 1000 dollars into ACC-1002.",
                                  "The amount is 1000.00; destination ACC-1002."])
def test_values_written_differently_mean_the_same(text):
    args = bank_edits.adopt_arguments("transfer", {"from_account": "ACC-1001", "to_account": "ACC-1003",
                                                   "amount": 5.0}, bank(text, "transfer"))
    assert args == {"from_account": "ACC-1001", "to_account": "ACC-1002", "amount": 1000.0}


def test_narrative_about_the_recorded_run_asks_for_nothing():
    asks = bank("In the recorded run, the call left out the check number and used ACC-1003.", "deposit_check")
    assert not asks.omit and not asks.values and not asks.free and not asks.call and not asks.forbid


def test_a_handover_names_the_agent_and_a_negated_one_does_not():
    assert bank("This is AccountAgent's job: hand it over to AccountAgent.").handover == "AccountAgent"
    assert bank("Do not hand this to AccountAgent.").handover is None
    assert house("Let the Courier take this one.").handover == "Courier"


@pytest.mark.parametrize("text", ["Please keep your answers short and friendly.", "Be careful.",
                                  "Thanks, this is going well.", "Remember the customer prefers email."])
def test_an_irrelevant_edit_reads_as_nothing(text):
    assert bank(text, "transfer").empty() and house(text, "refund").empty()


def test_a_pointer_decides_the_slot_only_for_the_argument_it_points_at():
    wrong_slot = Need("wrong_argument", "transfer", "to_account", r"ACC-\d+")
    assert wrong_slot.met_by(bank("Take the destination account from your instruction.", "transfer"))
    assert not wrong_slot.met_by(bank("Call transfer again.", "transfer"))
    missing = Need("missing_argument", "deposit_check", "check_number", r"CHK-\d+")
    assert missing.met_by(bank("Don't forget the check number.", "deposit_check"))
    assert not missing.met_by(bank("Call deposit_check without the check number.", "deposit_check"))


def test_the_warehouse_reads_its_own_values_and_actions():
    asks = house("Reserve it for ord_7f3a2, not ord_1b2c3, and book it express.", "reserve")
    assert asks.asks_for("reserve") and asks.values.get("service") == "express"
    assert warehouse_edits.adopt_arguments("book_pickup", {"order_ref": "ord_1b2c3", "service": "standard"},
                                           asks) == {"order_ref": "ord_7f3a2", "service": "express"}
    assert "refund" in house("The refund was already paid out; just say it is done.", "refund").forbid


def test_a_value_named_as_an_argument_goes_there_whatever_it_looks_like():
    asks = bank("Use ACC-1099 as the customer's name.", "lookup_customer")
    assert bank_edits.adopt_arguments("lookup_customer", {"name": "Erin Gray"}, asks) == {"name": "ACC-1099"}
    assert Need("missing_argument", "lookup_customer", "name").met_by(asks)  # decided: wrongly, and carried out
