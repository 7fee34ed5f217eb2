"""The faults `tracefix demo` plans and the truth it reads back: which tasks get one injected
fault of which kind (:func:`fault_plan`, the sim's `--faults` file) and, once they ran, the
fault each session got (:func:`read_ground_truth`, the sim's `--ground-truth` file: labels
the demo shows beside the diagnosis; the product never reads them)."""
from __future__ import annotations

import json
import random
from pathlib import Path

# Kinds in the order the fault plan assigns them, so a small demo shows different failures.
PLAN_KINDS = ("missing_argument", "wrong_argument", "wrong_instruction", "skipped_action",
              "misread_tool_result", "vague_instruction", "early_final_answer")


def fault_plan(tasks: list[str], fault_rate: float, seed: int) -> list[dict]:
    """One fault for round(N * rate) of the tasks (at least one when the rate is positive),
    each of a different kind while kinds last, at a seeded early step (the sim moves it to
    the next step that can host that kind)."""
    if fault_rate <= 0 or not tasks:
        return []
    rng = random.Random(seed)
    count = min(len(tasks), max(1, round(len(tasks) * fault_rate)))
    # Spread the faulty tasks over the run so successes come before, between and after them.
    chosen = sorted(rng.sample(range(len(tasks)), count))
    offset = rng.randrange(len(PLAN_KINDS))
    return [{"task": tasks[i], "step": rng.randint(1, 4), "kind": PLAN_KINDS[(offset + n) % len(PLAN_KINDS)]}
            for n, i in enumerate(chosen)]


def read_ground_truth(path: Path) -> dict[str, dict]:
    """The injected faults by session id (benchmark labels: the demo shows them, the product never reads them)."""
    if not path.exists():
        return {}
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["session"]: r for r in records if not r.get("replay")}
