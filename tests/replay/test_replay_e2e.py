"""DoVer replays of a recorded failed demo session, end to end over real processes:
`tracefix serve`, two scripted LLM servers (one follows corrections, one never does), the
instrumented banking app recorded once, and replay children exporting to the collector."""
from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
from replay_lab import sim_requests

from tracefix.analysis.llm import ProductLLM
from tracefix.replay.admission import ReplayError, check_replayable
from tracefix.replay.pipeline import diagnose


def run_diagnose(lab, tmp_path, **kw):
    with lab.access() as access:
        return diagnose(access, lab.session_id, allowed_modules=["tracefix.demo"], llm=kw.pop("llm", False),
                        otlp_endpoint=lab.serve_url, workdir=tmp_path, replay_key=lab.replay_key, **kw)


def child_doc(lab, run):
    with lab.access() as access:
        return access.get_session(run["child_session_id"])


def assert_prefix_from_cassette(lab, sim_url, run, t):
    """Steps before t: recorded responses and tool results, no request, no tool execution."""
    counts = run["counts"]
    assert run["divergence"] is None
    assert counts["llm_cassette"] == t
    assert counts["tool_cassette"] == 2  # lookup_customer and get_accounts before the fault
    assert sim_requests(sim_url, run["child_session_id"]) == counts["llm_live"] > 0
    doc = child_doc(lab, run)
    assert doc["parent_session_id"] == lab.session_id
    assert {s["replay_source"] for s in doc["steps"] if s["index"] < t} == {"cassette"}
    assert doc["steps"][t]["replay_source"] in ("intervention", "live")


def test_concurrent_replays_validate_a_correct_fix_and_stay_inconclusive_when_ignored(lab, tmp_path):
    """Two diagnoses of the same session at once (4 children alive): the follow-everything
    sim validates the correction, the follow-nothing sim leaves it unfulfilled."""
    t = lab.fault_step
    results = {}

    def go(name, **kw):
        results[name] = run_diagnose(lab, tmp_path / name, hypotheses=[{"step": t}], runs=3, concurrency=2, **kw)

    threads = [threading.Thread(target=go, args=("follow",)),
               threading.Thread(target=go, args=("ignore",), kwargs={"overrides": {"base_url": lab.ignore_url}})]
    for th in threads:
        th.start()
    for th in threads:
        th.join()

    followed = results["follow"]["hypotheses"][0]
    iv = followed["intervention"]
    assert iv["step"] == t and iv["kind"] == "add_message"
    # advice from the evidence: the dropped argument and the value the worker's instruction gives
    assert "CORRECTION" not in iv["text"]
    assert "deposit_check" in iv["text"] and "check_number = CHK-5001" in iv["text"]
    assert followed["verdict"] == "validated", followed["verdict_reason"]
    for run in followed["runs"]:
        assert run["success"] is True and run["fulfilled"] is True and run["error"] is None
        assert run["judged_by"] == {"success": "evaluator", "fulfilled": "heuristic", "progress": "milestones"}
        assert run["progress"] > 0
        assert_prefix_from_cassette(lab, lab.follow_url, run, t)

    ignored = results["ignore"]["hypotheses"][0]
    assert ignored["intervention"]["text"] == iv["text"]
    assert ignored["verdict"] == "inconclusive", ignored["verdict_reason"]
    for run in ignored["runs"]:
        assert run["success"] is False and run["fulfilled"] is False
        assert_prefix_from_cassette(lab, lab.ignore_url, run, t)

    children = [r["child_session_id"] for h in (followed, ignored) for r in h["runs"]]
    assert len(set(children)) == 6
    # each replay hit only the sim it was pointed at
    assert all(sim_requests(lab.ignore_url, c) == 0 for c in children[:3])
    assert all(sim_requests(lab.follow_url, c) == 0 for c in children[3:])
    assert results["follow"]["stages"]["segmentation"] == "fallback"


def test_followed_intervention_at_a_step_that_was_not_at_fault_is_refuted(lab, tmp_path):
    """Rewrite the orchestrator's (correct) instruction before the fault: the rewrite is
    carried out, the fault still happens, the run still fails -> refuted (DoVer 4.2)."""
    with lab.access() as access:
        parent = access.get_session(lab.session_id)
    t = lab.fault_step - 1
    assert parent["steps"][t]["agent"] == "Orchestrator"
    original = parent["steps"][t]["output_message"]["content"]
    rewrite = original + " Report back exactly what the tool returns."
    result = run_diagnose(lab, tmp_path, runs=3, concurrency=2, hypotheses=[{
        "step": t, "reason": "the instruction may have been unclear",
        "intervention": {"kind": "replace_output", "category": "orchestrator_instruction", "text": rewrite}}])
    h = result["hypotheses"][0]
    assert h["intervention"]["before"].startswith(original[:40])
    assert h["verdict"] == "refuted", h["verdict_reason"]
    for run in h["runs"]:
        assert run["success"] is False and run["fulfilled"] is True
        assert run["counts"]["llm_intervention"] == 1
        assert child_doc(lab, run)["steps"][t]["output_message"]["content"] == rewrite
    assert result["stages"]["attribution"] == "user" and result["stages"]["intervention"] == "user"


