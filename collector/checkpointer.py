"""Checkpoints of `tracefix serve`'s database, on their own thread.

DuckDB checkpoints inside the commit that pushes the WAL past `checkpoint_threshold`: that
commit (and every export waiting on it) then waits for the whole checkpoint, ~0.1 s per
16 MB, and the writer's core does the compression while the other core idles. In the
server, commits leave the checkpoints to this thread instead: when the WAL exceeds
TRACEFIX_CHECKPOINT_THRESHOLD (default 16MB, DuckDB's own) it runs CHECKPOINT on its own
cursor while the writer goes on. The connection keeps a commit-time threshold 16x larger
(at least 256 MB) as a safety net should this thread fall behind.
"""
from __future__ import annotations

import logging
import threading

from tracefix.collector.store import Store, checkpoint_threshold_bytes
from tracefix.collector.threadnames import name_os_thread

log = logging.getLogger("tracefix.collector")


def commit_time_threshold() -> str:
    """DuckDB's checkpoint_threshold for a store whose checkpoints this module runs."""
    return f"{max(16 * checkpoint_threshold_bytes(), 256 << 20)}B"


class Checkpointer:
    def __init__(self, store: Store, *, interval_s: float = 0.1):
        self.store = store
        self.threshold = checkpoint_threshold_bytes()
        self.interval_s = interval_s
        self.checkpoints = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tracefix-checkpoint", daemon=True)

    def start(self) -> "Checkpointer":
        self._thread.start()
        return self

    def _run(self) -> None:
        name_os_thread("tf-checkpoint")
        cursor = self.store.con.cursor()
        try:
            while not self._stop.wait(self.interval_s):
                if self.store.wal_bytes() < self.threshold:
                    continue
                try:
                    self.store.checkpoint_beside(cursor)
                    self.checkpoints += 1
                except Exception as exc:  # e.g. a conflicting transaction: the next tick retries
                    log.debug("background checkpoint skipped: %s", exc)
        finally:
            cursor.close()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
