"""tracefix's hand-written spool against a spool on SQLite (WAL, synchronous=FULL), same requests.

    .venv/bin/python bench/spool_sqlite.py [--exporters 6] [--sessions 12] [--steps 100] [--repeat 5] [--dir DIR]

The request stream is the one `bench/ingest.py`'s spilling lines send (its `build_bodies`:
`--exporters` threads, each appending its OTLP/HTTP protobuf requests one after another and
waiting for each acknowledgement, as an exporter waits for its 200). A drain thread reads
every request back in order and marks it committed, as `Ingest`'s drain does once the writer
has stored it (here nothing is decoded or stored: only the spool is timed). Timed: from the
first append to the last request committed, then `close()`. Printed: each run's seconds for
both, their medians and the ratio SQLite / ours (> 1: ours is faster).

`SqliteSpool` exists for this measurement only: the interface of `tracefix.collector.spool.Spool`
(open, append -> Future resolved once durable, next, taken, committed, close, the gauges)
over one table in a SQLite file, with the same group commit (one appending thread inserts
every waiting request in one transaction, so one WAL fsync acknowledges them all); committed
rows are deleted in the next transaction (or within 50 ms when idle), as our spool deletes a
segment file once all of it is committed. Neither side keeps decoded batches in memory here
(`memo_bytes=0` for ours): the drain reads every body back from disk.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import build_bodies  # noqa: E402

from tracefix.collector.spool import Spool, SpoolFull, SpooledRequest  # noqa: E402
from tracefix.collector.spool.segments import Position  # noqa: E402
from tracefix.collector.writer import WriterClosed  # noqa: E402


class SqliteSpool:
    """A durable FIFO of requests in one SQLite table (WAL, synchronous=FULL)."""

    def __init__(self, directory: str | os.PathLike, *, max_bytes: int):
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self._cond = threading.Condition()
        self._queue: list[tuple[SpooledRequest, Future]] = []
        self._to_delete: list[int] = []
        self._spans: dict[int, int] = {}  # id -> spans of every durable row not yet committed
        self._sizes: dict[int, int] = {}
        self._reserved = 0
        self._next_id = 1
        self._durable = 0  # highest id durable
        self._read = 0  # highest id handed to the drain
        self._unread = 0
        self._closing = False
        self._thread = threading.Thread(target=self._append_loop, name="sqlite-spool", daemon=True)
        self._reader: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.directory / "spool.sqlite", isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        return db

    def open(self) -> "SqliteSpool":
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._db = self._connect()
        self._db.execute("CREATE TABLE IF NOT EXISTS requests (id INTEGER PRIMARY KEY, protocol TEXT, "
                         "content_type TEXT, content_encoding TEXT, spans INTEGER, body BLOB)")
        for id_, spans, size in self._db.execute("SELECT id, spans, length(body) FROM requests ORDER BY id"):
            self._spans[id_], self._sizes[id_] = spans, size
            self._next_id = self._durable = id_ + 1
        self._unread = len(self._spans)
        self._thread.start()
        return self

    def append(self, request: SpooledRequest) -> Future:
        fut: Future = Future()
        with self._cond:
            if self._closing:
                raise WriterClosed("closing")
            if self.bytes + len(request.body) > self.max_bytes:
                raise SpoolFull("budget spent")
            self._queue.append((request, fut))
            self._reserved += len(request.body)
            self._unread += 1
            self._cond.notify_all()
        return fut

    @property
    def bytes(self) -> int:
        with self._cond:
            return sum(self._sizes.values()) + self._reserved

    @property
    def pending_requests(self) -> int:
        with self._cond:
            return len(self._spans) + len(self._queue)

    @property
    def pending_spans(self) -> int:
        with self._cond:
            return sum(self._spans.values()) + sum(r.spans for r, _ in self._queue)

    @property
    def unread(self) -> int:
        return self._unread

    def _append_loop(self) -> None:
        while True:
            with self._cond:
                if not self._queue and not self._closing:
                    self._cond.wait(0.05)  # committed rows wait up to this for a transaction
                if not self._queue and not self._to_delete:
                    if self._closing:
                        return
                    continue
                taken, self._queue = self._queue, []
                deletes, self._to_delete = self._to_delete, []
                first = self._next_id
                self._next_id += len(taken)
            rows = [(first + i, r.protocol, r.content_type, r.content_encoding, r.spans, r.body)
                    for i, (r, _) in enumerate(taken)]
            self._db.execute("BEGIN")
            self._db.executemany("INSERT INTO requests VALUES (?, ?, ?, ?, ?, ?)", rows)
            self._db.executemany("DELETE FROM requests WHERE id = ?", [(i,) for i in deletes])
            self._db.execute("COMMIT")  # synchronous=FULL: the WAL is fsynced before this returns
            with self._cond:
                for (id_, *_, spans, body) in rows:
                    self._spans[id_], self._sizes[id_] = spans, len(body)
                self._reserved -= sum(len(r[-1]) for r in rows)
                self._durable = first + len(taken)
                self._cond.notify_all()
            for _, fut in taken:
                fut.set_result([])

    def next(self, timeout: float) -> tuple[Position, SpooledRequest] | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (want := min((i for i in self._spans if self._read < i < self._durable), default=0)):
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            self._read = want
        if self._reader is None:
            self._reader = self._connect()
        protocol, ctype, encoding, spans, body = self._reader.execute(
            "SELECT protocol, content_type, content_encoding, spans, body FROM requests WHERE id = ?",
            (want,)).fetchone()
        return Position(want, 0, spans), SpooledRequest(protocol, ctype, encoding, body, spans)

    def taken(self) -> None:
        with self._cond:
            self._unread -= 1

    def committed(self, position: Position) -> None:
        with self._cond:
            self._spans.pop(position.seq, None)
            self._sizes.pop(position.seq, None)
            self._to_delete.append(position.seq)

    def close(self, timeout: float = 30.0) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)
        if self._reader is not None:
            self._reader.close()
        self._db.close()


def time_spool(spool, streams: list[list[tuple[bytes, int]]]) -> float:
    """Seconds from the first append to the last request committed and the spool closed."""
    total = sum(len(s) for s in streams)
    spool.open()
    t0 = time.perf_counter()

    def export(stream: list[tuple[bytes, int]]) -> None:
        for body, spans in stream:
            spool.append(SpooledRequest("http", "application/x-protobuf", None, body, spans)).result(120)

    def drain() -> None:
        done = 0
        while done < total:
            found = spool.next(timeout=0.5)
            if found is None:
                continue
            position, request = found
            spool.taken()
            spool.committed(position)
            done += 1

    threads = [threading.Thread(target=export, args=(s,)) for s in streams] + [threading.Thread(target=drain)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spool.close()
    elapsed = time.perf_counter() - t0
    assert spool.pending_requests == 0, spool.pending_requests
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exporters", type=int, default=6)
    ap.add_argument("--sessions", type=int, default=12, help="requests per exporter (one session each)")
    ap.add_argument("--steps", type=int, default=100, help="steps per session (3 spans each)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where the spools are made (default: the system's temp dir); "
                                                "put it on the disk a spool would use")
    args = ap.parse_args()
    streams = [[(body, n) for body, n in build_bodies(w, args.sessions, args.steps)] for w in range(args.exporters)]
    n = sum(len(s) for s in streams)
    mib = sum(len(b) for s in streams for b, _ in s) / 2**20
    print(f"{n} requests, {mib:.1f} MiB, from {args.exporters} exporter threads")
    ours, sqlite = [], []
    for i in range(args.repeat):
        for label, times, make in (("ours", ours, lambda d: Spool(d, max_bytes=4 << 30, memo_bytes=0)),
                                   ("sqlite", sqlite, lambda d: SqliteSpool(d, max_bytes=4 << 30))):
            where = tempfile.mkdtemp(prefix="tracefix-spool-bench-", dir=args.dir)
            try:
                times.append(time_spool(make(Path(where) / "spool"), streams))
            finally:
                shutil.rmtree(where)
        print(f"run {i + 1}: ours {ours[-1]:.3f} s, sqlite {sqlite[-1]:.3f} s, ratio {sqlite[-1] / ours[-1]:.2f}")
    o, s = statistics.median(ours), statistics.median(sqlite)
    print(f"median of {args.repeat}: ours {o:.3f} s ({mib / o:,.0f} MiB/s), SQLite WAL synchronous=FULL {s:.3f} s "
          f"({mib / s:,.0f} MiB/s); ratio SQLite/ours {s / o:.2f} (median of the runs' own "
          f"{statistics.median(b / a for a, b in zip(ours, sqlite)):.2f}; load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
