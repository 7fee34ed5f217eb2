"""Replay benchmark: DoVer do-then-verify on the banking demo corpus, with the fallback pipeline.

    .venv/bin/python bench/replay.py [--seeds 1,2,3] [--tasks all] [--fault-rate 0.5] [--runs 3]
                                     [--follow-probs 1.0,0.7] [--rounds 1] [--arms pipeline,oracle,noop,misleading]
    .venv/bin/python bench/replay.py --edit-classes [--domains bank,warehouse] [--seeds 1] [--follow-probs 1.0,0.8]

`--edit-classes` runs the five edit classes of issue 36 per domain and fault kind instead
(bench/replay_edit_classes.py: correct, paraphrased, misleading, irrelevant, wrong step).

Per seed: a scripted LLM server (subprocess) injects at most one fault per task (rate and
kinds from the seed) while the instrumented banking app records every task into a `tracefix
serve` store. Then, once per follow probability, a second server with the same fault plan
(so a replay meets the fault where the recording did) serves the replays; its model reads an
edit with that probability and carries out what it asks (demo/edit_reader.py: values adopted,
calls made or not made, arguments left out, answers given now, right or wrong; a slip
prevented only when the edit decides what it corrupts; what it cannot read ignored). Every failed session is diagnosed
(no LLM: every stage uses its deterministic fallback) under these arms:

- pipeline: the product as shipped: segmentation, attribution and template interventions;
- oracle: the template intervention at the true fault step (the ground-truth step; the
  product never has it): how good the edits are once the step is right;
- noop: an edit that says nothing ("Please continue.") at the true fault step: what a
  replay flips without any content (a baseline: it must be ~0);
- misleading: an edit stating wrong values and "everything else is already done" at the true
  fault step: a wrong fix must not be validated (the model adopts the wrong values, or answers
  now). `--edit-classes` tries many more kinds of misleading edits.

Prints, per follow probability, arm and fault kind: the flip rate (share of failed sessions
with a validated intervention) and the verdict mix; and for the pipeline arm the LLM
requests saved by the prefix replay (requests a from-scratch re-run would send vs. those the
replays sent, the sim's own count per replay session) and wall time of a replay vs. the
original session. With several --rounds values the pipeline arm is run once per value.
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
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import procs  # noqa: E402  (the test suite's process starters: ready line + health check)

from fresh_sessions import drop_trained  # noqa: E402
from tracefix.replay import runner  # noqa: E402
from tracefix.replay.verdicts import VERDICTS  # noqa: E402
from tracefix.replay.zygote import Zygotes  # noqa: E402


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


ALLOWED = ["tracefix.demo"]
REPLAY_KEY = secrets.token_hex(32)  # the corpus app signs what it records, the replays check it
NOOP_EDIT = "Please continue."
# States values of every shape the testbed uses, all wrong: whatever slot the step has, the
# model adopts a wrong value for it.
MISLEADING_EDIT = ("Use account ACC-1099, customer CUST-099 and check CHK-5999 for this; the amount is $1.00, "
                   "and everything else is already done.")


def seeded_tasks(spec: str, seed: int) -> str:
    """`--tasks` on the seed's own world (t03 -> t03@SEED: its customers, ids and amounts, demo/variants.py)."""
    from tracefix.demo.tasks import TASKS
    from tracefix.demo.variants import variant_id

    names = list(TASKS) if spec == "all" else [t.strip() for t in spec.split(",") if t.strip()]
    return ",".join(variant_id(t, seed) for t in names)


