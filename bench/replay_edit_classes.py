"""The five edit classes of issue 36 on recorded faults, per domain and fault kind: does a
verdict follow what an edit asks?

    .venv/bin/python bench/replay.py --edit-classes [--domains bank,warehouse] [--seed 1]
                                     [--follow-probs 1.0,0.8] [--runs 3] [--per-kind 1]

Per domain, a fault plan puts one fault of each kind on its own task (tasks chosen by the
seed among those that can host the kind; `--per-kind` tasks per kind), the instrumented app
records them into a `tracefix serve` store, and each recorded fault is replayed through the
product's path (`replay.pipeline.diagnose`, no LLM) with the edits of
tests/demo/edit_templates.py (the test side's phrasings, never imported by the model's
reader): correct, paraphrased (3 per fault), misleading (negation, "already done", wrong
values, another tool, another agent, "everything is done"), irrelevant, and the correct edit
at a wrong step; plus the product's own template edit (no --edit) for comparison.

At follow probability 1.0 every run of one edit is the same (the model reads the edit every
time), so one run decides the verdict; below 1.0 each edit gets `--runs` runs and the DoVer
rule (2 of 3 succeed). Prints the validated rate per class, per follow probability, and per
domain and fault kind.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "demo"))
import procs  # noqa: E402
from edit_templates import CLASSES, suite  # noqa: E402  (the test side's phrasings)
from fresh_sessions import drop_trained  # noqa: E402

ALL_CLASSES = (*CLASSES, "template")


def fault_plan(domain: str, seed: int, per_kind: int) -> list[dict]:
    """One fault of each kind on its own task(s), chosen by the seed among those that host it,
    each task on the seed's world (demo/variants.py)."""
    from tracefix.demo.faults import unit_draw
    from tracefix.demo.scripted import KINDS
    from tracefix.demo.variants import variant_id

    if domain == "bank":
        from tracefix.demo.policy import fault_free_steps
        from tracefix.demo.tasks import TASK_LIST as items
    else:
        from tracefix.demo.warehouse_model import fault_free_steps
        from tracefix.demo.warehouse_tasks import TICKET_LIST as items
    free = [variant_id(t.id, seed) for t in items]  # the seed's own customers, ids and amounts
    plan = []
    for kind in KINDS:
        for n in range(per_kind):
            hosts = [t for t in free if any(kind in s.hosts for s in fault_free_steps(t))]
            if not hosts:
                break
            task = hosts[int(unit_draw(seed, domain, kind, n) * len(hosts))]
            free.remove(task)
            plan.append({"task": task, "step": 0, "kind": kind})
    return plan


def record(domain: str, plan: list[dict], seed: int, workdir: Path, key: str, server: str) -> list[dict]:
    path, truth = workdir / f"plan-{domain}.json", workdir / f"truth-{domain}.jsonl"
    path.write_text(json.dumps(plan))
    sim = procs.start_sim("--seed", str(seed), "--faults", str(path), "--ground-truth", str(truth))
    try:
        subprocess.run([sys.executable, "-m", "tracefix.cli", "demo-run", "--base-url", sim.match["base_url"],
                        "--domain", domain, "--tasks", ",".join(e["task"] for e in plan), "--seed", str(seed),
                        "--otlp-endpoint", server], check=True, capture_output=True, timeout=900,
                       env={**os.environ, "TRACEFIX_REPLAY_KEY": key})
    finally:
        sim.stop()
    faults: dict[str, dict] = {}
    for line in truth.read_text().splitlines() if truth.exists() else []:
        r = json.loads(line)
        faults.setdefault(r["session"], r)
    return list(faults.values())