def test_divergence_is_reported_when_the_entrypoint_takes_another_path(lab, tmp_path):
    # Another task: the very first request no longer matches the recording.
    result = run_diagnose(lab, tmp_path, runs=1, hypotheses=[{"step": lab.fault_step}],
                          overrides={"task_id": "t01"})
    run = result["hypotheses"][0]["runs"][0]
    assert run["divergence"]["step"] == 0 and run["divergence"]["kind"] == "llm"
    assert run["counts"]["llm_cassette"] == 0
    assert sim_requests(lab.follow_url, run["child_session_id"]) == run["counts"]["llm_live"]


def test_guard_keeps_a_weak_correction_alive(lab, tmp_path):
    """An edit that carries nothing the slip needs is ignored at t; the guard's reminder, which
    names the expected argument, gets it done on the retry."""
    weak = {"kind": "add_message", "text": "Be more careful this time.",
            "expect": {"agent": "PaymentsAgent", "action": "call_tool", "tool": "deposit_check",
                       "argument": "check_number"}}
    hyp = [{"step": lab.fault_step, "intervention": weak}]
    plain = run_diagnose(lab, tmp_path / "plain", runs=1, hypotheses=hyp)["hypotheses"][0]
    guarded = run_diagnose(lab, tmp_path / "guarded", runs=1, hypotheses=hyp, guard=True)["hypotheses"][0]
    assert plain["runs"][0]["success"] is False
    assert guarded["runs"][0]["success"] is True, guarded["runs"][0]
    fired = guarded["runs"][0]["guard"]["fired"]
    assert 1 <= len(fired) <= 3 and fired[0]["signal"] == "expected_action_missing"
    assert "deposit_check" in fired[0]["text"]


def test_llm_path_through_the_scripted_analyst(lab, tmp_path):
    llm = ProductLLM(base_url=lab.follow_url, model="sim-analyst")
    result = run_diagnose(lab, tmp_path, llm=llm, runs=1, concurrency=2)
    assert result["stages"]["segmentation"] == "llm"
    assert result["stages"]["attribution"] == "llm"
    assert result["stages"]["intervention"] == "llm"
    assert result["stages"]["fulfilment"] == "llm"
    assert result["llm"]["requests"] >= 1 + 2 * len(result["hypotheses"])
    assert len(result["trials"]) >= 2
    first = result["hypotheses"][0]
    assert first["source"] == "llm" and first["step"] == lab.fault_step
    assert first["intervention"]["source"] == "llm" and "deposit_check" in first["intervention"]["text"]
    assert first["verdict"] == "validated"


def test_cli_prints_trials_hypotheses_runs_and_verdicts(lab):
    out = subprocess.run([sys.executable, "-m", "tracefix.cli", "replay", lab.session_id, "--server", lab.serve_url,
                          "--step", str(lab.fault_step), "--runs", "1", "--allow-module", "tracefix.demo"],
                         capture_output=True, text=True, timeout=180, env=_no_llm_env(lab))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "stages: segmentation=fallback" in text and "deterministic fallbacks" in text
    assert f"hypothesis (round 1, user): step {lab.fault_step} PaymentsAgent" in text
    assert "intervention (add_message/correction, template): Call `deposit_check` again with check_number = " in text
    assert "run 1: success, followed" in text and "verdict: VALIDATED" in text, text
    with lab.access() as access:  # stored and served by the collector
        stored = access.get_replay(lab.session_id)
    assert stored["hypotheses"][0]["step"] == lab.fault_step


def test_cli_json_and_clear_errors(lab):
    out = subprocess.run([sys.executable, "-m", "tracefix.cli", "replay", "no-such-session", "--server", lab.serve_url,
                          "--json"], capture_output=True, text=True, timeout=60, env=_no_llm_env(lab))
    assert out.returncode != 0 and "no session 'no-such-session'" in out.stderr


