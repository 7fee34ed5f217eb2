"""The banking app against the scripted model: every task succeeds without faults, and the
reward really checks the database and the answer."""
from __future__ import annotations

import json

import pytest

from tracefix.demo.bank import evaluate, gold_db, last_database, run_task
from tracefix.demo.db import BankDB, InsufficientFunds, MissingArgument, NonZeroBalance, UnknownAccount
from tracefix.demo.policy import fault_free_steps
from tracefix.demo.tasks import TASKS
from tracefix.demo.tools import BankTools


def test_there_are_at_least_twenty_tasks_with_gold_and_outputs():
    assert len(TASKS) >= 20
    assert all(t.required_outputs for t in TASKS.values())
    assert sum(1 for t in TASKS.values() if t.gold_actions) >= 12


@pytest.mark.parametrize("task_id", list(TASKS))
def test_every_task_succeeds_without_faults(clean_sim, task_id):
    output = run_task(task_id, base_url=clean_sim.base_url, seed=0)
    json.dumps(output)  # the entrypoint's output is JSON, as tracefix records it
    result = evaluate(task_id, last_database(), output["final_answer"])
    assert result["success"], (output, result)
    assert result["score"] == 1.0 and all(m["achieved"] for m in result["milestones"])
    assert 8 <= output["llm_calls"] <= 30
    assert output["llm_calls"] == len(fault_free_steps(task_id))  # the model's own picture of the run


def test_reward_fails_when_the_gold_actions_did_not_happen():
    result = evaluate("t02", BankDB(), "Moved $200.00 from ACC-1001 to ACC-1002; checking now holds $1050.00.")
    assert not result["success"] and not result["db_match"]
    assert result["milestones"][0] == {"name": "transfer ACC-1001->ACC-1002 200.00", "achieved": False}


def test_reward_fails_when_the_answer_misses_a_required_output():
    result = evaluate("t02", gold_db("t02"), "Done.")
    assert result["db_match"] and not result["success"]
    assert "1050.00" in result["missing_outputs"]


def test_reward_accepts_a_state_dict_as_well_as_the_database():
    db = gold_db("t05")
    answer = "Moved the balance to ACC-1009 and closed ACC-1010: it is now closed."
    assert evaluate("t05", db.snapshot(), answer)["success"]


def test_snapshot_and_restore_are_deep_copies_with_a_stable_hash():
    db = BankDB()
    before, digest = db.snapshot(), db.hash()
    BankTools(db).transfer(from_account="ACC-1001", to_account="ACC-1002", amount=10)
    assert db.hash() != digest
    assert before["accounts"]["ACC-1001"]["balance_cents"] == 125000  # the snapshot did not move
    db.restore(before)
    before["accounts"]["ACC-1001"]["balance_cents"] = 0  # nor does the restored bank alias it
    assert db.hash() == digest == BankDB().hash()


@pytest.mark.parametrize("call, error, text", [
    (lambda t: t.transfer(from_account="ACC-1001", to_account="ACC-1002"), MissingArgument, "'amount'"),
    (lambda t: t.transfer(from_account="ACC-1010", to_account="ACC-1009", amount=5000), InsufficientFunds,
     "cannot send 5000.00"),
    (lambda t: t.get_balance(account_id="ACC-9999"), UnknownAccount, "ACC-9999"),
    (lambda t: t.close_account(account_id="ACC-1001"), NonZeroBalance, "still holds 1250.00"),
])
def test_tools_raise_clear_errors_and_change_nothing(call, error, text):
    db = BankDB()
    with pytest.raises(error, match=text):
        call(BankTools(db))
    assert db.hash() == BankDB().hash()
