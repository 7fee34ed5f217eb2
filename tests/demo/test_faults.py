"""Fault injection at known steps, ground truth, determinism and intervention following."""
from __future__ import annotations

import json

import openai
import pytest
from demo_sims import running_sim

from tracefix.demo.bank import evaluate, last_database, run_task
from tracefix.demo.faults import FaultConfig, FaultPlanError, load_plan, schedule
from tracefix.demo.policy import fault_free_steps
from tracefix.demo.scripted import KINDS
from tracefix.demo.tasks import TASKS


def _run(server, task_id: str) -> tuple[dict, dict, str]:
    """(output, reward, session id) of one run against `server`."""
    before = set(server.stats()["by_session"])
    output = run_task(task_id, base_url=server.base_url)
    (session,) = set(server.stats()["by_session"]) - before
    return output, evaluate(task_id, last_database(), output["final_answer"]), session


def _gt(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# (kind, task, step): the step is where the fault must land and be recorded.
KNOWN = [
    ("wrong_argument", "t02", 6),
    ("missing_argument", "t13", 3),
    ("skipped_action", "t04", 6),
    ("wrong_instruction", "t05", 5),
    ("vague_instruction", "t03", 5),
    ("misread_tool_result", "t01", 4),
    ("early_final_answer", "t21", 12),
]


def test_every_kind_is_covered():
    assert sorted(k for k, _, _ in KNOWN) == sorted(KINDS)


@pytest.mark.parametrize("kind, task_id, step", KNOWN)
def test_fault_at_known_step_fails_the_task_and_is_recorded_at_that_step(tmp_path, kind, task_id, step):
    gt = tmp_path / "gt.jsonl"
    plan = [{"task": task_id, "step": step, "kind": kind}]
    with running_sim(plan=plan, ground_truth=gt) as server:
        output, reward, session = _run(server, task_id)
        transcript = server.transcript(session)
    assert not reward["success"], output
    (label,) = _gt(gt)
    assert label["step"] == step and label["kind"] == kind and label["task"] == task_id
    assert label["session"] == session and label["replay"] is False
    assert label["agent"] == fault_free_steps(task_id)[step].agent
    # the recorded step is the one whose output deviates from the fault-free run
    with running_sim() as clean:
        _, _, clean_session = _run(clean, task_id)
        reference = clean.transcript(clean_session)
    assert [e["response"] for e in transcript[:step]] == [e["response"] for e in reference[:step]]
    assert transcript[step]["response"] != reference[step]["response"]


def test_errors_cascade_into_retries_replans_and_a_give_up_answer(tmp_path):
    with running_sim(plan=[{"task": "t13", "step": 3, "kind": "missing_argument"}]) as server:
        output, reward, _ = _run(server, "t13")
    assert output["replans"] == 2 and "could not complete" in output["final_answer"]
    assert output["llm_calls"] > len(fault_free_steps("t13"))


def test_silent_wrong_argument_corrupts_the_database_behind_a_confident_answer():
    with running_sim(plan=[{"task": "t02", "step": 6, "kind": "wrong_argument"}]) as server:
        output, reward, _ = _run(server, "t02")
    assert output["final_answer"].startswith("Moved $200.00")
    assert not reward["db_match"]


def test_fault_scheduled_on_an_ineligible_step_moves_to_the_next_eligible_one(tmp_path):
    gt = tmp_path / "gt.jsonl"
    with running_sim(plan=[{"task": "t02", "step": 0, "kind": "wrong_argument"}], ground_truth=gt) as server:
        _run(server, "t02")
    assert _gt(gt)[0]["step"] == 6  # step 0 is the Orchestrator's plan; 6 is the transfer call


def test_same_seed_same_transcript_and_ground_truth(tmp_path):
    runs = []
    for attempt in range(2):
        gt = tmp_path / f"gt{attempt}.jsonl"
        with running_sim(seed=11, rate=1.0, ground_truth=gt) as server:
            transcripts = []
            for task_id in ("t05", "t10", "t13"):
                _, _, session = _run(server, task_id)
                transcripts.append(server.transcript(session))
        labels = [{k: v for k, v in g.items() if k != "session"} for g in _gt(gt)]
        runs.append((transcripts, labels))
    assert runs[0] == runs[1]
    assert len(runs[0][1]) == 3


def test_fault_rate_placement_depends_on_the_seed():
    placements = {seed: [schedule(FaultConfig(seed=seed, rate=1.0), t) for t in ("t05", "t10", "t13", "t21")]
                  for seed in (1, 2)}
    assert placements[1] != placements[2]
    assert all(f is not None for f in placements[1])
    none = [schedule(FaultConfig(seed=3, rate=0.0), t) for t in ("t05", "t10")]
    assert none == [None, None]


def test_fault_kinds_restrict_what_the_rate_picks():
    picked = {schedule(FaultConfig(seed=s, rate=1.0, kinds=("vague_instruction",)), "t07").kind for s in range(6)}
    assert picked == {"vague_instruction"}


def test_bad_fault_plans_are_rejected_clearly(tmp_path):
    with pytest.raises(FaultPlanError, match="unknown kind"):
        load_plan([{"task": "t01", "step": 1, "kind": "gremlins"}])
    with pytest.raises(FaultPlanError, match="unknown task"):
        load_plan([{"task": "t99", "step": 1, "kind": "wrong_argument"}])
    bad = tmp_path / "plan.json"
    bad.write_text("{nope")
    with pytest.raises(FaultPlanError, match="cannot read"):
        load_plan(bad)


# --- intervention following: replay-like requests at the fault step ------------------------

def _messages_at(task_id: str, step: int) -> list[dict]:
    with running_sim() as clean:
        _, _, session = _run(clean, task_id)
        return clean.transcript(session)[step]["messages"]


def _ask(server, task_id: str, step: int, messages: list[dict], session: str) -> dict:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, default_headers={
        "X-Demo-Task": task_id, "X-Demo-Step": str(step), "X-Demo-Session": session, "X-Demo-Replay": "1"})
    from tracefix.demo.team import tools_for
    agent = fault_free_steps(task_id)[step].agent
    r = client.chat.completions.create(model="bank-agent", messages=messages, tools=tools_for(agent))
    return r.choices[0].message.model_dump()


