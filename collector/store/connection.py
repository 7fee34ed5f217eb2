"""Opening the database behind a store, and the part of `Store` that owns the connection:
migrations on open, per-thread read cursors, transactions, checkpoints."""
from __future__ import annotations

import os
import re
import threading
import uuid
from pathlib import Path

import duckdb

from tracefix.collector import db_path
from tracefix.collector.keyset import KeySet
from tracefix.collector.store import lake, schema
from tracefix.collector.store.sql import Transaction, scalar


def checkpoint_threshold_bytes() -> int:
    """TRACEFIX_CHECKPOINT_THRESHOLD ("16MB", "1GiB", "20000000") in bytes; DuckDB's 16 MB default."""
    text = (os.environ.get("TRACEFIX_CHECKPOINT_THRESHOLD") or "16MB").strip().upper().replace(" ", "")
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(B|KB|MB|GB|KIB|MIB|GIB)?", text)
    if not match:
        raise ValueError(f"TRACEFIX_CHECKPOINT_THRESHOLD={text!r}: use a size such as 16MB")
    unit = {None: 1, "B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3}
    return int(float(match.group(1)) * unit[match.group(2)])


def connect_db(path: str | os.PathLike | None = None, *, read_only: bool = False, threads: int | None = None,
               checkpoint_threshold: str | None = None, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """Open the database behind a store. `:memory:` works for throwaway stores. `threads`
    (or TRACEFIX_DB_THREADS) caps DuckDB's worker threads; `checkpoint_threshold` (or
    TRACEFIX_CHECKPOINT_THRESHOLD) is the WAL size at which a commit checkpoints;
    TRACEFIX_DB_MEMORY_LIMIT (else `memory_limit`, else DuckDB's 80% of RAM) bounds DuckDB's
    memory, its cache of blocks read included."""
    target = db_path(path)
    if target != ":memory:":
        Path(target).parent.mkdir(parents=True, exist_ok=True)
    threads = threads or int(os.environ.get("TRACEFIX_DB_THREADS") or 0) or None
    config: dict[str, str | bool | int | float | list[str]] = {"threads": threads} if threads else {}
    threshold = checkpoint_threshold or os.environ.get("TRACEFIX_CHECKPOINT_THRESHOLD")
    if threshold:
        config["checkpoint_threshold"] = threshold
    memory_limit = os.environ.get("TRACEFIX_DB_MEMORY_LIMIT") or memory_limit
    if memory_limit:
        config["memory_limit"] = memory_limit
    return duckdb.connect(target, read_only=read_only, config=config)


class StoreConnection:
    """One connection (the writer's) and a cursor per reading thread.

    `path` is a DuckDB file, or `ducklake:postgres:...` for a lake several collectors write
    (tracefix.collector.store.lake; `data_path` says where its files go)."""

    _message_keys: KeySet | None  # the keys of the stored messages, loaded by the first write of messages
    lock: lake.LakeLock | None  # on a lake: the write lock every transaction holds

    def __init__(self, path: str | os.PathLike | None = None, *, read_only: bool = False,
                 threads: int | None = None, checkpoint_threshold: str | None = None,
                 memory_limit: str | None = None, data_path: str | None = None):
        self.lock = None
        self._local = threading.local()
        self._message_keys = None
        # the tool-call ids an LLM answer names, by message key: a key is its content's hash,
        # so what it names never changes (see Pages._paged_document)
        self._call_ids: dict[int, tuple[str, ...]] = {}
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._cursors_lock = threading.Lock()
        if lake.is_lake(path):
            self.path = str(path)
            # names this store in the jobs it claims; its lock says whether it still runs
            self.instance = f"collector-{uuid.uuid4().hex[:12]}"
            self.lock = lake.LakeLock(self.path, self.instance)
            # the first ATTACH of a new lake creates DuckLake's catalog tables: one collector at a time
            self.con = lake.connect_lake(threads=threads, memory_limit=memory_limit)
            try:
                self.lock.acquire()
                try:
                    lake.attach_lake(self.con, self.path, data_path)
                    if not read_only:
                        schema.migrate_lake(self.con)
                finally:
                    self.lock.release()
            except BaseException:
                self.lock.close()
                raise
            return
        self.path = db_path(path)
        self.instance = "collector"
        self.con = connect_db(self.path, read_only=read_only, threads=threads,
                              checkpoint_threshold=checkpoint_threshold, memory_limit=memory_limit)
        if not read_only:
            self.migrate()

    @property
    def shared(self) -> bool:
        """Whether other processes write this store too (a lake): then nothing this process
        remembers of the stored rows is the whole truth."""
        return self.lock is not None

    # --- lifecycle -------------------------------------------------------------------------
    def migrate(self) -> int:
        if self.lock is None:
            return schema.migrate(self.con)
        self.lock.acquire()
        try:
            return schema.migrate_lake(self.con)
        finally:
            self.lock.release()

    def compact(self, older_than_s: float = 3600.0) -> dict:
        """Merge a lake's small files and expire its old snapshots (`tracefix store compact`);
        CHECKPOINT on a DuckDB file."""
        if self.lock is None:
            self.checkpoint()
            return {"checkpoint": True}
        self.lock.acquire()
        try:
            return lake.compact(self.con, older_than_s)
        finally:
            self.lock.release()

    def schema_version(self) -> int:
        return scalar(self._read().execute("SELECT max(version) FROM schema_version"))

    def wal_bytes(self) -> int:
        """Size of the write-ahead log (what a checkpoint folds into the file)."""
        try:
            return os.path.getsize(self.path + ".wal")
        except OSError:
            return 0

    def checkpoint_beside(self, cursor: duckdb.DuckDBPyConnection) -> None:
        """CHECKPOINT on a cursor of another thread while the writer goes on committing
        (never FORCE: that would abort the writer's and readers' transactions)."""
        cursor.execute("CHECKPOINT")

    def checkpoint(self) -> None:
        """Fold the WAL into the file (a crash without it is fine: the WAL replays on open).
        A lake has no WAL: each commit is in the catalog already."""
        if self.lock is not None:
            return
        self._close_cursors()
        try:
            self.con.execute("CHECKPOINT")
        except duckdb.Error:  # a reader thread still mid-transaction: wait for it instead
            self.con.execute("FORCE CHECKPOINT")

    def close(self) -> None:
        self._close_cursors()
        self.con.close()
        if self.lock is not None:
            self.lock.close()

    def _close_cursors(self) -> None:
        with self._cursors_lock:
            for cur in self._cursors:
                try:
                    cur.close()
                except Exception:
                    pass
            self._cursors.clear()
        self._local = threading.local()

    def _read(self) -> duckdb.DuckDBPyConnection:
        """A cursor of this database owned by the calling thread (reads run beside the writer)."""
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self.cursor()
            self._local.cursor = cur
            with self._cursors_lock:
                self._cursors.append(cur)
        return cur

    def _tx(self):
        if self.lock is not None:
            return lake.LakeTransaction(self.con, self.lock)
        return Transaction(self.con)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of its own for a read that outlives one thread hop (a streamed response);
        the caller closes it."""
        cur = self.con.cursor()
        if self.lock is not None:  # a cursor starts in DuckDB's own in-memory database
            cur.execute(f"USE {lake.CATALOG}")
        return cur