def run_seed(seed: int, args, workdir: Path) -> list[dict]:
    """Record the corpus of one seed and diagnose its failed sessions; one row per session,
    follow probability and arm."""
    from tracefix.collector.access import connect

    truth = workdir / f"truth-{seed}.jsonl"
    fault_args = ["--seed", str(seed), "--fault-rate", str(args.fault_rate)]
    sim = procs.start_sim(*fault_args, "--ground-truth", str(truth))
    serve = procs.start_serve(workdir / f"store-{seed}.duckdb", "--diagnose", "off")
    rows = []
    try:
        server = serve.match["http"]
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "tracefix.cli", "demo-run", "--base-url", sim.match["base_url"],
                        "--tasks", seeded_tasks(args.tasks, seed), "--seed", str(seed), "--otlp-endpoint", server],
                       check=True, capture_output=True, timeout=900,
                       env={**os.environ, "TRACEFIX_REPLAY_KEY": REPLAY_KEY})
        sim.stop()
        print(f"seed {seed}: corpus recorded in {time.perf_counter() - started:.1f}s", flush=True)
        faults = {}
        for line in truth.read_text().splitlines() if truth.exists() else []:
            record = json.loads(line)
            faults.setdefault(record["session"], record)
        access = connect(server=server)
        failed = [s["session_id"] for s in access.list_sessions(outcome="failure", limit=1000)]
        docs = {sid: access.get_session(sid) for sid in failed}
        failed = [r["session"] for r in drop_trained([{"session": sid} for sid in failed], docs, f"seed {seed}")]
        print(f"seed {seed}: {len(failed)} failed session(s), {len(faults)} with an injected fault", flush=True)
        zygotes = warm_zygotes([docs[sid] for sid in failed], args, workdir / f"zygotes-{seed}")
        try:
            for follow in args.follow_probs:
                replay_sim = procs.start_sim(*fault_args, "--follow-prob", str(follow))
                try:
                    base_url = replay_sim.match["base_url"]
                    for sid in failed:
                        doc = access.get_session(sid)
                        fault = faults.get(sid, {})
                        for arm, rounds, concurrency in arms_for(args, fault):
                            rows.append(diagnose_row(access, sid, doc, fault, arm, rounds, concurrency, follow, args,
                                                     server, base_url, workdir, seed, zygotes))
                finally:
                    replay_sim.stop()
        finally:
            for kept in zygotes.values():
                kept.close()
        access.close()
    finally:
        serve.stop()
        sim.stop()
    return rows


def warm_zygotes(docs: list[dict], args, folder: Path) -> dict[str, Zygotes]:
    """The zygotes the replays fork from, started before the first and kept warm between
    diagnoses, as `tracefix worker` keeps them (so no replay batch waits for one to start); the
    `before` arm's apart: a zygote that preloads the agent's modules would serve it too."""
    from tracefix.replay.preload_modules import app_preloads

    zygotes = {"before": Zygotes(env=runner.child_env(), folder=folder / "before"),
               "app": Zygotes(env=runner.child_env(), folder=folder / "app")}
    for entrypoint in sorted({d["entrypoint"] for d in docs if d.get("entrypoint")}):
        zygotes["app"].get(runner.entrypoint_preloads(entrypoint), app_preloads(args.preload_modules, ALLOWED))
        if args.before:
            zygotes["before"].get(runner.entrypoint_preloads(entrypoint), [])
    return zygotes


def arms_for(args, fault: dict) -> list[tuple[str, int, int]]:
    """(arm, rounds, concurrency) of each diagnosis of a session, in the order they run."""
    first, *others = args.concurrency
    arms = [("pipeline", r, first) for r in args.rounds] if "pipeline" in args.arms else []
    if "pipeline" in args.arms:  # the same replays, right after, at each other --concurrency
        arms += [("concurrency", r, c) for r in args.rounds for c in others]
    if args.before and "pipeline" in args.arms:  # the same replays, right after, as children ran before issue 39 §3
        arms += [("before", r, first) for r in args.rounds]
    if fault.get("step") is not None:  # the baselines need the true step
        arms += [(a, 1, first) for a in ("oracle", "noop", "misleading") if a in args.arms]
    return arms


REPLAY_BATCHES_S: list[float] = []  # the wall time of each runner.run_all call: a round's replays, end to end


def timed_run_all(*pos, **kw):
    started = time.perf_counter()
    try:
        return RUN_ALL(*pos, **kw)
    finally:
        REPLAY_BATCHES_S.append(time.perf_counter() - started)


RUN_ALL, runner.run_all = runner.run_all, timed_run_all  # what diagnose calls: its batches are timed


