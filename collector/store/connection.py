"""Opening the database behind a store, and the part of `Store` that owns the connection:
migrations on open, per-thread read cursors, transactions, checkpoints."""
from __future__ import annotations

import functools
import logging
import os
import re
import threading
import uuid
from pathlib import Path
from typing import Callable, TypeVar

import duckdb

from tracefix.collector import db_path
from tracefix.collector.keyset import KeySet
from tracefix.collector.store import lake, schema
from tracefix.collector.store.outlines import Outlines
from tracefix.collector.store.sql import Transaction, scalar

log = logging.getLogger("tracefix.collector")
T = TypeVar("T")


_UNITS = {None: 1, "B": 1, "BYTES": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
          "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4}


def size_bytes(text: str, setting: str) -> int:
    """A size as DuckDB and our variables write it ("16MB", "1GiB", "244.1 MiB", "20000000")
    in bytes; `setting` names what is wrong when it is no size."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([A-Z]+)?", text.strip().upper().replace(" ", ""))
    if not match or match.group(2) not in _UNITS:
        raise ValueError(f"{setting}={text!r}: use a size such as 16MB")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def checkpoint_threshold_bytes(default: str = "16MB") -> int:
    """TRACEFIX_CHECKPOINT_THRESHOLD ("16MB", "1GiB", "20000000") in bytes; else `default`
    (DuckDB's 16 MB)."""
    return size_bytes(os.environ.get("TRACEFIX_CHECKPOINT_THRESHOLD") or default, "TRACEFIX_CHECKPOINT_THRESHOLD")


# Committed rows not yet checkpointed stay in DuckDB's memory (their long strings cannot be
# spilled to the temp directory), about 1.25x the WAL that logs them: the writer checkpoints
# once the WAL reaches this share of the memory limit, and bounds a transaction to half of it,
# so what waits for a checkpoint stays under half the limit (bench/large_exports.py).
WAL_SHARE_OF_MEMORY = 1 / 4


def is_invalidated(exc: BaseException) -> bool:
    """Whether DuckDB gave up on the database instance (a FATAL error, e.g. a checkpoint that ran
    out of memory): every later statement fails until the database is opened again."""
    return isinstance(exc, duckdb.FatalException) or "database has been invalidated" in str(exc)




def memory_limit_setting(memory_limit: str | None = None) -> str | None:
    """The memory limit a store opens with: TRACEFIX_DB_MEMORY_LIMIT, else `memory_limit`, else
    None (DuckDB's 80% of RAM)."""
    return os.environ.get("TRACEFIX_DB_MEMORY_LIMIT") or memory_limit


def connect_db(path: str | os.PathLike | None = None, *, read_only: bool = False, threads: int | None = None,
               checkpoint_threshold: str | None = None, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """Open the database behind a store. `:memory:` works for throwaway stores. `threads`
    (or TRACEFIX_DB_THREADS) caps DuckDB's worker threads; `checkpoint_threshold` (or
    TRACEFIX_CHECKPOINT_THRESHOLD) is the WAL size at which a commit checkpoints;
    TRACEFIX_DB_MEMORY_LIMIT (else `memory_limit`, else DuckDB's 80% of RAM) bounds DuckDB's
    memory, its cache of blocks read included. What does not fit (large sorts, joins) spills
    to `<db>.tmp` beside the file."""
    target = db_path(path)
    if target != ":memory:":
        Path(target).parent.mkdir(parents=True, exist_ok=True)
    threads = threads or int(os.environ.get("TRACEFIX_DB_THREADS") or 0) or None
    config: dict[str, str | bool | int | float | list[str]] = {"threads": threads} if threads else {}
    threshold = checkpoint_threshold or os.environ.get("TRACEFIX_CHECKPOINT_THRESHOLD")
    if threshold:
        config["checkpoint_threshold"] = threshold
    memory_limit = memory_limit_setting(memory_limit)
    if memory_limit:
        config["memory_limit"] = memory_limit
    if target != ":memory:" and not read_only:
        config["temp_directory"] = f"{target}.tmp"
    if memory_limit and not read_only and _wal_size(target) > 0:
        _fold_wal(target, {**config, "memory_limit": checkpoint_memory_limit(memory_limit)})
    return duckdb.connect(target, read_only=read_only, config=config)


def _fold_wal(target: str, config: dict) -> None:
    """Replay and checkpoint the WAL a process left (stopped, or given up on by DuckDB) with
    `config`'s larger memory limit, then close. The rows a WAL logs are held in memory once
    replayed, and the checkpoint that folds them in needs more (`checkpoint_memory_limit`):
    under a small limit a large WAL kept the store from writing at every restart. Opened again
    afterwards, not just given the small limit back: DuckDB reads a row written (or replayed)
    in the same instance a whole vector at a time (~350 MB for one 200 KB message)."""
    con = duckdb.connect(target, config=config)
    try:
        con.execute("CHECKPOINT")
    finally:
        con.close()


def _wal_size(target: str) -> int:
    try:
        return os.path.getsize(target + ".wal") if target != ":memory:" else 0
    except OSError:
        return 0


def _set_memory_limit(cursor: duckdb.DuckDBPyConnection, limit: str) -> None:
    cursor.execute(f"SET memory_limit = '{_quoted(limit)}'")


def _quoted(text: str | None) -> str:
    return str(text).replace("'", "''")


@functools.cache
def _duckdb_default_memory_limit() -> int:
    """DuckDB's own memory limit on this machine (80% of the RAM it may use, cgroups included)."""
    con = duckdb.connect(":memory:")
    try:
        return size_bytes(str(scalar(con.execute("SELECT current_setting('memory_limit')"))), "memory_limit")
    finally:
        con.close()


def checkpoint_memory_limit(memory_limit: str | None) -> str:
    """The memory limit a checkpoint runs with. A checkpoint rewrites the last row group of
    every table it writes to (up to 122,880 rows) and DuckDB holds what it rewrites in memory:
    with messages of hundreds of KB that is far more than a limit sized for reads (1.3x the
    row group's bytes, bench/large_exports.py), and a checkpoint that runs out of memory makes
    DuckDB give up on the database. So checkpoints get DuckDB's own default (80% of RAM), or
    `memory_limit` when that is larger, and the limit is set back once they are done."""
    default = _duckdb_default_memory_limit()
    if memory_limit and size_bytes(memory_limit, "TRACEFIX_DB_MEMORY_LIMIT") > default:
        return memory_limit
    return f"{default}B"


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
        # the tool calls (id, tool name) an LLM answer names, by message key: a key is its
        # content's hash, so what it names never changes (see Pages._paged_document)
        self._call_ids: dict[int, tuple[tuple[str | None, str | None], ...]] = {}
        self._outlines = Outlines()  # session outlines kept while their session is unchanged (Pages)
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._cursors_lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()  # one checkpoint at a time sets the memory limit
        self._roomy_reads = 0  # reads under way with a checkpoint's memory (widen_reads)
        # what `reopen` opens the file with; `generation` counts the opens (a cursor kept by
        # another thread belongs to the connection of its generation)
        self._connect = functools.partial(connect_db, read_only=read_only, threads=threads,
                                          checkpoint_threshold=checkpoint_threshold, memory_limit=memory_limit)
        self.generation = 0
        self.memory_limit: str | None = None  # a file's limit between checkpoints (a lake keeps its own)
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
        self.memory_limit = memory_limit_setting(memory_limit)
        self.con = self._connect(self.path)
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
        return _wal_size(self.path)

    def wal_budget_bytes(self) -> int | None:
        """The WAL size at which the writer checkpoints before its next transaction: a share of
        the memory limit (`WAL_SHARE_OF_MEMORY`); None without a limit of ours."""
        if self.memory_limit is None:
            return None
        return int(size_bytes(self.memory_limit, "TRACEFIX_DB_MEMORY_LIMIT") * WAL_SHARE_OF_MEMORY)

    def checkpoint_beside(self, cursor: duckdb.DuckDBPyConnection) -> None:
        """CHECKPOINT on a cursor of another thread while the writer goes on committing
        (never FORCE: that would abort the writer's and readers' transactions)."""
        self._checkpoint(cursor, "CHECKPOINT")

    def _checkpoint(self, cursor: duckdb.DuckDBPyConnection, statement: str) -> None:
        """`statement` with the memory a checkpoint needs (`checkpoint_memory_limit`), then the
        store's own limit again, which evicts what the checkpoint read."""
        with self._checkpoint_lock:
            if self.memory_limit is None:
                cursor.execute(statement)
                return
            _set_memory_limit(cursor, checkpoint_memory_limit(self.memory_limit))
            try:
                cursor.execute(statement)
            finally:
                try:
                    if not self._roomy_reads:  # else the last of those reads sets it back
                        _set_memory_limit(cursor, self.memory_limit)
                except duckdb.Error as exc:  # more is pinned right now: the next checkpoint sets it back
                    if not is_invalidated(exc):  # then the checkpoint's own error says what happened
                        log.warning("DuckDB's memory limit stays raised after a checkpoint: %s", exc)

    def widen_reads(self) -> None:
        """Give reads the memory a checkpoint gets (`checkpoint_memory_limit`) until as many
        `narrow_reads` have been called: for a read the store's own limit cannot hold. DuckDB
        reads a row this process wrote a whole vector of its string column at a time (until the
        file is next opened), so one long message can cost hundreds of MB."""
        if self.memory_limit is None:
            return
        with self._checkpoint_lock:
            self._roomy_reads += 1
            if self._roomy_reads == 1:
                self._set_memory_limit_aside(checkpoint_memory_limit(self.memory_limit))

    def narrow_reads(self) -> None:
        """The end of a read `widen_reads` made room for; the last one sets the store's limit back."""
        if self.memory_limit is None:
            return
        with self._checkpoint_lock:
            self._roomy_reads -= 1
            if self._roomy_reads == 0:
                try:
                    self._set_memory_limit_aside(self.memory_limit)
                except duckdb.Error as exc:  # more is pinned right now: the next checkpoint sets it back
                    log.warning("DuckDB's memory limit stays raised after a read: %s", exc)

    def _set_memory_limit_aside(self, limit: str) -> None:
        """Set DuckDB's limit on a cursor of its own: a read's retry calls it from any thread."""
        cursor = self.con.cursor()
        try:
            _set_memory_limit(cursor, limit)
        finally:
            cursor.close()

    def checkpoint(self) -> None:
        """Fold the WAL into the file (a crash without it is fine: the WAL replays on open).
        A lake has no WAL: each commit is in the catalog already."""
        if self.lock is not None:
            return
        self._close_cursors()
        try:
            self._checkpoint(self.con, "CHECKPOINT")
        except duckdb.Error as exc:  # a reader thread still mid-transaction: wait for it instead
            if is_invalidated(exc):
                raise
            self._checkpoint(self.con, "FORCE CHECKPOINT")

    @property
    def can_reopen(self) -> bool:
        """Whether `reopen` can bring the store back: a DuckDB file (a lake's connection is
        the lake's own; an in-memory database is gone with its instance)."""
        return self.lock is None and self.path != ":memory:"

    def reopen(self) -> None:
        """Open the file again once DuckDB gave up on the instance (`is_invalidated`): what was
        committed is in the file or its WAL, which replays (and is checkpointed, see
        `connect_db`). Every cursor of the old instance is closed; threads get new ones. The
        caller is the writer thread, the only one that writes."""
        if not self.can_reopen:
            raise RuntimeError(f"a {'lake' if self.lock is not None else 'memory'} store cannot be reopened")
        self._close_cursors()
        try:
            self.con.close()
        except duckdb.Error:
            pass
        self._message_keys = None  # a commit that failed may have reached the WAL: load what is stored
        self.con = self._connect(self.path)
        self.generation += 1

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

    def _write(self, work: Callable[[duckdb.DuckDBPyConnection], T], keys: list[str] | None = None) -> T:
        """`work(con)` in one write transaction, its result. On a lake, with `keys` (what the
        transaction checks before it writes: a queue's name, see lake.batch_keys) it holds
        their locks rather than the lake-wide one, and may run twice (a DuckLake conflict)."""
        if self.lock is not None:
            return self.lock.run(self.con, work, keys)
        with Transaction(self.con) as con:
            return work(con)

    def _write_batch(self, batch, work: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """`_write` for a batch of spans: on a lake, under the locks of its sessions and traces."""
        return self._write(work, lake.batch_keys(batch) if self.lock is not None else None)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of its own for a read that outlives one thread hop (a streamed response);
        the caller closes it."""
        cur = self.con.cursor()
        if self.lock is not None:  # a cursor starts in DuckDB's own in-memory database
            cur.execute(f"USE {lake.CATALOG}")
        return cur
