"""Instructions added per `chat.completions.create`, counted by valgrind (callgrind): the same
calls as instrumentation_overhead.py (its MockTransport, request, response, stream and modes),
in a figure other processes' load cannot move. On this shared 2-core machine the timed
bench's ratios swing with the load (at a load of 9-17 its separate processes read tracefix
above OpenLit, one streaming figure below zero); an instruction count does not, though it
is not time either (a cache miss costs more than an instruction).

Each (mode, kind) runs twice in a process of its own under callgrind, with SHORT and LONG
calls after the same warm-up; (instructions(LONG) - instructions(SHORT)) / (LONG - SHORT) is
the count per call, every thread's (the exporter's too), import and start-up cancelled out.
Modes: none, bare (an SDK span around the call, no attributes: what every instrumentation
pays at least), floor, tracefix, tracefix-no-content (content capture off),
tracefix-sdk-path (tracefix with the SDK cleaning its
attributes again, as before `tracefix.clean_attributes`), and OpenLit with its own
uninstrumented baseline in its virtual environment (instrumentation_overhead.py makes it).

    .venv/bin/python bench/instrumentation_instructions.py [--kinds plain,stream] [--jobs 2]

Takes about 2 minutes a process at a load of 10 (callgrind runs ~50x slower); needs valgrind.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODES = ("none", "bare", "floor", "tracefix", "tracefix-no-content", "tracefix-sdk-path")
SHORT, LONG = 20, 120


def worker(mode: str, kind: str, calls: int) -> None:
    """Runs under callgrind: warm-up, then `calls` calls of `mode`."""
    sys.path.insert(0, str(HERE))
    import instrumentation_overhead as bench

    client = bench._client()
    plain, streamed = bench._instrument(mode.removesuffix("-sdk-path"), client)
    if mode == "tracefix-sdk-path":
        from tracefix import clean_attributes

        clean_attributes._trusted = lambda tracer: False  # every span takes the SDK's own path
    fn = plain if kind == "plain" else streamed
    for _ in range(30 + calls):
        fn()


def count(python: str, mode: str, kind: str, calls: int) -> int:
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", python, __file__,
                          "--worker", mode, kind, str(calls)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONHASHSEED": "0"})
    for line in out.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1])
    raise SystemExit(f"{mode} {kind} under valgrind failed:\n{out.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default="plain,stream")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--jobs", type=int, default=2, help="valgrind processes at once")
    parser.add_argument("--no-openlit", action="store_true")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], int(args.worker[2]))
        return
    sys.path.insert(0, str(HERE))
    from instrumentation_overhead import openlit_python

    runs = [(sys.executable, mode, mode) for mode in args.modes.split(",")]
    lit_python = None if args.no_openlit else openlit_python()[0]
    if lit_python:
        runs += [(lit_python, "none", "none (openlit venv)"), (lit_python, "openlit", "openlit")]
    kinds = args.kinds.split(",")
    jobs = [(python, mode, label, kind, n) for kind in kinds for python, mode, label in runs for n in (SHORT, LONG)]
    load = os.getloadavg()[0]
    with ThreadPoolExecutor(args.jobs) as pool:
        counts = list(pool.map(lambda job: count(job[0], job[1], job[3], job[4]), jobs))
    per_call = {}
    for (python, mode, label, kind, n), value in zip(jobs, counts):
        per_call.setdefault((label, kind), {})[n] = value
    print(f"instructions per chat.completions.create (valgrind callgrind, every thread), ({LONG} - {SHORT} calls) "
          f"/ {LONG - SHORT}; load {load:.1f}-{os.getloadavg()[0]:.1f} (it does not move these counts)")
    for kind in kinds:
        calls = {label: (c[LONG] - c[SHORT]) / (LONG - SHORT) for (label, k), c in per_call.items() if k == kind}
        added = {label: value - calls["none"] for label, value in calls.items() if label not in
                 ("none", "none (openlit venv)")}
        if "openlit" in calls:
            added["openlit"] = calls["openlit"] - calls["none (openlit venv)"]
        print(f"\n{'non-streaming' if kind == 'plain' else 'streaming (21 chunks)'}: none {calls['none'] / 1e3:,.0f}k")
        for label, value in added.items():
            print(f"  {label:18s} added {value / 1e3:8.1f}k instructions")
        for label in ("tracefix", "tracefix-sdk-path"):
            if label in added:
                for other in ("floor", "openlit", "bare"):
                    if other in added:
                        print(f"  {label} / {other} = {added[label] / added[other]:.2f}")
        for label in ("floor", "tracefix-no-content", "bare"):  # how low the ratio to OpenLit can go at all
            if label in added and "openlit" in added:
                print(f"  {label} / openlit = {added[label] / added['openlit']:.2f}")


if __name__ == "__main__":
    main()
