"""Labelled demo sessions for the learned ranker: each failed faulted session with the step
the sim injected its fault at, as JSONL of {"session": <session document>, "mistake_step": k}.

    .venv/bin/python bench/demo_labelled.py OUT.jsonl [--seeds 1,2] [--per-kind 4]

`tracefix train --ranker --labelled OUT.jsonl` trains on these beside labelled message logs.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_corpus import DemoCorpus  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--per-kind", type=int, default=4)
    args = ap.parse_args()
    from tracefix.demo.faults import fault_free_steps
    from tracefix.demo.policy import KINDS
    from tracefix.demo.tasks import TASKS

    written = 0
    with tempfile.TemporaryDirectory(prefix="demo-labelled-") as tmp, args.out.open("w") as out:
        for seed in (int(s) for s in args.seeds.split(",")):
            with DemoCorpus(Path(tmp) / f"seed{seed}", sim_seed=seed) as corpus:
                rng = random.Random(seed)
                plan = []
                for kind in KINDS:
                    hosts = [t for t in TASKS if any(kind in s.hosts for s in fault_free_steps(t))]
                    for task_id in rng.sample(hosts, min(args.per_kind, len(hosts))):
                        plan.append((task_id, kind, rng.randrange(len(fault_free_steps(task_id)))))
                truth = corpus.run_faulted(plan, seed=seed)
                docs = corpus.documents([t["session"] for t in truth])
                for label in truth:
                    doc = docs[label["session"]]
                    if doc.get("outcome") == "failure":
                        out.write(json.dumps({"session": doc, "mistake_step": label["step"],
                                              "kind": label["kind"]}, default=str) + "\n")
                        written += 1
    print(f"wrote {written} labelled failed sessions to {args.out}")


if __name__ == "__main__":
    main()
