"""Where `tracefix serve`'s CPU goes while bench/ingest.py's exporters post to it: a py-spy
sample of the server and its decode workers (`--subprocesses`, waiting frames excluded),
each sample put in one stage by the frames on its stack.

    .venv/bin/python bench/ingest.py --profile [--protocol http,grpc]

py-spy samples Python threads only: threads that no Python code runs on (gRPC's C-core
pollers, DuckDB's own workers) are not seen, and a thread that waits for a core counts as
busy; so the shares are of the sampled time, printed beside the CPU the kernel counted.
"""
from __future__ import annotations

import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

RATE = 200  # samples per second and thread; more makes py-spy itself a load on 2 cores

# (stage, frame fragments): a sample goes to the first stage any of whose fragments is in one
# of its frames; the order matters: decoding runs inside the worker's queue loop, a commit
# inside the writer, redaction inside normalization.
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("checkpoint", ("checkpointer.py", "checkpoint_beside", "_keep_wal_within_budget")),
    ("redaction", ("/redact.py",)),
    ("writer: commit", ("__exit__ (tracefix/collector/store/sql.py", "__exit__ (collector/store/sql.py")),
    ("writer: session upserts", ("_upsert_sessions", "_adopt_trace_sessions")),
    ("writer: step derivation", ("_derive_steps", "numbered_steps")),
    ("writer: span/message inserts, rest", ("collector/writer.py", "collector/store/")),
    ("decode + normalize", ("decode_body", "/normalize/", "collector/otlp.py", "google/protobuf")),
    ("server <-> decode worker (pickling, queues)", ("concurrent/futures/process.py", "multiprocessing/",
                                                    "decoding.py", "decode_workers.py", "wrap_future",
                                                    "_copy_future_state")),
    ("gRPC framework", ("grpc/",)),
    ("HTTP framework (uvicorn, starlette, asyncio)", ("uvicorn/", "starlette/", "h11/", "httptools/",
                                                     "asyncio/", "api/bodies.py")),
]
OTHER = "other"
WORKER = "in the decode worker processes"  # counted beside the stages, not one of them


def stage_of(stack: str) -> str:
    for stage, fragments in STAGES:
        if any(f in stack for f in fragments):
            return stage
    return OTHER


class Profile:
    """py-spy recording `pid` and its children from now until `stop()`."""

    def __init__(self, pid: int):
        exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        if not Path(exe).exists():
            raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy (pyproject's dev extra)")
        self.out = Path(tempfile.mkdtemp(prefix="tracefix-bench-spy-")) / "raw.txt"
        # --nonblocking: the server is not paused per sample, so the profile does not slow it
        self.proc = subprocess.Popen([exe, "record", "--pid", str(pid), "--subprocesses", "--nonblocking",
                                      "--rate", str(RATE), "--format", "raw", "--output", str(self.out)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def stop(self) -> collections.Counter:
        """Samples per stage."""
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=60)
        if not self.out.exists():
            raise SystemExit(f"py-spy wrote no profile: {err.strip()[-500:]}")
        counts: collections.Counter = collections.Counter()
        for line in self.out.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            if stack and n.isdigit():
                counts[stage_of(stack)] += int(n)
                if 'process ' in stack and "multiprocessing.spawn import" in stack:  # the child's frame
                    counts[WORKER] += int(n)
        return counts


def tree(pid: int) -> list[int]:
    """`pid` and its descendants alive now."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            children[int(stat.read_text().rsplit(")", 1)[1].split()[1])].append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    out, todo = [], [pid]
    while todo:
        out.append(p := todo.pop())
        todo.extend(children.get(p, []))
    return out


def cpu_of(stat: Path) -> float:
    """User + system CPU-seconds in a /proc .../stat file (0 when it is gone)."""
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> collections.Counter:
    """CPU-seconds so far of each thread of `pid` and its descendants, by thread name (the
    collector names its OS threads: tf-writer, tf-http, tf-checkpoint, tf-decode-proc, ...;
    digits dropped, so a pool's threads add up), exact where py-spy's samples are not."""
    out: collections.Counter = collections.Counter()
    for p in tree(pid):
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                name = (task / "comm").read_text().strip()
            except OSError:
                continue
            out[re.sub(r"[-_]?\d+$", "", name)] += cpu_of(task / "stat")
    return out


def report_threads(label: str, cpu: collections.Counter) -> None:
    """Each thread name's share of the kernel's CPU count, largest first."""
    total = sum(cpu.values())
    if total <= 0:
        return
    print(f"  {label}, by thread (the kernel's CPU count, {total:.1f} s): "
          + ", ".join(f"{name} {100 * s / total:.0f} %" for name, s in cpu.most_common() if s / total >= 0.01))


def report(label: str, counts: collections.Counter, cpu_s: float) -> None:
    """Each stage's share of the sampled CPU, largest first."""
    stages = collections.Counter({s: n for s, n in counts.items() if s != WORKER})
    total = sum(stages.values())
    if not total:
        print(f"  {label}: no samples")
        return
    # a thread counts as busy while it runs or waits for a core: on a loaded machine the
    # samples add up to more than the CPU the kernel counted; the shares hold all the same
    print(f"  {label}: {total / RATE:.1f} s of busy Python threads sampled (running or runnable), "
          f"{cpu_s:.1f} s of CPU counted by the kernel; {100 * counts[WORKER] / total:.0f} % of the samples "
          f"in the decode worker processes")
    for stage, n in stages.most_common():
        print(f"    {100 * n / total:5.1f} %  {stage}")


def merged(profiles: list[collections.Counter]) -> collections.Counter:
    out: collections.Counter = collections.Counter()
    for p in profiles:
        out.update(p)
    return out
