"""Replay benchmark: DoVer do-then-verify on the banking demo corpus, with the fallback pipeline.

    .venv/bin/python bench/replay.py [--seeds 1,2,3] [--tasks all] [--fault-rate 0.5] [--runs 3] [--rounds 1,3]

Per seed: a scripted LLM server (subprocess) injects at most one fault per task (rate and
kinds from the seed, corrections followed with probability --follow-prob), the instrumented
banking app records every task into a `tracefix serve` store, and every failed session is
analyzed and then diagnosed by replay (no LLM: every stage uses its deterministic fallback).

Prints, over all seeds and per fault kind:
- flip rate: share of failed sessions with at least one validated intervention;
- the verdict distribution of the tested hypotheses;
- LLM requests saved by the prefix replay: requests a from-scratch re-run would send vs.
  those the replays sent (the sim's own count per replay session, checked against the
  replay reports);
- wall time of a replay vs. the original session: the replay child process end to end, and
  the replayed session alone (its duration as stored), as medians and ratios;
- with several --rounds values, each failed session is diagnosed once per value, side by
  side, so the flip rate with repair memory compares with the single DoVer round.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import procs  # noqa: E402  (the test suite's process starters: ready line + health check)

from tracefix.replay.verdicts import VERDICTS  # noqa: E402


def _ts(iso: str | None):
    import datetime as dt

    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() if iso else None


def work_ms(doc: dict | None) -> float | None:
    """First step start to session end: the agent's own work, without the set-up the
    entrypoint does before its first LLM call (imports, clients)."""
    if not doc or not doc.get("steps") or doc.get("duration_ms") is None:
        return None
    start, first = _ts(doc.get("started_at")), _ts(doc["steps"][0].get("started_at"))
    if start is None or first is None:
        return None
    return doc["duration_ms"] - (first - start) * 1000


def sim_stats(base_url: str) -> dict:
    with urllib.request.urlopen(base_url.rsplit("/v1", 1)[0] + "/_sim/stats", timeout=10) as r:
        return json.load(r)


def run_seed(seed: int, args, workdir: Path) -> list[dict]:
    """Record the corpus of one seed and diagnose its failed sessions; one row per session."""
    from tracefix.collector.access import connect

    truth = workdir / f"truth-{seed}.jsonl"
    sim = procs.start_sim("--seed", str(seed), "--fault-rate", str(args.fault_rate), "--follow-prob",
                          str(args.follow_prob), "--ground-truth", str(truth))
    serve = procs.start_serve(workdir / f"store-{seed}.duckdb", "--diagnose", "off")
    rows = []
    try:
        base_url, server = sim.match["base_url"], serve.match["http"]
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "tracefix.cli", "demo-run", "--base-url", base_url, "--tasks", args.tasks,
                        "--seed", str(seed), "--otlp-endpoint", server], check=True, capture_output=True, timeout=900)
        print(f"seed {seed}: corpus recorded in {time.perf_counter() - started:.1f}s", flush=True)
        faults = {}
        for line in truth.read_text().splitlines() if truth.exists() else []:
            record = json.loads(line)
            faults.setdefault(record["session"], record)  # the recording's fault (replays append theirs)
        access = connect(server=server)
        failed = [s["session_id"] for s in access.list_sessions(outcome="failure", limit=1000)]
        print(f"seed {seed}: {len(failed)} failed session(s), {len(faults)} with an injected fault", flush=True)
        for sid in failed:
            doc = access.get_session(sid)
            fault = faults.get(sid, {})
            for rounds in args.rounds:
                rows.append(diagnose_row(access, sid, doc, fault, rounds, args, server, base_url, workdir, seed))
        access.close()
    finally:
        serve.stop()
        sim.stop()
    return rows


def diagnose_row(access, sid: str, doc: dict, fault: dict, rounds: int, args, server: str, base_url: str,
                 workdir: Path, seed: int) -> dict:
    from tracefix.replay.pipeline import diagnose

    t0 = time.perf_counter()
    result = diagnose(access, sid, allowed_modules=["tracefix.demo"], llm=False, runs=args.runs, concurrency=args.concurrency, rounds=rounds,
                      otlp_endpoint=server, workdir=workdir / "replays" / f"{sid}-{rounds}")
    elapsed = time.perf_counter() - t0
    stats = sim_stats(base_url)["by_session"]
    runs = [r for h in result["hypotheses"] for r in h["runs"]]
    children = {r["child_session_id"]: access.get_session(r["child_session_id"]) for r in runs}
    row = {
        "seed": seed, "session": sid, "rounds": rounds, "kind": fault.get("kind", "unlabelled"),
        "fault_step": fault.get("step"), "steps": len(doc["steps"]), "duration_ms": doc.get("duration_ms"),
        "work_ms": work_ms(doc), "verdicts": [h["verdict"] for h in result["hypotheses"]],
        "hypothesis_steps": [h["step"] for h in result["hypotheses"]], "stages": result["stages"],
        "diagnose_s": elapsed,
        "runs": [{"wall_s": r["wall_s"], "counts": r["counts"], "divergence": r["divergence"],
                  "success": r["success"], "fulfilled": r["fulfilled"], "progress": r["progress"],
                  "sim_requests": stats.get(r["child_session_id"], 0),
                  "child_ms": (children.get(r["child_session_id"]) or {}).get("duration_ms"),
                  "child_work_ms": work_ms(children.get(r["child_session_id"])), "error": r["error"]}
                 for r in runs],
    }
    print(f"  {sid[:12]} {row['kind']:<20} fault@{fault.get('step')} rounds={rounds} hypotheses@"
          f"{row['hypothesis_steps']} -> {row['verdicts']} ({elapsed:.1f}s)", flush=True)
    return row


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def report(all_rows: list[dict]) -> None:
    for rounds in sorted({r["rounds"] for r in all_rows}):
        report_rounds([r for r in all_rows if r["rounds"] == rounds], rounds)
    if len({r["rounds"] for r in all_rows}) > 1:
        print("\n== flip rate by rounds (same sessions) ==")
        for rounds in sorted({r["rounds"] for r in all_rows}):
            rows = [r for r in all_rows if r["rounds"] == rounds]
            flipped = sum(1 for r in rows if "validated" in r["verdicts"])
            replays = sum(len(r["runs"]) for r in rows)
            print(f"rounds={rounds}: flip rate {flipped}/{len(rows)} = {flipped / len(rows):.2f}, {replays} replays")


def report_rounds(rows: list[dict], rounds: int) -> None:
    print(f"\n== replay benchmark, rounds={rounds} (fallback pipeline: no LLM) ==")
    stages = Counter((k, v) for r in rows for k, v in r["stages"].items())
    print("stages: " + ", ".join(f"{k}={v} x{n}" for (k, v), n in sorted(stages.items())))
    print("LLM used by any stage: " + ("yes" if any("llm" in v for (_, v) in stages) else "no"))

    by_kind = defaultdict(list)
    for r in rows:
        by_kind[r["kind"]].append(r)
    print(f"\n{'fault kind':<22}{'sessions':>9}{'flipped':>9}{'flip rate':>11}  " + "  ".join(f"{v[:11]:>11}" for v in VERDICTS))
    for kind, group in sorted(by_kind.items()) + [("ALL", rows)]:
        flipped = sum(1 for r in group if "validated" in r["verdicts"])
        verdicts = Counter(v for r in group for v in r["verdicts"])
        print(f"{kind:<22}{len(group):>9}{flipped:>9}{(flipped / len(group) if group else 0):>11.2f}  "
              + "  ".join(f"{verdicts.get(v, 0):>11}" for v in VERDICTS))
    total = Counter(v for r in rows for v in r["verdicts"])
    n = sum(total.values()) or 1
    print("verdict distribution: " + ", ".join(f"{v} {total.get(v, 0) / n:.0%}" for v in VERDICTS))

    runs = [run for r in rows for run in r["runs"] if not run["error"]]
    cassette = sum(run["counts"].get("llm_cassette", 0) for run in runs)
    live = sum(run["counts"].get("llm_live", 0) for run in runs)
    replaced = sum(run["counts"].get("llm_intervention", 0) for run in runs)
    sent = sum(run["sim_requests"] for run in runs)
    scratch = cassette + live + replaced  # a from-scratch re-run asks the LLM for every step
    print(f"\nLLM requests over {len(runs)} replays: from scratch {scratch}, sent {sent} "
          f"(reports say {live}), saved by the prefix replay {scratch - sent} = {(scratch - sent) / max(scratch, 1):.0%}; "
          f"ratio sent/from-scratch {sent / max(scratch, 1):.2f}")
    diverged = sum(1 for run in runs if run["divergence"])
    print(f"replays that diverged from their recording before t: {diverged}/{len(runs)}")

    original_ms = median([r["duration_ms"] for r in rows])
    child_wall_ms = median([run["wall_s"] * 1000 for run in runs])
    child_session_ms = median([run["child_ms"] for run in runs])
    print(f"wall time (medians): original session {original_ms:.0f} ms; replay child process {child_wall_ms:.0f} ms "
          f"(ratio {child_wall_ms / original_ms:.1f}x, mostly interpreter start and imports); "
          f"replayed session alone {child_session_ms:.0f} ms (ratio {child_session_ms / original_ms:.2f}x)")
    original_work, child_work = median([r["work_ms"] for r in rows]), median([run["child_work_ms"] for run in runs])
    print(f"agent work, first step to end (medians): original {original_work:.0f} ms, replay {child_work:.0f} ms "
          f"(ratio {child_work / original_work:.2f}x: the prefix comes from the cassette)")
    print(f"diagnosis per failed session (median): {median([r['diagnose_s'] for r in rows]):.1f} s")
    errors = [run["error"] for r in rows for run in r["runs"] if run["error"]]
    if errors:
        print(f"replays with errors: {len(errors)}; first: {errors[0]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--tasks", default="all", help="demo tasks to record (all | t01,t02,...)")
    parser.add_argument("--fault-rate", type=float, default=0.5)
    parser.add_argument("--follow-prob", type=float, default=0.8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--rounds", default="1", help="repair-memory rounds per session; a list (1,3) "
                        "diagnoses every session once per value, side by side")
    parser.add_argument("--json", dest="json_out", help="also write the per-session rows to this file")
    args = parser.parse_args()
    args.rounds = [int(r) for r in str(args.rounds).split(",") if r.strip()]
    os.environ.pop("TRACEFIX_LLM_BASE_URL", None)  # the figures are for the fallback pipeline
    rows = []
    with tempfile.TemporaryDirectory(prefix="tracefix-bench-replay-") as tmp:
        for seed in [int(s) for s in args.seeds.split(",") if s.strip()]:
            rows += run_seed(seed, args, Path(tmp))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=1, default=str))
    if not rows:
        print("no failed sessions: raise --fault-rate")
        return 1
    report(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