def run(args, workdir: Path, key: str) -> list[dict]:
    from tracefix.collector.access import connect
    from tracefix.replay.pipeline import diagnose

    rows: list[dict] = []
    serve = procs.start_serve(workdir / "store.duckdb", "--diagnose", "off")
    server = serve.match["http"]
    try:
        for domain in args.domains:
            plan = fault_plan(domain, args.seed, args.per_kind)
            t0 = time.perf_counter()
            faults = record(domain, plan, args.seed, workdir, key, server)
            with connect(server=server) as access:
                docs = {f["session"]: access.get_session(f["session"]) for f in faults}
            faults = drop_trained(faults, docs, f"{domain} seed {args.seed}")
            print(f"{domain}: {len(faults)} faults recorded in {time.perf_counter() - t0:.0f}s "
                  f"({', '.join(f['task'] + ':' + f['kind'] for f in faults)})", flush=True)
            path = workdir / f"plan-{domain}.json"
            for follow in args.follow_probs:
                sim = procs.start_sim("--seed", str(args.seed), "--faults", str(path), "--follow-prob", str(follow))
                try:
                    jobs = []
                    with connect(server=server) as access:
                        for fault in faults:
                            doc = access.get_session(fault["session"])
                            edits = suite(fault, doc, domain) + [("template", fault["step"], None)]
                            jobs += [(fault, cls, step, text) for cls, step, text in edits]
                    runs = 1 if follow >= 1.0 else args.runs

                    def one(numbered, base_url=sim.match["base_url"], runs=runs, follow=follow):
                        n, (fault, cls, step, text) = numbered
                        hypothesis = {"step": step, **({"intervention": {"text": text}} if text else {})}
                        with connect(server=server) as access:
                            result = diagnose(access, fault["session"], allowed_modules=["tracefix.demo"], llm=False,
                                              runs=runs, concurrency=min(runs, 3), replay_key=key, save=False,
                                              otlp_endpoint=server, hypotheses=[hypothesis],
                                              overrides={"base_url": base_url},
                                              workdir=workdir / "replays" / f"{domain}-{follow}-{n}")
                        (h,) = result["hypotheses"]
                        return {"domain": domain, "kind": fault["kind"], "task": fault["task"], "class": cls,
                                "follow": follow, "step": step, "fault_step": fault["step"], "text": text,
                                "verdict": h["verdict"], "runs": runs, "reason": h.get("verdict_reason"),
                                "succeeded": sum(1 for r in h["runs"] if r.get("success"))}

                    t0 = time.perf_counter()
                    with ThreadPoolExecutor(args.concurrency) as pool:
                        done = list(pool.map(one, enumerate(jobs)))
                    rows += done
                    print(f"{domain} follow={follow}: {len(done)} edits replayed in {time.perf_counter() - t0:.0f}s",
                          flush=True)
                finally:
                    sim.stop()
    finally:
        serve.stop()
    return rows


def _rate(rows: list[dict]) -> str:
    if not rows:
        return "     -    "
    v = sum(1 for r in rows if r["verdict"] == "validated")
    return f"{v / len(rows):4.2f} {v:>2}/{len(rows):<3}"


def report(rows: list[dict]) -> None:
    follows = sorted({r["follow"] for r in rows}, reverse=True)
    print("\n== edit classes: validated rate (validated / edits) ==")
    print(f"{'follow':<8}{'domain':<11}" + "".join(f"{c:>12}" for c in ALL_CLASSES))
    for follow in follows:
        for domain in sorted({r["domain"] for r in rows}) + ["ALL"]:
            group = [r for r in rows if r["follow"] == follow and domain in ("ALL", r["domain"])]
            print(f"{follow:<8}{domain:<11}" + "".join(
                f"{_rate([r for r in group if r['class'] == c]):>12}" for c in ALL_CLASSES))
    for follow in follows:
        print(f"\nfollow {follow}, per domain and fault kind:")
        by = defaultdict(list)
        for r in rows:
            if r["follow"] == follow:
                by[(r["domain"], r["kind"])].append(r)
        for (domain, kind), group in sorted(by.items()):
            print(f"  {domain:<10}{kind:<21}" + "".join(
                f"{_rate([r for r in group if r['class'] == c]):>12}" for c in ALL_CLASSES))
    wrong = [r for r in rows if r["class"] in ("misleading", "irrelevant", "wrong_step") and r["verdict"] == "validated"]
    print(f"\nmisleading, irrelevant or wrong-step edits validated: {len(wrong)}")
    for r in wrong:
        print(f"  {r['domain']} {r['kind']} follow={r['follow']} {r['class']}: {r['text']}")
    missed = [r for r in rows if r["class"] in ("correct", "paraphrased") and r["verdict"] != "validated"
              and r["follow"] >= 1.0]
    print(f"correct or paraphrased edits not validated at follow 1.0: {len(missed)}")
    for r in missed:
        print(f"  {r['domain']} {r['kind']} {r['class']} -> {r['verdict']}: {r['text']}"
              + (f" ({r['reason'][:160]})" if r["verdict"] == "error" else ""))
