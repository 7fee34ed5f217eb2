"""Real processes for the replay tests: a collector, two scripted LLM servers sharing one
fault plan (one follows corrections, one never does), and a failed demo session recorded
through the instrumented banking app."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import procs
import pytest
from replay_lab import Lab

# One injected fault, after two successful tool calls: the PaymentsAgent's deposit_check
# (step 6 of task t04) loses its `check_number` argument.
# Task t01 gets an early final answer (used by the thumbs-down test, recorded there); task
# t02 a silent wrong account in its transfer (step 6; test_causal_chain.py records it).
FAULT_PLAN = [{"task": "t04", "step": 6, "kind": "missing_argument"},
              {"task": "t01", "step": 1, "kind": "early_final_answer"},
              {"task": "t02", "step": 6, "kind": "wrong_argument"}]


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    d = tmp_path_factory.mktemp("replay")
    plan, truth = d / "plan.json", d / "truth.jsonl"
    plan.write_text(json.dumps(FAULT_PLAN))
    replay_key = secrets.token_hex(32)  # the app signs what it records; replays hold the same key
    started = []
    try:
        follow = procs.start_sim("--seed", "1", "--faults", str(plan), "--follow-prob", "1.0",
                                 "--ground-truth", str(truth))
        started.append(follow)
        ignore = procs.start_sim("--seed", "1", "--faults", str(plan), "--follow-prob", "0.0")
        started.append(ignore)
        serve = procs.start_serve(d / "store.duckdb", "--diagnose", "off")
        started.append(serve)
        follow_url, serve_url = follow.match["base_url"], serve.match["http"]
        subprocess.run([sys.executable, "-m", "tracefix.cli", "demo-run", "--base-url", follow_url, "--tasks", "t04",
                        "--otlp-endpoint", serve_url], check=True, timeout=120, capture_output=True,
                       env={**os.environ, "TRACEFIX_REPLAY_KEY": replay_key})
        injected = [json.loads(line) for line in truth.read_text().splitlines() if '"t04"' in line]
        assert len(injected) == 1, injected
        yield Lab(serve_url, follow_url, ignore.match["base_url"], injected[0]["session"], injected[0]["step"],
                  truth, d, replay_key)
    finally:
        for p in reversed(started):
            p.stop()
