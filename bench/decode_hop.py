"""CPU of the hop between the server and its decode worker, against the channel it replaced.

    .venv/bin/python bench/decode_hop.py [--requests 96] [--repeat 5]

The bodies of bench/ingest.py (300 spans, ~700 KB each) go to one spawned worker through
`decode_workers.WorkerPool` (what `tracefix serve` uses) and, in turn in each run, through the
`ProcessPoolExecutor` it replaced. The worker answers each body with its Batch decoded once
before the runs (`cached_decode`), so what is counted is the hop alone: the body out, the
Batch pickled (`Batch.__getstate__`, at the protocol each channel uses), its way back, its
unpickling. The CPU is the kernel's count for this process's and the worker's threads together (a loaded
machine slows the runs, it hardly moves the figures); printed: medians of us a span of each,
their ratio, and the decode's own CPU a span for scale.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ingest  # noqa: E402
import ingest_profile  # noqa: E402

from tracefix.collector.decode_workers import WorkerPool  # noqa: E402
from tracefix.collector.decoding import decode_body  # noqa: E402

ARGS = ("application/x-protobuf", None, 64 << 20, 8192, "traces")


def cpu_of_tree() -> float:
    """CPU-seconds of the threads of this process and its children alive now (schedstat's
    nanoseconds: /proc's stat counts 10 ms ticks, a third of a microsecond a span here)."""
    total = 0
    for pid in ingest_profile.tree(os.getpid()):
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return total / 1e9


_decoded: dict[int, object] = {}


def cached_decode(body: bytes, *args):
    """In the worker: the body's Batch, decoded on its first request only."""
    key = hash(body)
    if key not in _decoded:
        _decoded[key] = decode_body(body, *args)
    return _decoded[key]


def old_cached_decode(body: bytes):
    return cached_decode(body, *ARGS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=96, help="bodies of 300 spans decoded per run and side")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    bodies = [body for body, _ in ingest.build_bodies(0, args.requests, 100)]
    started = time.process_time()
    spans = sum(decode_body(b, *ARGS).span_count for b in bodies)
    decode_us = 1e6 * (time.process_time() - started) / spans
    old = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    new = WorkerPool(cached_decode, 1)
    for body in bodies:  # each worker decodes each body once, before the runs
        old.submit(old_cached_decode, body).result()
        new.submit(body, *ARGS).result()
    sides = {
        "WorkerPool (socketpair)": lambda: [f.result() for f in [new.submit(b, *ARGS) for b in bodies]],
        "ProcessPoolExecutor": lambda: [f.result() for f in [old.submit(old_cached_decode, b) for b in bodies]],
    }
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.repeat):
        for name, run in sides.items():
            before = cpu_of_tree()
            batches = run()
            cpu[name].append(1e6 * (cpu_of_tree() - before) / spans)
            assert sum(b.span_count for b in batches) == spans
    old.shutdown()
    new.close()
    med = {name: statistics.median(v) for name, v in cpu.items()}
    print(f"{len(bodies)} requests of {spans // len(bodies)} spans (~{sum(map(len, bodies)) // len(bodies) // 1000} KB), "
          f"medians of {args.repeat} runs; the hop's CPU a span, server and worker together "
          f"(decoding one is {decode_us:.1f} us a span):")
    for name, us in med.items():
        print(f"  {name:24s} {us:5.2f} us   (runs: {', '.join(f'{x:.2f}' for x in cpu[name])})")
    new_us, old_us = med["WorkerPool (socketpair)"], med["ProcessPoolExecutor"]
    print(f"WorkerPool / ProcessPoolExecutor: {new_us / old_us:.2f} ({old_us - new_us:.2f} us a span less)")
    print(f"(load average now {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores; {time.strftime('%Y-%m-%d')})")

if __name__ == "__main__":
    main()
