"""`tracefix demo-run` and `tracefix sim` as a user runs them (real subprocesses)."""
from __future__ import annotations

import json
import re
import os
import subprocess
import urllib.request

import procs


def _tracefix(*args: str, timeout: float = 120, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([*procs.TRACEFIX, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": ""})


def test_demo_run_all_tasks_without_faults_all_succeed():
    r = _tracefix("demo-run", "--tasks", "all", "--faults", "none")
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    n = int(re.fullmatch(r"succeeded: (\d+)/(\d+)", last).group(2))
    assert n >= 20 and last == f"succeeded: {n}/{n}"


def test_demo_run_with_fault_rate_lists_failures_with_their_ground_truth(tmp_path):
    r = _tracefix("demo-run", "--tasks", "all", "--fault-rate", "0.3", "--seed", "7", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    gt = tmp_path / "demo-ground-truth.jsonl"  # written by default when faults are on
    assert "ground truth written to demo-ground-truth.jsonl" in r.stdout
    ok, total = map(int, re.search(r"succeeded: (\d+)/(\d+)", r.stdout).groups())
    failed = re.findall(r"^(t\d+) FAILED", r.stdout, re.M)
    assert 0 < len(failed) == total - ok
    labels = [json.loads(line) for line in gt.read_text().splitlines()]
    assert sorted({g["task"] for g in labels}) == sorted(failed)
    for g in labels:
        assert f"  {g['task']}: step {g['step']} {g['agent']} {g['kind']}" in r.stdout


def test_demo_run_rejects_a_bad_fault_plan(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"task": "t01", "step": 2, "kind": "gremlins"}]))
    r = _tracefix("demo-run", "--tasks", "t01", "--faults", str(plan))
    assert r.returncode == 2 and "unknown kind 'gremlins'" in r.stderr


def test_sim_with_a_fault_plan_serves_faults_to_demo_run_over_http(tmp_path):
    plan, gt = tmp_path / "plan.json", tmp_path / "gt.jsonl"
    plan.write_text(json.dumps([{"task": "*", "step": 6, "kind": "wrong_argument"}]))
    sim = procs.start_sim("--faults", str(plan), "--ground-truth", str(gt), "--transcripts")
    try:
        r = _tracefix("demo-run", "--base-url", sim.match["base_url"], "--tasks", "t02,t01",
                      "--ground-truth", str(gt))
        (label,) = [json.loads(line) for line in gt.read_text().splitlines()]
        root = sim.match["base_url"].rsplit("/v1", 1)[0]
        with urllib.request.urlopen(f"{root}/_sim/sessions/{label['session']}", timeout=5) as resp:
            seen = json.load(resp)
    finally:
        sim.stop()
    assert "t02 FAILED" in r.stdout and "t01 success" in r.stdout  # t01 moves no money: no host step
    assert "t02: step 6 PaymentsAgent wrong_argument" in r.stdout
    assert r.stdout.strip().endswith("succeeded: 1/2")
    assert seen["faults"] == [label] and len(seen["exchanges"]) > 6
    faulty = json.loads(seen["exchanges"][6]["response"]["tool_calls"][0]["function"]["arguments"])
    assert faulty["to_account"] != "ACC-1002"  # the transfer went elsewhere


def test_sim_help_lists_its_options():
    r = _tracefix("sim", "--help")
    assert r.returncode == 0
    for option in ("--port", "--seed", "--faults", "--fault-rate", "--fault-kinds", "--follow-prob",
                   "--ground-truth", "--latency-ms"):
        assert option in r.stdout


def test_demo_run_against_an_unreachable_endpoint_reports_errors_and_exits_nonzero():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = _tracefix("demo-run", "--base-url", f"http://127.0.0.1:{port}/v1", "--tasks", "t01")
    assert r.returncode == 1
    assert "t01 ERROR   APIConnectionError" in r.stdout and "could not run" in r.stderr
