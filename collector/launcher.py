"""Run `tracefix serve` as a child process for as long as a command needs a collector.

`tracefix replay --db FILE` needs one: its replay children export their spans over OTLP,
and the collector is the only writer of the file. `serve` prints one line once both
receivers listen (docs/contracts.md §6); we wait for that line, then for /healthz.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from typing import Iterator

SERVE_READY = re.compile(r"tracefix serve: http=(?P<http>\S+) grpc=(?P<grpc>\S+)")


class CollectorDidNotStart(RuntimeError):
    pass


@contextmanager
def temporary_collector(db: str | os.PathLike, *extra_args: str, timeout: float = 60.0) -> Iterator[str]:
    """`tracefix serve --db DB` on free loopback ports; yields its HTTP base URL and stops it
    (SIGTERM: it drains and checkpoints) when the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracefix.cli", "serve", "--db", str(db), "--http-port", "0", "--grpc-port", "0",
         *extra_args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    found: list[str] = []
    ready = threading.Event()

    def pump() -> None:  # keep draining so the child never blocks on a full pipe
        for line in proc.stdout:
            lines.append(line)
            match = SERVE_READY.search(line)
            if match and not found:
                found.append(match["http"])
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True, name="tf-serve-output").start()
    try:
        if not ready.wait(timeout) or not found:
            raise CollectorDidNotStart(f"could not start a collector on {db}:\n" + "".join(lines[-20:]))
        _wait_healthy(found[0], proc, timeout, lines)
        yield found[0]
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float, lines: list[str]) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            raise CollectorDidNotStart(f"the collector on {url} never became healthy:\n" + "".join(lines[-20:]))
        time.sleep(0.05)