def diagnose_row(access, sid: str, doc: dict, fault: dict, arm: str, rounds: int, concurrency: int, follow: float,
                 args, server: str, base_url: str, workdir: Path, seed: int, zygotes: dict[str, Zygotes]) -> dict:
    from tracefix.replay.pipeline import diagnose

    step = fault.get("step")
    hypotheses = {"pipeline": None, "concurrency": None, "before": None, "oracle": [{"step": step}],
                  "noop": [{"step": step, "intervention": {"text": NOOP_EDIT}}],
                  "misleading": [{"step": step, "intervention": {"text": MISLEADING_EDIT}}]}[arm]
    runner.HAND_OVER_SPANS = arm != "before"  # before: each child sent its own spans and waited for the answer
    t0 = time.perf_counter()
    REPLAY_BATCHES_S.clear()
    result = diagnose(access, sid, allowed_modules=ALLOWED, zygotes=zygotes["before" if arm == "before" else "app"],
                      preload_modules=args.preload_modules if arm != "before" else [],
                      llm=False, runs=args.runs, replay_key=REPLAY_KEY,
                      concurrency=concurrency, rounds=rounds, otlp_endpoint=server, hypotheses=hypotheses,
                      overrides={"base_url": base_url}, save=arm == "pipeline",
                      workdir=workdir / "replays" / f"{sid}-{arm}-{rounds}-{concurrency}-{follow}")
    elapsed = time.perf_counter() - t0
    stats = sim_stats(base_url)["by_session"]
    runs = [r for h in result["hypotheses"] for r in h["runs"]]
    children = {r["child_session_id"]: access.get_session(r["child_session_id"]) for r in runs}
    row = {
        "seed": seed, "session": sid, "arm": arm, "rounds": rounds, "concurrency": concurrency, "follow_prob": follow,
        "batches_s": list(REPLAY_BATCHES_S),
        "kind": fault.get("kind", "unlabelled"),
        "fault_step": step, "steps": len(doc["steps"]), "duration_ms": doc.get("duration_ms"),
        "work_ms": work_ms(doc), "verdicts": [h["verdict"] for h in result["hypotheses"]],
        "hypothesis_steps": [h["step"] for h in result["hypotheses"]], "stages": result["stages"],
        "diagnose_s": elapsed,
        "runs": [{"wall_s": r["wall_s"], "counts": r["counts"], "divergence": r["divergence"],
                  "success": r["success"], "fulfilled": r["fulfilled"], "progress": r["progress"],
                  "sim_requests": stats.get(r["child_session_id"], 0),
                  "child_ms": (children.get(r["child_session_id"]) or {}).get("duration_ms"),
                  "child_work_ms": work_ms(children.get(r["child_session_id"])), "error": r["error"],
                  "phases": r.get("phases"), "forked": r.get("forked"), "cpu_ms": r.get("cpu_ms")}
                 for r in runs],
    }
    print(f"  {sid[:12]} {row['kind']:<20} fault@{step} follow={follow} {arm:<11} r={rounds} c={concurrency} hypotheses@"
          f"{row['hypothesis_steps']} -> {row['verdicts']} ({elapsed:.1f}s)", flush=True)
    return row


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def report(all_rows: list[dict]) -> None:
    for follow in sorted({r["follow_prob"] for r in all_rows}, reverse=True):
        rows = [r for r in all_rows if r["follow_prob"] == follow]
        print(f"\n== replay benchmark, follow probability {follow} (fallback pipeline: no LLM) ==")
        stages = Counter((k, v) for r in rows if r["arm"] == "pipeline" for k, v in r["stages"].items())
        print("pipeline stages: " + ", ".join(f"{k}={v} x{n}" for (k, v), n in sorted(stages.items())))
        print("LLM used by any stage: " + ("yes" if any("llm" in v for (_, v) in stages) else "no"))
        print(f"\n{'arm':<14}{'fault kind':<22}{'sessions':>9}{'flipped':>9}{'flip rate':>11}  "
              + "  ".join(f"{v[:11]:>11}" for v in VERDICTS))
        for arm in ("pipeline", "oracle", "noop", "misleading"):
            for rounds in sorted({r["rounds"] for r in rows if r["arm"] == arm}):
                group = [r for r in rows if r["arm"] == arm and r["rounds"] == rounds]
                label = arm if arm != "pipeline" or len({r["rounds"] for r in rows}) == 1 else f"{arm} r={rounds}"
                by_kind = defaultdict(list)
                for r in group:
                    by_kind[r["kind"]].append(r)
                for kind, members in sorted(by_kind.items()) + [("ALL", group)]:
                    print(f"{label:<14}" + verdict_row(kind, members))
                print()
        for rounds in sorted({r["rounds"] for r in rows if r["arm"] == "pipeline"}):
            cost_report([r for r in rows if r["arm"] == "pipeline" and r["rounds"] == rounds], rounds)
            for concurrency in sorted({r["concurrency"] for r in rows if r["arm"] == "concurrency"}, reverse=True):
                print(f"\nthe same replays at --concurrency {concurrency}, one right after each of the above:")
                wall_report([r for r in rows if r["arm"] == "concurrency" and r["rounds"] == rounds
                             and r["concurrency"] == concurrency])
            before = [r for r in rows if r["arm"] == "before" and r["rounds"] == rounds]
            if before:
                print("\nthe same replays as children ran before (each imports the agent's modules and sends its "
                      "own spans), one right after each of the above:")
                wall_report(before)


