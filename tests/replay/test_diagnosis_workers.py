"""Diagnosis jobs run by `tracefix worker --jobs diagnosis` processes, not by the collector.

`tracefix serve --diagnosis-workers 0 --diagnose full` runs no diagnosis itself: a
thumbs-down's job waits queued. A worker that claims it and dies (it never renews its
lease) gives it back when the lease runs out; then exactly one of two real workers runs
it over the API: the analysis is stored and the replay job queued for a replay worker."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import procs

from tracefix.collector.access import HttpAccess

# the banking task t01 ends with an early final answer: a failed, replayable session
FAULT_PLAN = [{"task": "t01", "step": 1, "kind": "early_final_answer"}]


def wait_for(what, predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


def test_diagnosis_jobs_are_claimed_by_exactly_one_of_two_workers(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(FAULT_PLAN))
    started = []
    try:
        sim = procs.start_sim("--seed", "1", "--faults", str(plan))
        started.append(sim)
        serve = procs.start_serve(tmp_path / "store.duckdb", "--diagnose", "full", "--diagnosis-workers", "0")
        started.append(serve)
        url = serve.match["http"]
        subprocess.run([sys.executable, "-m", "tracefix.cli", "demo-run", "--base-url", sim.match["base_url"],
                        "--tasks", "t01", "--otlp-endpoint", url], check=True, timeout=60, capture_output=True)
        access = HttpAccess(url)
        sid = wait_for("the failed session", lambda: access.list_sessions(outcome="failure"))[0]["session_id"]
        access.add_feedback(sid, -1.0, "it stopped before doing anything")

        (job,) = access.list_jobs(session_id=sid, kind="diagnosis")
        time.sleep(1.0)  # the collector would have claimed it by now if it ran diagnoses itself
        assert access.list_jobs(session_id=sid, kind="diagnosis")[0]["state"] == "queued"

        # a worker claims it and dies: it never renews, so the lease runs out and the job is queued again
        dead = access.claim_job("diagnosis", "dead-worker", 5)
        assert dead["job_id"] == job["job_id"] and dead["diagnose"] == "full"
        workers = [procs.start_worker(url, "--jobs", "diagnosis", "--name", name) for name in ("w1", "w2")]
        started += workers
        assert all(w.match["kinds"] == "diagnosis" for w in workers)

        finished = wait_for("the diagnosis", lambda: (j := access.list_jobs(session_id=sid, kind="diagnosis")[0])
                            ["state"] not in ("queued", "running") and j, timeout=60)
        assert finished["state"] == "done", finished
        assert finished["worker"] in ("w1", "w2") and finished["attempts"] == 2, finished
        assert not access.finish_job(job["job_id"], worker="dead-worker", state="done")  # no longer its job
        assert access.get_analysis(sid)["session_id"] == sid
        (replay,) = access.list_jobs(session_id=sid, kind="replay")  # queued by the worker, for a replay worker
        assert replay["state"] == "queued" and replay["reason"] == f"diagnosis {job['job_id']}"

        time.sleep(0.5)  # both workers have polled the queue again meanwhile
        ran = [line for w in workers for line in w.lines if f"diagnosis job {job['job_id']}" in line]
        assert len(ran) == 1 and ran[0].rstrip().endswith(": done"), ran
        assert len(access.list_jobs(kind="diagnosis")) == 1
    finally:
        for p in reversed(started):
            p.stop()


def test_the_worker_loads_the_analysis_only_when_a_diagnosis_runs():
    code = ("import sys, tracefix.replay.worker, tracefix.replay.cli; "
            "print(sorted({'duckdb', 'torch', 'sklearn', 'numpy'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_worker_keeps_trying_an_unreachable_collector_unless_told_to_take_what_is_queued_and_stop():
    """A collector that restarts comes back, so a standing worker waits for it; `--once` is a
    run that takes what is queued, and with nobody answering it says so and exits 1."""
    nobody = "http://127.0.0.1:9"  # the discard port: refused at once
    args = [sys.executable, "-m", "tracefix.cli", "worker", "--server", nobody, "--jobs", "diagnosis"]
    once = subprocess.run([*args, "--once"], capture_output=True, text=True, timeout=60)
    assert once.returncode == 1 and "cannot reach tracefix serve" in once.stderr, once.stderr
    assert "Traceback" not in once.stderr
    standing = subprocess.Popen([*args, "--poll", "0.2"], stderr=subprocess.PIPE, text=True)
    try:
        assert "trying again" in standing.stderr.readline()  # its first failed claim, then it waits
        assert standing.poll() is None
    finally:
        standing.terminate()
        standing.wait(30)