def test_the_cli_refuses_a_session_it_cannot_verify_and_says_how_to_allow_it(lab):
    """A person's `tracefix replay` with another key, or none: refused before anything runs,
    saying which; --allow-unsigned replays it anyway and the result says so."""
    replay = [sys.executable, "-m", "tracefix.cli", "replay", lab.session_id, "--server", lab.serve_url,
              "--step", str(lab.fault_step), "--runs", "1", "--allow-module", "tracefix.demo", "--json"]
    other = {**_no_llm_env(lab), "TRACEFIX_REPLAY_KEY": "another-key-" + "0" * 32}
    out = subprocess.run(replay, capture_output=True, text=True, timeout=60, env=other)
    assert out.returncode == 1 and "was signed with another replay key" in out.stderr, out.stderr
    assert "TRACEFIX_REPLAY_KEY" in out.stderr and "--allow-unsigned" in out.stderr
    no_key = {k: v for k, v in _no_llm_env(lab).items() if k != "TRACEFIX_REPLAY_KEY"}
    out = subprocess.run(replay, capture_output=True, text=True, timeout=60, env=no_key)
    assert out.returncode == 1 and "this process holds no replay key" in out.stderr, out.stderr
    out = subprocess.run([*replay, "--allow-unsigned"], capture_output=True, text=True, timeout=180, env=other)
    assert out.returncode == 0, out.stderr
    notes = json.loads(out.stdout)["notes"]
    assert any("--allow-unsigned" in note and "another replay key" in note for note in notes), notes


def test_sessions_without_entrypoint_are_refused():
    with pytest.raises(ReplayError, match="entrypoint and inputs"):
        check_replayable({"session_id": "s", "steps": [{}], "entrypoint": None, "inputs": None}, "s")
    with pytest.raises(ReplayError, match="truncated"):
        check_replayable({"session_id": "s", "steps": [{}], "entrypoint": "m:f", "inputs": {}, "replayable": False}, "s")


def _no_llm_env(lab):
    """The lab's environment (the app's replay key included) without a product LLM."""
    return {k: v for k, v in lab.env.items() if not k.startswith("TRACEFIX_LLM_")}


def test_a_crashing_replay_gives_an_error_verdict_that_shows_the_error(lab, tmp_path):
    result = run_diagnose(lab, tmp_path, runs=1, hypotheses=[{"step": lab.fault_step}],
                          overrides={"task_id": "no-such-task"})
    h = result["hypotheses"][0]
    run = h["runs"][0]
    assert run["error"] and "no-such-task" in run["error"]
    assert run["success"] is not True  # the evaluator may still score the crashed run as a failure
    assert h["verdict"] == "error" and "no-such-task" in h["verdict_reason"]
    assert "no-such-task" in run["log_tail"]  # the child's own output, kept although its folder is gone
    assert not tmp_path.exists()  # the private replay folder is removed when the replay ends


def test_the_cli_exits_non_zero_when_no_replay_ran_through(lab):
    out = subprocess.run([sys.executable, "-m", "tracefix.cli", "replay", lab.session_id, "--server", lab.serve_url,
                          "--step", str(lab.fault_step), "--runs", "2", "--allow-module", "tracefix.demo",
                          "--input", "task_id=no-such-task"],
                         capture_output=True, text=True, timeout=180, env=_no_llm_env(lab))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "verdict: ERROR (all 2 replay(s) failed to run" in out.stdout
    assert "no replay ran through" in out.stderr and "no-such-task" in out.stderr


def test_a_replay_that_hangs_is_killed_at_its_timeout(lab, tmp_path):
    import socket

    # An "LLM endpoint" that accepts connections and never answers.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        result = run_diagnose(lab, tmp_path, runs=1, timeout_s=6, hypotheses=[{"step": lab.fault_step}],
                              overrides={"base_url": url})
    finally:
        silent.close()
    run = result["hypotheses"][0]["runs"][0]
    assert "killed after its 6s timeout" in run["error"]
    assert 6 <= run["wall_s"] < 30
    assert result["hypotheses"][0]["verdict"] == "error"


def test_replays_that_crash_at_the_live_step_give_an_error_not_a_refutation(lab, tmp_path):
    """The LLM endpoint is gone when the replay goes live: the agent never acted on the edit,
    so the runs say nothing about the hypothesis, whatever the evaluator makes of the
    unfinished state: the verdict is an error that shows why."""
    result = run_diagnose(lab, tmp_path, runs=3, hypotheses=[{"step": lab.fault_step}],
                          overrides={"base_url": "http://127.0.0.1:9/v1"})  # nothing listens on port 9
    h = result["hypotheses"][0]
    assert all(run["error"] and "APIConnectionError" in run["error"] for run in h["runs"])
    assert all(run["fulfilled"] is None for run in h["runs"])
    assert h["verdict"] == "error" and "APIConnectionError" in h["verdict_reason"]


USER_EDIT = "Before you answer: the deposit needs the check number that the customer gave in the task."


def _input_texts(step: dict) -> str:
    return " ".join(str(m.get("content")) for m in step.get("input_messages") or [])