def verdict_row(kind: str, group: list[dict]) -> str:
    flipped = sum(1 for r in group if "validated" in r["verdicts"])
    verdicts = Counter(v for r in group for v in r["verdicts"])
    n = sum(verdicts.values()) or 1
    return (f"{kind:<22}{len(group):>9}{flipped:>9}{(flipped / len(group) if group else 0):>11.2f}  "
            + "  ".join(f"{verdicts.get(v, 0):>4} ({verdicts.get(v, 0) / n:>3.0%})" for v in VERDICTS))


def cost_report(rows: list[dict], rounds: int) -> None:
    print(f"pipeline, rounds={rounds}: cost of the replays")
    runs = [run for r in rows for run in r["runs"] if not run["error"]]
    cassette = sum(run["counts"].get("llm_cassette", 0) for run in runs)
    live = sum(run["counts"].get("llm_live", 0) for run in runs)
    replaced = sum(run["counts"].get("llm_intervention", 0) for run in runs)
    sent = sum(run["sim_requests"] for run in runs)
    scratch = cassette + live + replaced  # a from-scratch re-run asks the LLM for every step
    print(f"LLM requests over {len(runs)} replays: from scratch {scratch}, sent {sent} "
          f"(reports say {live}), saved by the prefix replay {scratch - sent} = {(scratch - sent) / max(scratch, 1):.0%}; "
          f"ratio sent/from-scratch {sent / max(scratch, 1):.2f}")
    diverged = sum(1 for run in runs if run["divergence"])
    print(f"replays that diverged from their recording before t: {diverged}/{len(runs)}")

    wall_report(rows)
    print(f"diagnosis per failed session (median): {median([r['diagnose_s'] for r in rows]):.1f} s")
    errors = [run["error"] for r in rows for run in r["runs"] if run["error"]]
    if errors:
        print(f"replays with errors: {len(errors)}; first: {errors[0]}")


def wall_report(rows: list[dict]) -> None:
    """A replay child's wall and CPU time against its original session's wall time, and the split."""
    runs = [run for r in rows for run in r["runs"] if not run["error"]]
    original_ms = median([r["duration_ms"] for r in rows])
    child_wall_ms = median([run["wall_s"] * 1000 for run in runs])
    child_session_ms = median([run["child_ms"] for run in runs])
    forked = sum(1 for run in runs if run["forked"])
    print(f"--concurrency {'/'.join(str(c) for c in sorted({r['concurrency'] for r in rows}))}, load "
          f"{os.getloadavg()[0]:.1f} ({len(os.sched_getaffinity(0))} usable cores)")
    print(f"wall time (medians over {len(runs)} replays, {forked} forked from a zygote): original session "
          f"{original_ms:.0f} ms; replay child process {child_wall_ms:.0f} ms (ratio child / original "
          f"{child_wall_ms / original_ms:.2f}x); replayed session alone {child_session_ms:.0f} ms "
          f"(ratio {child_session_ms / original_ms:.2f}x)")
    child_cpu_ms = median([run.get("cpu_ms") for run in runs])
    print(f"replay child CPU time (user + system, median, forked children): {child_cpu_ms:.0f} ms = "
          f"{child_cpu_ms / original_ms:.2f}x the original's wall time; the child's wall is "
          f"{child_wall_ms / child_cpu_ms:.2f}x its CPU time (waiting for the machine, the sim, the collector)")
    print_phases(runs)
    batches = [(sum(r["batches_s"]) * 1000, sum(run["phases"].get("judge") or 0 for run in r["runs"] if run.get("phases")),
                len(r["runs"])) for r in rows if r.get("batches_s")]
    if batches:
        print(f"a diagnosis's replays end to end (runner.run_all, {median([n for _, _, n in batches]):.0f} replays "
              f"(median): the first fork to the last delivery; median of {len(batches)}): "
              f"{median([b for b, _, _ in batches]):.0f} ms; with the judging after them "
              f"{median([b + j for b, j, _ in batches]):.0f} ms")
    original_work, child_work = median([r["work_ms"] for r in rows]), median([run["child_work_ms"] for run in runs])
    print(f"agent work, first step to end (medians): original {original_work:.0f} ms, replay {child_work:.0f} ms "
          f"(ratio {child_work / original_work:.2f}x: the prefix comes from the cassette)")


