"""Regression benchmark: what `tracefix regress` costs per item, against the session it re-runs.
(Not `regress.py`: bench/ is on some tests' sys.path, where that name would shadow the
`regress` package check-jsonschema imports.)

    .venv/bin/python bench/regression.py [--items 20] [--runs 3] [--seed 1] [--version 2] [--tools live]

A scripted LLM server (subprocess) injects one fault per task (missing_argument on every
other task, the other kinds in turn on the rest) while the instrumented banking app records
`--items` tasks, signed, into a `tracefix serve` store; each becomes a dataset item. Then
`tracefix.replay.regress` runs every item `--runs` times on the app's `--version`, the LLM
live, with the runs forked from a zygote, 3 at a time (the CLI's defaults).

Prints per item: the original session's wall time, the median wall time of its runs (a
child's whole life: fork, tracefix.init, the agent, its export), their ratio, the LLM
requests the runs sent (the sim's own count per run session; the original's count beside
it) and the verdict; then the medians, the total requests and the whole regression's wall
time. The machine's load is printed too: the figures move with it.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import procs  # noqa: E402  (the test suite's process starters: ready line + health check)

from tracefix.demo.fault_plan import PLAN_KINDS  # noqa: E402
from tracefix.demo.tasks import TASKS  # noqa: E402


def sim_counts(base_url: str) -> dict[str, int]:
    with urllib.request.urlopen(base_url.rsplit("/v1", 1)[0] + "/_sim/stats", timeout=10) as r:
        return json.load(r)["by_session"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--version", type=int, default=2, choices=(1, 2))
    parser.add_argument("--tools", default="live", choices=("recorded", "live"))
    args = parser.parse_args()

    tasks = sorted(TASKS)[:args.items]
    others = [k for k in PLAN_KINDS if k != "missing_argument"]
    plan = [{"task": t, "step": 2, "kind": "missing_argument" if i % 2 == 0 else others[(i // 2) % len(others)]}
            for i, t in enumerate(tasks)]
    key = secrets.token_hex(32)
    work = Path(tempfile.mkdtemp(prefix="tracefix-bench-regress-"))
    (work / "plan.json").write_text(json.dumps(plan))
    started = []
    try:
        sim = procs.start_sim("--seed", str(args.seed), "--faults", str(work / "plan.json"))
        started.append(sim)
        serve = procs.start_serve(work / "store.duckdb", "--diagnose", "off")
        started.append(serve)
        sim_url, serve_url = sim.match["base_url"], serve.match["http"]
        subprocess.run([sys.executable, "-m", "tracefix.cli", "demo-run", "--base-url", sim_url, "--tasks",
                        ",".join(tasks), "--seed", str(args.seed), "--otlp-endpoint", serve_url],
                       env={**os.environ, "TRACEFIX_REPLAY_KEY": key}, check=True, capture_output=True, timeout=600)
        from tracefix.collector.access import connect
        from tracefix.replay.regress import RegressOptions, regress

        access = connect(server=serve_url)

        def recorded():
            docs = [access.get_session(s["session_id"]) for s in access.list_sessions(limit=len(tasks) + 5)]
            done = [d for d in docs if d and d.get("ended_at") and d.get("outcome")]
            return done if len(done) == len(tasks) else None

        docs = procs.wait_for(recorded, f"{len(tasks)} recorded sessions")
        access.add_to_dataset("bench", [d["session_id"] for d in docs])
        items = access.dataset_items("bench", full=True)
        originals = sim_counts(sim_url)
        os.environ["TRACEFIX_DEMO_AGENT_VERSION"] = str(args.version)  # the runs' children inherit it
        options = RegressOptions(allowed_modules=["tracefix.demo"], runs=args.runs, tools=args.tools, replay_key=key.encode(),
                                 otlp_endpoint=serve_url)
        load = os.getloadavg()[0]
        began = time.monotonic()
        results = regress(items, options)
        total_s = time.monotonic() - began
        counts = sim_counts(sim_url)
    finally:
        for p in reversed(started):
            p.stop()

    print(f"{len(items)} items x {args.runs} runs, version {args.version}, tools {args.tools}; "
          f"load average at the start {load:.1f} on {os.cpu_count()} cores")
    print(f"{'TASK':<6} {'ORIGINAL s':>10} {'RUN s (median)':>15} {'RATIO':>6} {'LLM REQ (runs)':>15} "
          f"{'ORIGINAL REQ':>12}  VERDICT")
    ratios, walls, sent = [], [], 0
    for item, result in zip(items, results):
        run_walls = [r["wall_s"] for r in result["runs"] if r["wall_s"] is not None]
        requests = sum(counts.get(r["child_session_id"], 0) for r in result["runs"])
        sent += requests
        wall = statistics.median(run_walls) if run_walls else float("nan")
        original = item.get("wall_s") or float("nan")
        ratio = wall / original if original else float("nan")
        ratios.append(ratio)
        walls.append(wall)
        print(f"{item['inputs']['task_id']:<6} {original:>10.2f} {wall:>15.2f} {ratio:>6.1f} {requests:>15} "
              f"{originals.get(item['session_id'], 0):>12}  {result['verdict']}")
    print(f"median run {statistics.median(walls):.2f} s, {statistics.median(ratios):.1f}x the original; "
          f"{sent} LLM requests sent in all ({sent / max(1, len(items) * args.runs):.1f} a run); "
          f"the whole regression {total_s:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
