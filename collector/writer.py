"""The single writer: one thread owns the store's write connection.

Receivers hand it decoded batches (`submit_batch`) and get a future that resolves once the
batch's transaction committed — only then is the export acknowledged. Consecutive batches
are merged into one transaction (one Arrow insert per table; while an export admitted by a
receiver is still decoding it waits for its batch, up to `linger_s`: collector.arrivals). If that transaction fails,
each request is retried alone so one bad request cannot sink its neighbours, and a request
the database refuses for what it holds is cut in halves until the refused spans are found
(collector.refused_spans): the others are stored, the refused ones reported (the future's
`Refused` list). Other writes
(feedback, job and alert state, analysis results) run through `call` on the same thread.

The queue is bounded by spans waiting: a full queue raises `QueueFull` at once, and the
request goes to the durable spool (tracefix.collector.spool) or, when that is spent or off,
is answered 429 / RESOURCE_EXHAUSTED so the exporter retries later (back-pressure instead of
unbounded memory).

What DuckDB has committed but not checkpointed stays in its memory, so under a memory limit
the writer keeps the WAL within the store's budget (`Store.wal_budget_bytes`): a transaction
takes at most half of it, and once the WAL reaches it the writer checkpoints before the next
one. Should DuckDB give up on the database anyway (a FATAL error), the writer opens it again
(the WAL replays) and writes the batch once more; `fault` says why the store cannot write
while it cannot (`/healthz` answers 503 with it).
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable

from tracefix.collector.arrivals import Arrivals
from tracefix.collector.normalize import Batch
from tracefix.collector.refused_spans import Refused as Refused  # the receivers' and the spool's name for it
from tracefix.collector.refused_spans import is_data_error as is_data_error
from tracefix.collector.refused_spans import store_isolating
from tracefix.collector.store import Store
from tracefix.collector.store.connection import is_invalidated
from tracefix.collector.threadnames import name_os_thread
from tracefix.errors import TracefixError

log = logging.getLogger("tracefix.collector.writer")


class QueueFull(TracefixError, RuntimeError):
    http_status = 429


class WriterClosed(TracefixError, RuntimeError):
    http_status = 503  # shutting down: a client retries elsewhere or later


class StoreUnavailable(TracefixError, RuntimeError):
    http_status = 503  # the database cannot be written now (`Writer.fault`): retry later


# What a refused exporter is told to wait (gRPC RetryInfo, HTTP Retry-After): long enough for the
# writer to drain what is pending, never so short that retries hammer a busy collector, never so
# long that an exporter's own timeout runs out first (the OTel SDKs give up after ~10 s).
MIN_RETRY_DELAY_S = 0.5
MAX_RETRY_DELAY_S = 10.0
# Assumed until the first transaction is timed: a conservative rate for one DuckDB writer.
INITIAL_DRAIN_SPANS_PER_S = 2000.0


def retry_delay_s(pending_spans: int, drain_spans_per_s: float) -> float:
    """Seconds the writer needs to write `pending_spans` at `drain_spans_per_s`, bounded to
    [MIN_RETRY_DELAY_S, MAX_RETRY_DELAY_S]: the one rule for both receivers' back-pressure."""
    needed = pending_spans / drain_spans_per_s if drain_spans_per_s > 0 else MAX_RETRY_DELAY_S
    return min(MAX_RETRY_DELAY_S, max(MIN_RETRY_DELAY_S, needed))


