"""A verdict follows what an edit asks, not the words it uses: recorded failed sessions (real
scripted LLM server over HTTP, the instrumented apps, a real collector) are replayed through
the product's replay path with edits of five classes written by tests/demo/edit_templates.py
(which the model's reader never imports). Follow probability 1.0 and one run per edit, so
each verdict is deterministic: no misleading, irrelevant or wrong-step edit may validate,
and the paraphrased correct edits must validate at a rate of at least 0.8."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import procs
import pytest
from edit_templates import suite

# one fault per session: a silent wrong account (bank), a dropped argument (bank), an action
# said done without the call (warehouse)
FAULT_PLAN = [{"task": "t02", "step": 6, "kind": "wrong_argument"},
              {"task": "t04", "step": 6, "kind": "missing_argument"},
              {"task": "w04", "step": 0, "kind": "skipped_action"}]
SESSIONS = {"bank": "t02,t04", "warehouse": "w04"}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    d = tmp_path_factory.mktemp("edit-verdicts")
    plan, truth = d / "plan.json", d / "truth.jsonl"
    plan.write_text(json.dumps(FAULT_PLAN))
    key = secrets.token_hex(32)
    started = []
    try:
        sim = procs.start_sim("--seed", "1", "--faults", str(plan), "--follow-prob", "1.0", "--ground-truth", str(truth))
        started.append(sim)
        serve = procs.start_serve(d / "store.duckdb", "--diagnose", "off")
        started.append(serve)
        for domain, tasks in SESSIONS.items():
            subprocess.run([sys.executable, "-m", "tracefix.cli", "demo-run", "--base-url", sim.match["base_url"],
                            "--domain", domain, "--tasks", tasks, "--otlp-endpoint", serve.match["http"]],
                           check=True, timeout=120, capture_output=True, env={**os.environ, "TRACEFIX_REPLAY_KEY": key})
        faults = [json.loads(line) for line in truth.read_text().splitlines()]
        assert sorted(f["task"] for f in faults) == ["t02", "t04", "w04"], faults
        yield sim.match["base_url"], serve.match["http"], key, faults, d
    finally:
        for p in reversed(started):
            p.stop()


def test_misleading_edits_never_validate_and_paraphrased_fixes_do(recorded):
    from tracefix.collector.access import connect
    from tracefix.replay.pipeline import diagnose

    base_url, server, key, faults, workdir = recorded
    verdicts: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    jobs = []
    with connect(server=server) as access:
        for fault in faults:
            domain = "warehouse" if fault["task"].startswith("w") else "bank"
            jobs += [(fault, *edit) for edit in suite(fault, access.get_session(fault["session"]), domain)]

    def verdict_of(numbered) -> str:
        # one diagnosis per edit: hypotheses at one step are one hypothesis
        n, (fault, _, step, text) = numbered
        with connect(server=server) as access:
            result = diagnose(access, fault["session"], allowed_modules=["tracefix.demo"], llm=False, runs=1,
                              replay_key=key, otlp_endpoint=server, save=False,
                              hypotheses=[{"step": step, "intervention": {"text": text}}],
                              overrides={"base_url": base_url}, workdir=workdir / f"replay-{n}")
        (h,) = result["hypotheses"]
        return h["verdict"]

    with ThreadPoolExecutor(2) as pool:
        for (fault, cls, _, text), verdict in zip(jobs, pool.map(verdict_of, enumerate(jobs))):
            verdicts[cls].append((fault["kind"], text, verdict))
    validated = {cls: [v for v in rows if v[2] == "validated"] for cls, rows in verdicts.items()}
    for cls in ("misleading", "irrelevant", "wrong_step"):
        assert not validated[cls], f"{cls} edits validated: {validated[cls]}"
    assert len(validated["correct"]) == len(verdicts["correct"]), verdicts["correct"]
    rate = len(validated["paraphrased"]) / len(verdicts["paraphrased"])
    assert rate >= 0.8, [v for v in verdicts["paraphrased"] if v[2] != "validated"]
