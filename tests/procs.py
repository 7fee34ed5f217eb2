"""Start real tracefix processes for tests and wait until they answer.

A process prints its address on one line (docs/contracts.md, "Processes"); we read
that line, then poll its health endpoint, never a fixed sleep.
"""
from __future__ import annotations

import atexit
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

TRACEFIX = [sys.executable, "-m", "tracefix.cli"]
_STARTED: list[subprocess.Popen] = []


@atexit.register
def _stop_leftovers() -> None:
    """A test that failed before its `stop()` must not leave a server running after pytest."""
    for popen in _STARTED:
        if popen.poll() is None:
            popen.kill()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _unwind_on_sigterm() -> None:
    """SIGTERM's default action ends Python on the spot: no `finally`, no `__exit__`, no
    atexit, so a bench or test run killed with `kill` (a job runner, a timeout) left the
    `tracefix serve` / `tracefix sim` it started running, holding their ports and DuckDB
    files. Raised as KeyboardInterrupt, a SIGTERM unwinds like Ctrl-C (SIGINT already
    does): every `Proc.stop()` in a `finally` or `__exit__` runs, then `_stop_leftovers`.
    KeyboardInterrupt, not SystemExit, because pytest counts a SystemExit inside a test as
    one failed test and goes on to the next; `tracefix demo` does the same (demo/pipeline.py).
    Only over the default action and from the main thread (the only one that may set a
    handler), so a program with its own SIGTERM handling keeps it."""
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
        signal.signal(signal.SIGTERM, _interrupt)


@dataclass
class Proc:
    popen: subprocess.Popen
    match: re.Match
    lines: list[str] = field(default_factory=list)

    def output(self) -> str:
        return "".join(self.lines)

    def stop(self, timeout: float = 10.0) -> int:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode


def start(args: list[str], ready: str, *, env: dict | None = None, cwd: str | Path | None = None,
          timeout: float = 60.0, health: str | None = None, health_tls: ssl.SSLContext | None = None) -> Proc:
    """Run `tracefix ARGS`, wait for a stdout line matching `ready` (a regex) and, if
    given, for `health` (a format string over the match's groupdict) to answer 200
    (over https with `health_tls`: the test's CA, and its client certificate for mutual TLS)."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    _unwind_on_sigterm()  # before the child exists: no window in which a SIGTERM orphans it
    popen = subprocess.Popen(TRACEFIX + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=full_env, cwd=cwd)
    _STARTED.append(popen)
    lines: list[str] = []
    found: list[re.Match] = []
    seen = threading.Event()

    def pump() -> None:
        for line in popen.stdout:  # keep draining so the child never blocks on a full pipe
            lines.append(line)
            if not found:
                m = re.search(ready, line)
                if m:
                    found.append(m)
                    seen.set()
        seen.set()

    threading.Thread(target=pump, daemon=True).start()
    if not seen.wait(timeout) or not found:
        popen.kill()
        raise RuntimeError(f"{args[0]} did not become ready:\n{''.join(lines)}")
    proc = Proc(popen, found[0], lines)
    if health:
        url = health.format(**found[0].groupdict())
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2, context=health_tls) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or popen.poll() is not None:
                proc.stop()
                raise RuntimeError(f"{url} never answered:\n{proc.output()}")
            time.sleep(0.05)
    return proc


SIM_READY = r"serving on (?P<base_url>http://127\.0\.0\.1:(?P<port>\d+)/v1)"
SERVE_READY = r"http=(?P<http>https?://127\.0\.0\.1:\d+) grpc=(?P<grpc>127\.0\.0\.1:\d+)"


def start_sim(*extra: str, **kw) -> Proc:
    return start(["sim", "--port", "0", *extra], SIM_READY,
                 health="http://127.0.0.1:{port}/healthz", **kw)


WORKER_READY = r"tracefix worker: (?P<name>\S+) takes (?P<kinds>\S+) jobs from (?P<server>\S+)"


def start_worker(server: str, *extra: str, **kw) -> Proc:
    return start(["worker", "--server", server, "--poll", "0.2", *extra], WORKER_READY, **kw)


def start_serve(db: str | Path, *extra: str, **kw) -> Proc:
    return start(["serve", "--http-port", "0", "--grpc-port", "0", "--db", str(db), *extra],
                 SERVE_READY, health="{http}/healthz", **kw)


def wait_for(read, what: str, timeout: float = 60.0):
    """`read()`'s first truthy value, polled every 0.2 s; AssertionError naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.2)