class Writer:
    def __init__(self, store: Store, *, max_pending_spans: int = 50_000, max_pending_bytes: int = 256 << 20,
                 max_transaction_spans: int = 20_000, linger_s: float = 0.05, linger_spans: int = 3000,
                 on_created: Callable[[dict], None] | None = None, ingest_options: dict | None = None,
                 on_commit: Callable[[float], None] | None = None):
        self.store = store
        # checkpoint before a transaction once the WAL is this large; a transaction merges
        # requests up to half of it (None: no memory limit of ours, no bound)
        self.wal_budget_bytes = store.wal_budget_bytes()
        self.max_transaction_bytes = self.wal_budget_bytes // 2 if self.wal_budget_bytes else None
        self.fault: str | None = None  # why the store cannot write, while it cannot
        self.reopens = 0  # times DuckDB gave up on the database and the writer opened it again
        self._must_reopen = False  # the last reopen failed: the next write tries again first
        self.max_pending_spans = max_pending_spans
        self.max_pending_bytes = max_pending_bytes
        self._pending_bytes = 0
        # an ack waits up to linger_s to share a transaction, only while another export decodes
        self.linger_s = linger_s
        self.linger_spans = linger_spans
        self.max_transaction_spans = max_transaction_spans
        self.on_created = on_created
        self.on_commit = on_commit  # told the seconds each span transaction took (collector.metrics)
        self.ingest_options = ingest_options or {}
        self._items: deque = deque()
        self._pending_spans = 0
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # the writer thread waits on it for work
        self._room = threading.Condition(lock)  # producers in wait_for_room wait on it
        self.arrivals = Arrivals(self._cond)
        self.expecting = self.arrivals.expecting  # receivers: `with writer.expecting(): decode, submit`
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="tracefix-writer", daemon=True)
        self.committed_spans = 0
        self.transactions = 0
        # spans written per second, a moving average over recent transactions (retry_delay_s)
        self.drain_spans_per_s = INITIAL_DRAIN_SPANS_PER_S

    def start(self) -> "Writer":
        self._thread.start()
        return self

    # --- producers ---------------------------------------------------------------------------
    def submit_batch(self, batch: Batch) -> Future:
        fut: Future = Future()
        n = batch.records  # spans, or log records and metric points (otlp_signals)
        with self._cond:
            if self._closing:
                raise WriterClosed("the collector is shutting down")
            # an oversized single request is still admitted when the queue is empty, so it can
            # never be refused forever
            if self._pending_spans and (self._pending_spans + n > self.max_pending_spans
                                        or self._pending_bytes + batch.wire_bytes > self.max_pending_bytes):
                self.arrivals.refused()
                raise QueueFull(f"{self._pending_spans} spans ({self._pending_bytes >> 20} MiB) waiting to be written")
            self._pending_spans += n
            self._pending_bytes += batch.wire_bytes
            self._items.append(("batch", batch, fut))
            self._cond.notify()
        return fut

    def call(self, fn: Callable[[Store], Any]) -> Future:
        """Run fn(store) on the writer thread (its own transaction); the future holds its result."""
        fut: Future = Future()
        with self._cond:
            if self._closing:
                raise WriterClosed("the collector is shutting down")
            self._items.append(("call", fn, fut))
            self._cond.notify()
        return fut

    def run(self, fn: Callable[[Store], Any], timeout: float | None = 60.0) -> Any:
        return self.call(fn).result(timeout)

    def wait_for_room(self, spans: int, timeout: float) -> None:
        """Wait (up to `timeout`) until a batch of `spans` would be admitted: the spool's drain
        feeds the writer this way instead of polling."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (self._pending_spans and self._pending_spans + spans > self.max_pending_spans
                   and not self._closing and (left := deadline - time.monotonic()) > 0):
                self._room.wait(left)

    @property
    def pending_spans(self) -> int:
        return self._pending_spans

    def retry_delay_s(self) -> float:
        """How long a refused exporter should wait before it retries (see `retry_delay_s`)."""
        return retry_delay_s(self._pending_spans, self.drain_spans_per_s)

    # --- the writer thread ---------------------------------------------------------------------
    def _take(self) -> list:
        with self._cond:
            while not self._items and not self._closing:
                self._cond.wait()
            if not self._items:
                return []
            first = self._items.popleft()
            taken = [first]
            if first[0] == "batch":
                total, size = first[1].records, first[1].wire_bytes
                deadline = time.monotonic() + self.linger_s
                while total < self.max_transaction_spans and not self._transaction_full(size):
                    if self._items and self._items[0][0] == "batch":
                        item = self._items.popleft()
                        total += item[1].records
                        size += item[1].wire_bytes
                        taken.append(item)
                        continue
                    left = deadline - time.monotonic()
                    if (self._items or self._closing or not self.arrivals.worth_waiting() or total >= self.linger_spans
                            or left <= 0 or not self._room_for(total // len(taken), size // len(taken))):
                        break  # (the last: no batch of the usual size could be admitted, so none can come)
                    self._cond.wait(left)
            return taken

    def _room_for(self, spans: int, size: int) -> bool:  # the batches taken count as pending
        return self._pending_spans + spans <= self.max_pending_spans and self._pending_bytes + size <= self.max_pending_bytes

    def _transaction_full(self, wire_bytes: int) -> bool:
        return self.max_transaction_bytes is not None and wire_bytes >= self.max_transaction_bytes

    def _run(self) -> None:
        name_os_thread("tf-writer")
        while True:
            taken = self._take()
            if not taken:
                return
            if taken[0][0] == "call":
                _, fn, fut = taken[0]
                try:
                    self._usable_store()
                    fut.set_result(fn(self.store))
                except BaseException as exc:  # the caller sees the error; the writer lives on
                    if is_invalidated(exc) and self.store.can_reopen:
                        self._reopen(exc)
                    fut.set_exception(exc)
                continue
            self._write_batches(taken)

    # --- the store's health ------------------------------------------------------------------
    def reopen_soon(self, cause: BaseException) -> None:
        """Another thread saw DuckDB give up on the database (the background checkpoint): the
        writer thread, which owns the connection, opens it again."""
        log.error("DuckDB gave up on the database (%s); opening it again", _first_line(cause))
        self._must_reopen = True
        try:
            self.call(lambda store: None)  # wakes the writer, which reopens before running it
        except WriterClosed:
            pass

    def _reopen(self, cause: BaseException | None) -> bool:
        """Open the store again after `cause`; False, with `fault` saying why, when that fails
        too (the next write tries again)."""
        if cause is not None:
            log.error("DuckDB gave up on the database (%s); opening it again", _first_line(cause))
        try:
            self.store.reopen()
        except Exception as exc:
            self._must_reopen = True
            self.fault = self._said(f"the database could not be opened again: {_first_line(exc)}")
            log.error("%s", self.fault)
            return False
        self._must_reopen = False
        self.reopens += 1
        log.warning("the database is open again (WAL replayed); writing goes on")
        return True

    def _said(self, reason: str) -> str:
        """`reason` fit for /healthz, which anyone may read: the store's path left out (DuckDB
        names its files in its errors; the store is known by its identity only)."""
        return reason.replace(str(self.store.path), "<store>")

    def _usable_store(self) -> None:
        """Raise StoreUnavailable while a reopen is due and fails."""
        if self._must_reopen and not self._reopen(None):
            raise StoreUnavailable(self.fault)

    def _keep_wal_within_budget(self) -> None:
        """Checkpoint here, between transactions (no write transaction of ours is open), once
        the WAL reached the budget: the background checkpoints find the writer mid-transaction
        whenever exports arrive back to back, and then never run."""
        if self.wal_budget_bytes is None or self.store.wal_bytes() < self.wal_budget_bytes:
            return
        try:
            self.store.checkpoint_beside(self.store.con)
        except Exception as exc:
            if is_invalidated(exc) and self.store.can_reopen:
                self._reopen(exc)
            else:
                log.warning("checkpoint at a WAL of %d MB failed: %s", self.store.wal_bytes() >> 20, exc)

    def _ingest(self, batch: Batch) -> dict:
        """`store.ingest`, and once more after opening the store again when DuckDB gave up on
        it: the batch is not acknowledged yet, and storing it twice stores it once."""
        self._usable_store()
        try:
            return self.store.ingest(batch, **self.ingest_options)
        except Exception as exc:
            if not (is_invalidated(exc) and self.store.can_reopen):
                raise
            if not self._reopen(exc):
                raise StoreUnavailable(self.fault) from exc
        return self.store.ingest(batch, **self.ingest_options)

    def _write_batches(self, taken: list) -> None:
        n_spans = sum(b.records for _, b, _ in taken)
        self._keep_wal_within_budget()
        started = time.perf_counter()
        results: list[tuple[Future, list[Refused] | None, BaseException | None]] = []
        try:
            if len(taken) == 1:
                merged = taken[0][1]
            else:
                merged = Batch()
                for _, b, _ in taken:
                    merged.extend(b)
            created = self._ingest(merged)
            results = [(fut, [], None) for _, _, fut in taken]
            self._announce(created)
        except Exception as exc:
            # each request alone (one that broke the merged transaction must not sink the
            # others), a lone request straight to isolating its refused spans
            failed = exc if len(taken) == 1 else None
            for _, b, fut in taken:
                try:
                    results.append((fut, self._ingest_isolating(b, failed), None))
                except Exception as one_exc:
                    log.warning("a batch of %d spans failed: %s", b.span_count, one_exc)
                    results.append((fut, None, one_exc))
        took = time.perf_counter() - started
        if self.on_commit:
            self.on_commit(took)
        if took > 0:  # recent transactions weigh most: the rate follows the load and the disk
            self.drain_spans_per_s = 0.7 * self.drain_spans_per_s + 0.3 * (n_spans / took)
        with self._cond:
            self._pending_spans -= n_spans
            self._pending_bytes -= sum(b.wire_bytes for _, b, _ in taken)
            self._room.notify_all()
        self.transactions += 1
        failed = next((exc for _, _, exc in results if exc is not None), None)
        if failed is None:
            self.fault = None
        elif not isinstance(failed, StoreUnavailable):  # that one's fault says it already
            self.fault = self._said(f"writing spans failed: {_first_line(failed)}")
        for (_, b, _), (fut, refused, exc) in zip(taken, results):
            if exc is None:
                self.committed_spans += b.records - sum(n for n, _ in refused)
                fut.set_result(refused)
            else:
                fut.set_exception(exc)

    def _ingest_isolating(self, batch: Batch, failed: BaseException | None = None) -> list[Refused]:
        """Store `batch`, leaving out only the spans the database refuses (refused_spans)."""
        return store_isolating(batch, lambda part: self._announce(self._ingest(part)), failed)

    def _announce(self, created: dict | None) -> None:
        if created and self.on_created and any(created.values()):
            try:
                self.on_created(created)
            except Exception:  # a notification failure must not fail the committed write
                log.exception("on_created hook failed")

    # --- shutdown ----------------------------------------------------------------------------
    def close(self, timeout: float = 30.0) -> None:
        """Refuse new work, write everything queued, stop the thread."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            self._room.notify_all()
        deadline = time.monotonic() + timeout
        self._thread.join(max(0.0, deadline - time.monotonic()))


def _first_line(exc: BaseException) -> str:
    """An error in one line (DuckDB's add paragraphs of advice)."""
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:300]
