"""Checkpoints of `tracefix serve`'s database, on their own thread.

DuckDB checkpoints inside the commit that pushes the WAL past `checkpoint_threshold`: that
commit (and every export waiting on it) then waits for the whole checkpoint, ~0.1 s per
16 MB, and the writer's core does the compression while the other core idles. In the
server, commits leave the checkpoints to this thread instead: when the WAL exceeds
TRACEFIX_CHECKPOINT_THRESHOLD (default 32MB, `BACKGROUND_THRESHOLD`; at most half the
writer's budget, so less under a small memory limit) it runs CHECKPOINT on its own cursor
while the writer goes on. DuckDB refuses a CHECKPOINT
while another write transaction is open, so under a steady stream of exports this thread
seldom gets one in: the writer then checkpoints itself between transactions once the WAL
reaches the store's budget (tracefix.collector.writer). DuckDB's own commit-time checkpoint is
left a threshold far above both, for a checkpoint inside a commit runs with the store's small
memory limit, not the larger one `Store.checkpoint_beside` gives it.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

from tracefix.collector.store import Store, checkpoint_threshold_bytes
from tracefix.collector.store.connection import is_invalidated, memory_limit_setting, size_bytes
from tracefix.collector.threadnames import name_os_thread

log = logging.getLogger("tracefix.collector")

# Twice DuckDB's 16 MB: a checkpoint rewrites the last row group of every table it writes to
# whole (up to 122,880 rows), so in a stream of exports half as many checkpoints are ~12 % less
# of the server's CPU per span (bench/ingest.py, 130k spans a run). Within the writer's budget
# either way: what waits for a checkpoint is bounded by the writer (`wal_budget_bytes`), not this.
BACKGROUND_THRESHOLD = "32MB"


def commit_time_threshold(memory_limit: str | None = None) -> str:
    """DuckDB's checkpoint_threshold for a store whose checkpoints this module and the writer
    run: a net should both fall behind, above the writer's budget (a share of `memory_limit`)."""
    limit = memory_limit_setting(memory_limit)
    floor = size_bytes(limit, "TRACEFIX_DB_MEMORY_LIMIT") if limit else 0
    return f"{max(16 * checkpoint_threshold_bytes(), 256 << 20, floor)}B"


class Checkpointer:
    """`on_invalidated`: told when DuckDB gave up on the database during a checkpoint (the
    writer opens it again: `Writer.reopen_soon`)."""

    def __init__(self, store: Store, *, interval_s: float = 0.1,
                 on_invalidated: Callable[[BaseException], None] | None = None):
        self.store = store
        budget = store.wal_budget_bytes()
        wanted = checkpoint_threshold_bytes(BACKGROUND_THRESHOLD)
        self.threshold = min(wanted, budget // 2) if budget else wanted
        self.interval_s = interval_s
        self.on_invalidated = on_invalidated
        self.checkpoints = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tracefix-checkpoint", daemon=True)

    def start(self) -> "Checkpointer":
        self._thread.start()
        return self

    def _run(self) -> None:
        name_os_thread("tf-checkpoint")
        cursor, generation = None, -1
        try:
            while not self._stop.wait(self.interval_s):
                if self.store.wal_bytes() < self.threshold:
                    continue
                try:
                    if generation != self.store.generation:  # the store was opened again
                        if cursor is not None:
                            cursor.close()
                        cursor, generation = self.store.con.cursor(), self.store.generation
                    self.store.checkpoint_beside(cursor)
                    self.checkpoints += 1
                except Exception as exc:  # e.g. a conflicting transaction: the next tick retries
                    if is_invalidated(exc) and generation == self.store.generation and self.on_invalidated:
                        self.on_invalidated(exc)
                        generation = -1  # a cursor of the reopened store next time
                    log.debug("background checkpoint skipped: %s", exc)
        finally:
            if cursor is not None:
                cursor.close()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
