"""Run `tracefix VERB ...` as a child process and wait until it answers.

`tracefix demo` runs the scripted LLM server and a collector this way, and `tracefix replay
--db FILE` runs a collector for as long as its replays need one (their children export
spans over OTLP, and the collector is the only writer of the file). A server prints one
line with its address once it listens (docs/contracts.md §6); we wait for that line, then
for its /healthz. A collector that answers 503 "unhealthy" (its store cannot write) ends the
wait at once, with its reason.
"""
from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tracefix.collector.access import AccessError, collector_health, refuse_unhealthy
from tracefix.errors import TracefixError

SERVE_READY = re.compile(r"tracefix serve: http=(\S+) grpc=\S+")


class ProcessDidNotStart(TracefixError, RuntimeError):
    pass


class TracefixProcess:
    """A `tracefix ARGS` subprocess whose first output line matching `ready` gives its
    address (group 1). Output goes to `log` when given; the last lines are kept either way
    for error messages."""

    def __init__(self, name: str, args: list[str], ready: re.Pattern, *, log: Path | None = None,
                 env: dict | None = None):
        self.name = name
        self.log = log
        # A process group of its own: whatever it starts (replay children inside serve) can be
        # stopped with it, even if it exits without stopping them.
        self.popen = subprocess.Popen([sys.executable, "-m", "tracefix.cli", *args], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                      env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"})
        self._recent: collections.deque[str] = collections.deque(maxlen=200)
        self._found: list[re.Match] = []
        self._seen = threading.Event()
        threading.Thread(target=self._pump, args=(ready,), name=f"{name}-output", daemon=True).start()

    def _pump(self, ready: re.Pattern) -> None:
        out = self.log.open("w", encoding="utf-8") if self.log else None
        try:
            for line in self.popen.stdout:  # keep draining so the child never blocks on a full pipe
                self._recent.append(line)
                if out:
                    out.write(line)
                    out.flush()
                if not self._found:
                    m = ready.search(line)
                    if m:
                        self._found.append(m)
                        self._seen.set()
        finally:
            if out:
                out.close()
            self._seen.set()

    def address(self, timeout: float = 90.0) -> str:
        """The address it printed, once its /healthz answers."""
        where = f" (see {self.log})" if self.log else ""
        if not self._seen.wait(timeout) or not self._found:
            raise ProcessDidNotStart(f"{self.name} did not start{where}:\n{self.tail()}")
        url = self._found[0].group(1)
        base = url.rsplit("/v1", 1)[0]
        health = base + "/healthz"
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(health, timeout=2) as r:
                    if r.status == 200:
                        return url
            except urllib.error.HTTPError as exc:  # 503: a collector whose store cannot write says why
                answer = collector_health(base, timeout=2) if exc.code == 503 else None
                try:
                    refuse_unhealthy(base, answer or {})
                except AccessError as unhealthy:
                    raise ProcessDidNotStart(f"{self.name} started, but {unhealthy}{where}:\n{self.tail()}") from None
            except OSError:
                pass
            if time.monotonic() > deadline or self.popen.poll() is not None:
                raise ProcessDidNotStart(f"{self.name} never answered {health}{where}:\n{self.tail()}")
            time.sleep(0.05)

    def tail(self, lines: int = 15) -> str:
        return "".join(list(self._recent)[-lines:]).rstrip("\n")

    def stop(self, timeout: float = 15.0) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        try:  # what it left behind in its group
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@contextmanager
def temporary_collector(db: str | os.PathLike, *extra_args: str, timeout: float = 60.0) -> Iterator[str]:
    """`tracefix serve --db DB` on free loopback ports; yields its HTTP base URL and stops it
    (SIGTERM: it drains and checkpoints) when the block ends. It is private to this machine's
    loopback, so it ignores the TLS settings of a `tracefix serve` in the environment, which
    its clients (replay children) would not know how to trust."""
    no_tls = {"TRACEFIX_TLS_CERT": "", "TRACEFIX_TLS_KEY": "", "TRACEFIX_TLS_CLIENT_CA": ""}  # empty: unset for click
    serve = TracefixProcess("tracefix serve", ["serve", "--db", str(db), "--http-port", "0", "--grpc-port", "0",
                                               *extra_args], SERVE_READY, env=no_tls)
    try:
        yield serve.address(timeout)
    finally:
        serve.stop()