MISSING = [{"task": "t13", "step": 3, "kind": "missing_argument"}]  # get_accounts loses customer_id
WRONG = [{"task": "t02", "step": 6, "kind": "wrong_argument"}]  # transfer to another account than ACC-1002


def _edited(task_id: str, step: int, edit: str) -> list[dict]:
    return _messages_at(task_id, step) + [{"role": "user", "content": edit}]


def _args(reply: dict) -> dict:
    return json.loads(reply["tool_calls"][0]["function"]["arguments"])


@pytest.mark.parametrize("follow_prob, edit, fault_expected", [
    # names the dropped argument (its value is in the context), no tool name, no prefix
    (1.0, "You need to pass the customer id that the lookup returned.", False),
    (1.0, "Please keep your answers short and polite.", True),  # irrelevant
    (1.0, "correction: double-check the transfer amount before calling transfer.", True),  # about another action
    (0.0, "You need to pass the customer id that the lookup returned.", True),  # not read
])
def test_an_edit_prevents_a_fault_only_when_read_and_carrying_what_the_slip_needs(
        tmp_path, follow_prob, edit, fault_expected):
    gt = tmp_path / "gt.jsonl"
    with running_sim(plan=MISSING, follow_prob=follow_prob, ground_truth=gt) as server:
        reply = _ask(server, "t13", 3, _edited("t13", 3, edit), session="replay-1")
    assert ("customer_id" not in _args(reply)) is fault_expected
    labels = _gt(gt)
    assert len(labels) == int(fault_expected)
    if labels:
        assert labels[0]["replay"] is True and labels[0]["step"] == 3


def test_a_wrong_value_in_an_edit_is_adopted_and_replaces_the_slip(tmp_path):
    gt = tmp_path / "gt.jsonl"
    with running_sim(plan=MISSING, follow_prob=1.0, ground_truth=gt) as server:
        reply = _ask(server, "t13", 3, _edited("t13", 3, "The customer id is CUST-009."), session="misled")
    assert _args(reply) == {"customer_id": "CUST-009"}  # the edit's mistake, not the right CUST-005
    assert _gt(gt) == []


@pytest.mark.parametrize("edit, expected", [
    ("The money must go into ACC-1002.", "ACC-1002"),  # the right value, no tool named
    ("The destination account is the one in the instruction you were given.", "ACC-1002"),  # a pointer
    ("The transfer must go into ACC-1004.", "ACC-1004"),  # misleading: adopted
    ("Be careful with this one.", None),  # carries nothing: the fault happens
])
def test_a_silent_wrong_argument_follows_the_content_of_the_edit(tmp_path, edit, expected):
    gt = tmp_path / "gt.jsonl"
    with running_sim(plan=WRONG, follow_prob=1.0, ground_truth=gt) as server:
        reply = _ask(server, "t02", 6, _edited("t02", 6, edit), session="s")
    to_account = _args(reply)["to_account"]
    if expected is None:
        assert to_account != "ACC-1002" and len(_gt(gt)) == 1
    else:
        assert to_account == expected and _gt(gt) == []


def test_an_edit_stating_a_wrong_value_as_wrong_is_not_adopted(tmp_path):
    edit = "In the recorded run to_account was ACC-1003, which is wrong; your instruction names ACC-1002."
    with running_sim(plan=WRONG, follow_prob=1.0) as server:
        reply = _ask(server, "t02", 6, _edited("t02", 6, edit), session="s")
    assert _args(reply)["to_account"] == "ACC-1002"


