"""Long prompts into one collector at its default settings: does the store stay writable?

    .venv/bin/python bench/large_exports.py [--steps 2000] [--calls-per-step 3] [--kb 200]

One sender exports a session of `--steps` steps, `--calls-per-step` LLM calls a step, each
call's answer a `--kb` KB message (every message different), 30 spans a request (6–7 MB of
protobuf), to a fresh `tracefix serve` with the default memory limit (256MB), retrying a
429/503 as an OTLP exporter does. It prints the spans acknowledged and stored, the WAL's peak
(sampled every 50 ms), the server's peak RSS, the checkpoints, and whether /healthz said
anything but ok; then restarts the collector on the file with the same settings and checks
again that every acknowledged span is stored, that a small export gets 200 and that the
session list answers. The defaults are issue 35 §1's run: before the fix the store was
invalidated after ~1,900–2,900 spans and stayed so after a restart.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from http.client import HTTPException
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "tests"),
                str(Path(__file__).resolve().parents[1] / "tests" / "collector")]

import procs  # noqa: E402  (the tests' process harness: the server is stopped on any exit)
from long_prompts import LongPrompts, export, export_retrying, get, stored_steps  # noqa: E402

SPANS_PER_REQUEST = 30


class Watch:
    """Samples the WAL's size, the server's RSS and /healthz every 50 ms while the block runs."""

    def __init__(self, db: Path, pid: int, http: str):
        self.db, self.pid, self.http = db, pid, http
        self.wal_peak = self.rss_peak = 0
        self.unhealthy: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Watch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                self.wal_peak = max(self.wal_peak, os.path.getsize(f"{self.db}.wal"))
            except OSError:
                pass
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    rss = next(int(line.split()[1]) << 10 for line in f if line.startswith("VmRSS:"))
                self.rss_peak = max(self.rss_peak, rss)
            except (OSError, StopIteration):
                pass
            status, body = get(self.http + "/healthz")
            if status != 200 and len(self.unhealthy) < 5:
                self.unhealthy.append(f"{status}: {body[:200]!r}")


def check(http: str, session_id: str, acknowledged: int) -> dict:
    """What the store holds and answers now."""
    try:
        stored: int | str = len(stored_steps(http, session_id))
    except (AssertionError, OSError, HTTPException) as exc:  # no answer, or one cut short
        stored = f"unreadable: {exc!r}"[:120]
    small = LongPrompts(f"small-{uuid.uuid4().hex[:8]}", message_kb=1, pool_mb=1)
    health, _ = get(http + "/healthz")
    return {"stored": stored, "lost": acknowledged - stored if isinstance(stored, int) else "?", "healthz": health,
            "small export": export(http, small.request(3))[0], "GET /api/v1/sessions": get(http + "/api/v1/sessions")[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--calls-per-step", type=int, default=3, help="LLM spans of a step")
    ap.add_argument("--kb", type=int, default=200, help="size of each answer")
    args = ap.parse_args()
    env = {"TRACEFIX_TOKEN": "", "TRACEFIX_DB_MEMORY_LIMIT": "", "TRACEFIX_CHECKPOINT_THRESHOLD": ""}  # defaults
    spans = args.steps * args.calls_per_step
    with tempfile.TemporaryDirectory(prefix="tracefix-large-exports-") as tmp:
        db = Path(tmp) / "tracefix.duckdb"
        session = LongPrompts(f"long-{uuid.uuid4().hex[:8]}", message_kb=args.kb, calls_per_step=args.calls_per_step)
        serve = procs.start_serve(db, "--diagnose", "off", env=env, timeout=120)
        http = serve.match["http"]
        acknowledged, statuses = 0, []
        try:
            with Watch(db, serve.popen.pid, http) as watch:
                started = time.perf_counter()
                while acknowledged < spans:
                    n = min(SPANS_PER_REQUEST, spans - acknowledged)
                    if not export_retrying(http, session.request(n), statuses=statuses):
                        break
                    acknowledged += n
                wall = time.perf_counter() - started
            health = json.loads(get(http + "/healthz")[1] or b"{}")
            running = check(http, session.session_id, acknowledged)
        finally:
            code = serve.stop(60)
        print(f"{args.steps} steps x {args.calls_per_step} calls x {args.kb} KB, {SPANS_PER_REQUEST} spans a request, "
              f"one sender, default settings")
        print(f"  spans acknowledged      {acknowledged} of {spans} in {wall:.0f} s "
              f"({acknowledged * args.kb / 1024 / wall:.1f} MB/s of messages)")
        print(f"  answers                 " + ", ".join(f"{s}: {statuses.count(s)}" for s in sorted(set(statuses))))
        print(f"  WAL peak                {watch.wal_peak / 2**20:.0f} MB")
        print(f"  server RSS peak         {watch.rss_peak / 2**20:.0f} MB")
        print(f"  checkpoints             {health.get('checkpoints')}")
        print(f"  healthz always ok       {'yes' if not watch.unhealthy else 'no: ' + '; '.join(watch.unhealthy)}")
        print(f"  running                 {running}")
        print(f"  stopped                 exit {code}")
        serve = procs.start_serve(db, "--diagnose", "off", env=env, timeout=120)
        try:
            print(f"  after a restart         {check(serve.match['http'], session.session_id, acknowledged)}")
        finally:
            serve.stop(60)
        print(f"  database file           {db.stat().st_size / 2**20:.0f} MB")


if __name__ == "__main__":
    main()
