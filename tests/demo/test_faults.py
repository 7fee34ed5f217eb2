"""Fault injection at known steps, ground truth, determinism and intervention following."""
from __future__ import annotations

import json

import openai
import pytest
from demo_sims import running_sim

from tracefix.demo.bank import evaluate, last_database, run_task
from tracefix.demo.faults import FaultConfig, FaultPlanError, fault_free_steps, load_plan, schedule
from tracefix.demo.policy import KINDS
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


MISSING = [{"task": "t13", "step": 3, "kind": "missing_argument"}]


@pytest.mark.parametrize("follow_prob, correction, fault_expected", [
    (1.0, "CORRECTION for AccountAgent: call get_accounts with the customer_id lookup_customer returned.", False),
    (1.0, "correction: double-check the transfer amount before calling transfer.", True),  # names another tool
    (0.0, "CORRECTION for AccountAgent: call get_accounts with the customer_id lookup_customer returned.", True),
])
def test_correction_suppresses_the_fault_only_when_followed_and_naming_its_target(
        tmp_path, follow_prob, correction, fault_expected):
    messages = _messages_at("t13", 3) + [{"role": "user", "content": correction}]
    gt = tmp_path / "gt.jsonl"
    with running_sim(plan=MISSING, follow_prob=follow_prob, ground_truth=gt) as server:
        reply = _ask(server, "t13", 3, messages, session="replay-1")
    args = json.loads(reply["tool_calls"][0]["function"]["arguments"])
    assert ("customer_id" not in args) is fault_expected
    labels = _gt(gt)
    assert len(labels) == int(fault_expected)
    if labels:
        assert labels[0]["replay"] is True and labels[0]["step"] == 3


def test_correction_before_the_fault_step_suppresses_later_faults_of_that_agent(tmp_path):
    gt = tmp_path / "gt.jsonl"
    with running_sim(plan=MISSING, follow_prob=1.0, ground_truth=gt) as server:
        fix = "CORRECTION for AccountAgent: pass customer_id to get_accounts."
        _ask(server, "t13", 2, _messages_at("t13", 2) + [{"role": "user", "content": fix}], session="early")
        reply = _ask(server, "t13", 3, _messages_at("t13", 3), session="early")
    assert "customer_id" in reply["tool_calls"][0]["function"]["arguments"]
    assert _gt(gt) == []


def test_orchestrator_correction_naming_the_worker_suppresses_a_wrong_instruction(tmp_path):
    plan = [{"task": "t05", "step": 5, "kind": "wrong_instruction"}]
    messages = _messages_at("t05", 5)
    with running_sim(plan=plan, follow_prob=1.0) as server:
        fixed = _ask(server, "t05", 5, messages + [
            {"role": "user", "content": "CORRECTION for Orchestrator: give PaymentsAgent the right accounts."}], "o1")
        broken = _ask(server, "t05", 5, messages + [
            {"role": "user", "content": "CORRECTION: be polite to AccountAgent."}], "o2")
    assert "to account ACC-1009" in fixed["content"]
    assert "to account ACC-1009" not in broken["content"]


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