def test_an_edit_reaches_a_later_step_only_through_what_the_agents_do_with_it(tmp_path):
    """At an earlier step of the same worker the edit is gone by the faulty step (it lived in
    one request); at the orchestrator's instruction it is relayed to the worker, who acts on it."""
    gt = tmp_path / "gt.jsonl"
    fix = "The customer id for get_accounts is the one lookup_customer returns; pass it."
    with running_sim(plan=MISSING, follow_prob=1.0, ground_truth=gt) as server:
        _ask(server, "t13", 2, _edited("t13", 2, fix), session="same-worker")
        reply = _ask(server, "t13", 3, _messages_at("t13", 3), session="same-worker")
        assert "customer_id" not in _args(reply)  # the fault happened anyway

        relayed = _ask(server, "t13", 1, _edited("t13", 1, fix), session="relayed")
        assert "customer id" in relayed["content"].split("Note:", 1)[1]
        messages = _messages_at("t13", 3)
        (i,) = [k for k, m in enumerate(messages) if m["role"] == "user"]
        messages[i] = {"role": "user", "content": relayed["content"]}
        reply = _ask(server, "t13", 3, messages, session="relayed")
    assert "customer_id" in _args(reply)
    assert [g["session"] for g in _gt(gt)] == ["same-worker"]


def test_the_orchestrator_repairs_a_wrong_instruction_from_a_value_or_a_pointer(tmp_path):
    plan = [{"task": "t05", "step": 5, "kind": "wrong_instruction"}]
    messages = _messages_at("t05", 5)
    asks = {"value": "Erin's checking account is ACC-1009.",
            "pointer": "Use the account ids that AccountAgent reported for the transfer.",
            "misleading": "Erin's checking account is ACC-1013.",
            "irrelevant": "Be polite to AccountAgent."}
    with running_sim(plan=plan, follow_prob=1.0) as server:
        said = {k: _ask(server, "t05", 5, messages + [{"role": "user", "content": v}], k)["content"].split("Note:")[0]
                for k, v in asks.items()}
    assert "to account ACC-1009" in said["value"] and "to account ACC-1009" in said["pointer"]
    assert "to account ACC-1013" in said["misleading"]
    assert "to account ACC-1009" not in said["irrelevant"]


def test_an_early_answer_is_prevented_by_saying_the_work_is_not_done(tmp_path):
    plan = [{"task": "t21", "step": 12, "kind": "early_final_answer"}]
    messages = _messages_at("t21", 12)
    with running_sim(plan=plan, follow_prob=1.0) as server:
        pending = _ask(server, "t21", 12, messages + [
            {"role": "user", "content": "Alice still has to pay Bob: that has not been done yet."}], "a")
        polite = _ask(server, "t21", 12, messages + [{"role": "user", "content": "Thank the customer."}], "b")
    assert not pending["content"].startswith("FINAL ANSWER") and polite["content"].startswith("FINAL ANSWER")


def test_the_follow_probability_is_drawn_per_request_and_seeded():
    from tracefix.demo.faults import FaultConfig, FaultInjector

    draws = [[FaultInjector(FaultConfig(seed=seed, follow_prob=0.7)).follow_draw(f"s{i}", 6) for i in range(200)]
             for seed in (1, 1, 2)]
    assert draws[0] == draws[1] and draws[0] != draws[2]
    assert 0.6 < sum(draws[0]) / 200 < 0.8


def test_a_replay_starting_after_the_fault_step_gets_no_second_fault(tmp_path):
    gt = tmp_path / "gt.jsonl"
    with running_sim(plan=MISSING, ground_truth=gt) as server:
        _ask(server, "t13", 6, _messages_at("t13", 6), session="late-start")
    assert _gt(gt) == []


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_fails_every_task_that_can_host_it(tmp_path, kind):
    """The first step of each task that can host `kind` gets it, and the task fails (eight
    tasks spread over the list per kind, to keep the suite fast)."""
    hosting = [t for t in TASKS if any(kind in i.hosts for i in fault_free_steps(t))]
    assert len(hosting) >= 10
    hosting = hosting[::-(-len(hosting) // 8)]
    gt = tmp_path / "gt.jsonl"
    with running_sim(plan=[{"task": t, "step": 0, "kind": kind} for t in hosting], ground_truth=gt) as server:
        results = {t: _run(server, t)[1]["success"] for t in hosting}
    assert not any(results.values()), [t for t, ok in results.items() if ok]
    labels = {g["task"]: g["step"] for g in _gt(gt)}
    assert labels == {t: next(i.step for i in fault_free_steps(t) if kind in i.hosts) for t in hosting}
