"""Fresh content per seed (demo/variants.py): task t03@5 is t03's template on seed 5's world.
The same seed gives the same content, another seed other customers, ids and amounts; a
variant's reward is derived from its fault-free run, and for the hand-written tasks that
derivation gives back exactly their hand-written gold actions and outputs; variants run and
score over HTTP, also against a `tracefix sim` in another process, and a fault still fails them."""
from __future__ import annotations

import json
import re

import pytest
from demo_sims import running_sim

from tracefix.demo import bank, warehouse
from tracefix.demo.bank_content import content as bank_content
from tracefix.demo.policy import fault_free_outcome
from tracefix.demo.tasks import TASKS, get_task
from tracefix.demo.warehouse_content import content as warehouse_content
from tracefix.demo.warehouse_model import fault_free_outcome as ticket_outcome
from tracefix.demo.warehouse_tasks import TICKETS, get_ticket


def _names(text: str) -> set[str]:
    return set(re.findall(r"[A-Z][a-z]+ [A-Z][a-z]+", text))


def test_the_same_seed_gives_the_same_content_and_another_seed_other_content():
    for draw in (bank_content, warehouse_content):
        assert json.dumps(draw(11).state, sort_keys=True) == json.dumps(draw(11).state, sort_keys=True)
        states = {json.dumps(draw(seed).state, sort_keys=True) for seed in range(12)}
        assert len(states) == 12  # every seed its own world, seed 0 the fixture
    same, other = get_task("t03@11"), get_task("t03@12")
    assert same.instruction == get_task("t03@11").instruction
    assert other.instruction != same.instruction != TASKS["t03"].instruction
    # other customers and amounts, not just another order of the same ones
    assert not _names(same.instruction) & _names(TASKS["t03"].instruction)
    assert re.findall(r"\$[\d.]+", same.instruction) != re.findall(r"\$[\d.]+", TASKS["t03"].instruction)
    assert get_ticket("w02@11").text != get_ticket("w02@12").text != TICKETS["w02"].text
    # ids are drawn too: no fixture account, order or parcel id is left in a drawn world
    assert not set(bank_content(11).state["accounts"]) & set(bank_content(0).state["accounts"])
    assert not set(warehouse_content(11).state["orders"]) & set(warehouse_content(0).state["orders"])


def test_the_derived_reward_of_a_fixture_task_is_its_hand_written_one():
    for task_id, task in TASKS.items():
        assert fault_free_outcome(task_id)[1] == task.gold_actions, task_id
    for ticket_id, ticket in TICKETS.items():
        assert ticket_outcome(ticket_id)[1] == ticket.gold_actions, ticket_id


def test_a_variants_reward_checks_its_own_ids_and_amounts():
    scored = bank.scored_task("t02@7")
    (name, args), = scored.gold_actions
    accounts = bank_content(7).state["accounts"]
    assert name == "transfer" and {args["from_account"], args["to_account"]} <= set(accounts)
    assert args["amount"] != 200.0  # the drawn amount, not the fixture's
    assert f"${args['amount']:.0f}" in get_task("t02@7").instruction
    assert all(o not in TASKS["t02"].required_outputs for o in scored.required_outputs)
    nothing_done = bank.evaluate("t02@7", bank.fresh_db("t02@7"), fault_free_outcome("t02@7")[0])
    assert not nothing_done["success"] and not nothing_done["db_match"]


@pytest.mark.parametrize("task_id", ["t05@3", "t21@8", "t07@13"])
def test_bank_variants_succeed_over_http(clean_sim, task_id):
    output = bank.run_task(task_id, base_url=clean_sim.base_url, seed=3)
    result = bank.evaluate(task_id, bank.last_database(), output["final_answer"])
    assert result["success"], (output, result)


@pytest.mark.parametrize("ticket_id", ["w02@3", "w12@8", "w10@13"])
def test_warehouse_variants_succeed_over_http(clean_sim, ticket_id):
    output = warehouse.run_task(ticket_id, base_url=clean_sim.base_url, seed=3)
    result = warehouse.evaluate(ticket_id, warehouse.last_database(), output["final_answer"])
    assert result["success"], (output, result)


def test_a_fault_still_fails_a_variant(tmp_path):
    gt = tmp_path / "gt.jsonl"
    with running_sim(plan=[{"task": "t02@9", "step": 0, "kind": "wrong_argument"}], ground_truth=gt) as sim:
        output = bank.run_task("t02@9", base_url=sim.base_url, seed=9)
    (label,) = [json.loads(line) for line in gt.read_text().splitlines()]
    assert label["task"] == "t02@9" and label["kind"] == "wrong_argument"
    assert not bank.evaluate("t02@9", bank.last_database(), output["final_answer"])["success"]


def test_a_sim_in_another_process_knows_a_variant_from_its_task_header(sim_url):
    # the `tracefix sim` subprocess never drew this seed: it learns the variant from X-Demo-Task
    output = bank.run_task("t03@21", base_url=sim_url, seed=21)
    assert bank.evaluate("t03@21", bank.last_database(), output["final_answer"])["success"], output