def print_phases(runs: list[dict]) -> None:
    """Where a child's wall time went (replay.runner.PHASES, medians): the entrypoint phase
    split into the replayed session and what lies outside it (importing the agent's modules)."""
    from tracefix.replay.runner import PHASES

    split = [run for run in runs if run.get("phases")]
    if not split:
        print("phases: the children wrote no timings")
        return
    cells = []
    parent = ("deliver", "judge") if any("deliver" in run["phases"] for run in split) else ("judge",)
    for name in (*PHASES, *parent):
        cells.append(f"{name} {median([run['phases'].get(name) for run in split]):.1f}")
        if name == "entrypoint":
            cells[-1] += (f" (session {median([run['child_ms'] for run in split]):.1f}, importing the agent's "
                          f"modules and the rest {median([outside_session_ms(run) for run in split]):.1f})")
    print(f"child wall split, ms (medians of {len(split)}): " + ", ".join(cells) + f"; {' and '.join(parent)} "
          f"{'are' if len(parent) > 1 else 'is'} the parent's, after the child's exit, outside the child's wall")
    whole = [run["wall_s"] * 1000 + sum(run["phases"].get(name) or 0 for name in parent) for run in split]
    print(f"a replay end to end (the child's wall, then {' and '.join(parent)}; median): {median(whole):.0f} ms")


def outside_session_ms(run: dict) -> float | None:
    if run.get("child_ms") is None:
        return None
    return max(0.0, run["phases"]["entrypoint"] - run["child_ms"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--tasks", default="all", help="demo tasks to record (all | t01,t02,...)")
    parser.add_argument("--fault-rate", type=float, default=0.5)
    parser.add_argument("--follow-probs", default="1.0,0.7", help="the replay model's probabilities of reading an "
                        "edit, one replay server each")
    parser.add_argument("--arms", default="pipeline,oracle,noop,misleading")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", default=str(runner.DEFAULT_CONCURRENCY),
                        help="replays at once (default: the worker's); a list (3,2) runs each diagnosis again at "
                             "the others, right after, side by side")
    parser.add_argument("--before", action="store_true", help="also run each pipeline replay again as children "
                        "ran before issue 39 §3 (no --preload-module, each child sending its own spans), side by side")
    parser.add_argument("--preload-modules", default="tracefix.demo.bank", help="the demo's modules the zygote "
                        "imports before it forks (--preload-module; '' for none: each child imports them)")
    parser.add_argument("--rounds", default="1", help="repair-memory rounds per session; a list (1,3) "
                        "diagnoses every session once per value, side by side")
    parser.add_argument("--json", dest="json_out", help="also write the per-session rows to this file")
    parser.add_argument("--edit-classes", action="store_true", help="the five edit classes per domain and fault "
                        "kind (bench/replay_edit_classes.py) instead of the arms")
    parser.add_argument("--domains", default="bank,warehouse", help="with --edit-classes: the demo apps")
    parser.add_argument("--per-kind", type=int, default=1, help="with --edit-classes: faults per kind and domain")
    args = parser.parse_args()
    args.rounds = [int(r) for r in str(args.rounds).split(",") if r.strip()]
    args.concurrency = [int(c) for c in str(args.concurrency).split(",") if c.strip()]
    args.follow_probs = [float(p) for p in str(args.follow_probs).split(",") if p.strip()]
    args.arms = [a.strip() for a in str(args.arms).split(",") if a.strip()]
    args.preload_modules = [m.strip() for m in str(args.preload_modules).split(",") if m.strip()]
    os.environ.pop("TRACEFIX_LLM_BASE_URL", None)  # the figures are for the fallback pipeline
    if args.edit_classes:
        import replay_edit_classes

        args.domains = [d.strip() for d in args.domains.split(",") if d.strip()]
        args.seed = int(args.seeds.split(",")[0])
        args.concurrency = args.concurrency[0]
        with tempfile.TemporaryDirectory(prefix="tracefix-bench-edits-") as tmp:
            rows = replay_edit_classes.run(args, Path(tmp), REPLAY_KEY)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(rows, indent=1, default=str))
        replay_edit_classes.report(rows)
        return 0
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
