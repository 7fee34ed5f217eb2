"""The warehouse demo (the second app domain) against the scripted model over HTTP: every
ticket succeeds without faults, an injected fault lands at the step its ground truth states
and makes the ticket fail, and the tools refuse in their three styles."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
from demo_sims import running_sim

import procs
from tracefix.demo.warehouse import evaluate, gold_world, last_database, run_task
from tracefix.demo.warehouse_model import fault_free_steps
from tracefix.demo.warehouse_tasks import TICKETS
from tracefix.demo.warehouse_world import WarehouseTools, WarehouseWorld


@pytest.mark.parametrize("ticket", list(TICKETS))
def test_every_ticket_succeeds_without_faults(clean_sim, ticket):
    output = run_task(ticket, base_url=clean_sim.base_url, seed=0)
    json.dumps(output)
    result = evaluate(ticket, last_database(), output["final_answer"])
    assert result["success"], (output, result)
    assert output["llm_calls"] == len(fault_free_steps(ticket)) >= 8


def test_a_fault_lands_at_the_step_its_ground_truth_names(tmp_path):
    gt = tmp_path / "gt.jsonl"
    # Step 4 is the Dispatcher's note; the first step from there that can host a wrong
    # argument is the Stocker's reserve call at step 5.
    with running_sim(plan=[{"task": "w01", "step": 4, "kind": "wrong_argument"}], ground_truth=gt) as sim:
        output = run_task("w01", base_url=sim.base_url, seed=0)
        (label,) = [json.loads(line) for line in gt.read_text().splitlines()]
        exchanges = sim.transcript(label["session"])
    assert {k: label[k] for k in ("task", "step", "agent", "kind", "target")} == {
        "task": "w01", "step": 5, "agent": "Stocker", "kind": "wrong_argument", "target": ["reserve"]}
    call = exchanges[5]["response"]["tool_calls"][0]["function"]
    assert exchanges[5]["step"] == 5 and call["name"] == "reserve"
    assert json.loads(call["arguments"])["sku"] != "sku:40-a"  # the fixture's line, not what was reserved
    # silent at the fault; the courier's tool raises later, and the ticket fails
    later = [m["content"] for e in exchanges[6:] for m in e["messages"] if m.get("role") == "tool"]
    assert any(c.startswith("ValueError: book_pickup") for c in later)
    assert not evaluate("w01", last_database(), output["final_answer"])["success"]


def test_tools_refuse_as_a_value_by_raising_and_in_plain_text():
    world = WarehouseWorld()
    tools = WarehouseTools(world)
    assert tools.reserve(sku="sku:12-k", qty=9, order_ref="ord_7f3a2") == {
        "ok": False, "reason": "only 3 of sku:12-k on the shelf, asked for 9"}
    with pytest.raises(ValueError, match="ord_1c9e0 is not packed"):
        tools.book_pickup(order_ref="ord_1c9e0", service="standard")
    with pytest.raises(LookupError, match="#9999"):
        tools.parcel_status(parcel="#9999")
    assert tools.refund(order_ref="ord_9a06f", amount=50).startswith("unable to refund 50.00 on ord_9a06f")
    assert world.hash() == WarehouseWorld().hash()  # a refusal changes nothing
    assert evaluate("w04", gold_world("w04"), "refunded 33.80, reference rf_31")["success"]


def test_demo_run_domain_warehouse_against_a_sim_process(tmp_path):
    plan, gt = tmp_path / "plan.json", tmp_path / "gt.jsonl"
    plan.write_text(json.dumps([{"task": "w04", "step": 0, "kind": "missing_argument"}]))
    sim = procs.start_sim("--faults", str(plan), "--ground-truth", str(gt))
    try:
        r = subprocess.run([*procs.TRACEFIX, "demo-run", "--domain", "warehouse", "--base-url",
                            sim.match["base_url"], "--tasks", "w04,w03", "--ground-truth", str(gt)],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": ""})
    finally:
        sim.stop()
    assert r.returncode == 0, r.stderr
    assert "w04 FAILED" in r.stdout and "w03 success" in r.stdout
    assert "w04: step 2 Cashier missing_argument: payment_info called without 'order_ref'" in r.stdout
    assert r.stdout.strip().endswith("succeeded: 1/2")


def test_an_edit_that_carries_what_the_slip_needs_prevents_it(tmp_path):
    """The recorded conversation of step 5 (the Stocker's reserve call), sent again with and
    without an edit pointing at the note: with it the call is right and no fault is recorded."""
    import openai

    with running_sim() as clean:
        run_task("w01", base_url=clean.base_url, seed=0)
        (session,) = clean.stats()["by_session"]
        messages = clean.transcript(session)[5]["messages"]
    plan = [{"task": "w01", "step": 5, "kind": "wrong_argument"}]
    edit = {"role": "user", "content": "Reserve exactly the item the Dispatcher's instruction names."}
    answers = {}
    for name, sent in (("plain", messages), ("edited", messages + [edit])):
        with running_sim(plan=plan, follow_prob=1.0) as sim:
            client = openai.OpenAI(base_url=sim.base_url, api_key="k", max_retries=0, default_headers={
                "X-Demo-Task": "w01", "X-Demo-Step": "5", "X-Demo-Session": f"edit-{name}"})
            reply = client.chat.completions.create(model="warehouse-crew", messages=sent)
            answers[name] = (json.loads(reply.choices[0].message.tool_calls[0].function.arguments)["sku"],
                             len(sim.injector.injected))
    assert answers == {"plain": ("sku:61-c", 1), "edited": ("sku:40-a", 0)}