def test_a_person_tests_their_own_edit_from_the_cli(lab):
    out = subprocess.run([sys.executable, "-m", "tracefix.cli", "replay", lab.session_id, "--server", lab.serve_url,
                          "--step", str(lab.fault_step), "--edit", USER_EDIT, "--runs", "1",
                          "--allow-module", "tracefix.demo", "--json"],
                         capture_output=True, text=True, timeout=180, env=_no_llm_env(lab))
    assert out.returncode == 0, out.stderr

    h = json.loads(out.stdout)["hypotheses"][0]
    assert h["source"] == "user" and h["step"] == lab.fault_step
    assert h["intervention"]["text"] == USER_EDIT and h["intervention"]["source"] == "user"
    run = h["runs"][0]
    assert run["error"] is None
    t_step = next(s for s in child_doc(lab, run)["steps"] if s["index"] == lab.fault_step)
    assert USER_EDIT in _input_texts(t_step)  # the agent saw the person's words at step t


def test_an_edit_needs_exactly_one_step(lab):
    out = subprocess.run([sys.executable, "-m", "tracefix.cli", "replay", lab.session_id, "--server", lab.serve_url,
                          "--step", "1", "--step", "2", "--edit", USER_EDIT, "--allow-module", "tracefix.demo"],
                         capture_output=True, text=True, timeout=60, env=_no_llm_env(lab))
    assert out.returncode == 2 and "exactly one step" in out.stderr


def test_an_edit_queued_on_the_api_is_replayed_by_a_worker(lab):
    import procs

    from tracefix.collector.access import AccessError, HttpAccess

    access = HttpAccess(lab.serve_url)
    for bad in ({"steps": [1, 2], "edit": USER_EDIT}, {"steps": ["1"]}, {"steps": [1], "edit": ""},
                {"edit": USER_EDIT}):
        with pytest.raises(AccessError, match="HTTP 400"):
            access.enqueue_job(lab.session_id, kind="replay", options=bad)
    job = access.enqueue_job(lab.session_id, reason="my fix", kind="replay",
                             options={"steps": [lab.fault_step], "edit": USER_EDIT})
    assert job["options"] == {"steps": [lab.fault_step], "edit": USER_EDIT}
    # its zygote imports the demo's app before it forks, as the demo's own worker does
    worker = procs.start_worker(lab.serve_url, "--allow-module", "tracefix.demo", "--preload-module",
                                "tracefix.demo.bank", "--runs", "1", "--once", env=_no_llm_env(lab))
    try:
        assert worker.popen.wait(180) == 0, worker.output()
    finally:
        worker.stop()
    done = next(j for j in access.list_jobs(session_id=lab.session_id, kind="replay") if j["job_id"] == job["job_id"])
    assert done["state"] == "done", done
    h = access.get_replay(lab.session_id)["hypotheses"][0]
    assert h["step"] == lab.fault_step and h["intervention"]["text"] == USER_EDIT and h["source"] == "user"


# Edits a person might write at the true fault step (t04: the deposit loses its check number).
EDITS = {
    "right content, no tool named": "The check number is CHK-5001, as your instruction says.",
    "misleading": "The check number for this deposit is CHK-5004.",  # another customer's check
    "irrelevant": "Please keep your report short and friendly.",
}


@pytest.mark.parametrize("name", list(EDITS))
def test_a_verdict_follows_what_the_edit_says_not_how_it_is_addressed(lab, tmp_path, name):
    """Right content validates without naming the tool; a misleading edit is carried out and
    fails (never validated, with the reason); an irrelevant edit changes nothing the agent
    does at t, and what it asks is judged by its own reading (issue 36), not the template's:
    unknown without an LLM judge."""
    hyp = [{"step": lab.fault_step, "intervention": {"text": EDITS[name]}}]
    h = run_diagnose(lab, tmp_path, runs=3, concurrency=2, hypotheses=hyp)["hypotheses"][0]
    assert all(run["error"] is None for run in h["runs"]), h["runs"]
    if name == "right content, no tool named":
        assert h["verdict"] == "validated", h["verdict_reason"]
        return
    assert h["verdict"] in ("refuted", "inconclusive") and h["verdict_reason"]
    assert not any(run["success"] for run in h["runs"])
    with lab.access() as access:
        parent = access.get_session(lab.session_id)
    original = parent["steps"][lab.fault_step]["tool_calls"][0]["arguments"]
    for run in h["runs"]:
        at_t = child_doc(lab, run)["steps"][lab.fault_step]["tool_calls"][0]["arguments"]
        if name == "misleading":
            assert at_t["check_number"] == "CHK-5004" and run["fulfilled"] is True  # carried out, still failed
        else:
            # unchanged at t; what the edit asks cannot be read without an LLM judge, and the verdict says so
            assert at_t == original and run["fulfilled"] is None and run["judged_by"]["fulfilled"] == "unknown"
    assert h["verdict"] == ("refuted" if name == "misleading" else "inconclusive"), h["verdict_reason"]
    if name == "irrelevant":
        assert "unknown without an LLM judge" in h["verdict_reason"]
