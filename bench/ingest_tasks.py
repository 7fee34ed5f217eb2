"""What storing each session's task at ingest (collector/store/tasks.py, migration 12) costs the
store: the same batches written into fresh stores with and without it, in process, CPU time.

    .venv/bin/python bench/ingest_tasks.py [--rounds 4]

Batches: 20 of 500 new two-step sessions (bench/agent_spans.py, as bench/ui.py builds its
store), then 30 of one 3,000-step session, 300 spans each (the session's later batches).
"Without" replaces the two steps that compute the task by ones that compute nothing (the
column stays empty), so the figure is their whole cost. Printed: medians over the rounds.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from agent_spans import request, session_spans  # noqa: E402


def batches() -> list:
    from tracefix.collector.normalize import normalize_request

    rng = random.Random(7)
    t0 = time.time_ns() - 10**12
    out = []
    for first in range(0, 10_000, 500):
        spans = []
        for i in range(first, first + 500):
            spans += session_spans(f"b-{i:06d}", 2, rng, growing=False, window=2, t0=t0 + i * 10**9)
        out.append(normalize_request(request(spans)))
    long = session_spans("long", 3000, rng, growing=False, window=6)
    out += [normalize_request(request(long[first:first + 300])) for first in range(0, len(long), 300)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    import tracefix.collector.store.ingest as ingest
    from tracefix.collector.store import Store

    with_task = ingest.store_tasks, ingest._tasks_in_batch
    without = (lambda *a, **k: None), (lambda *a, **k: {})
    cpu: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
    for _ in range(args.rounds):
        for name, (store_tasks, tasks_in_batch) in (("without", without), ("with", with_task)):
            ingest.store_tasks, ingest._tasks_in_batch = store_tasks, tasks_in_batch
            todo = batches()
            store = Store(Path(tempfile.mkdtemp(prefix="tracefix-tasks-bench-")) / "s.duckdb")
            started = time.process_time()
            for batch in todo[:20]:
                store.ingest(batch)
            new = time.process_time() - started
            for batch in todo[20:]:
                store.ingest(batch)
            cpu[name].append((new, time.process_time() - started - new))
            store.close()
    ingest.store_tasks, ingest._tasks_in_batch = with_task
    for part, label in ((0, "20 batches of 500 new sessions"), (1, "30 later batches of one session")):
        a, b = (statistics.median(x[part] for x in cpu[n]) for n in ("without", "with"))
        print(f"{label}: {a:.2f} s CPU without the task, {b:.2f} s with it ({(b / a - 1) * 100:+.0f}%)")


if __name__ == "__main__":
    main()
