"""The store on DuckLake: several collectors write one lake whose catalog is PostgreSQL.

`tracefix serve --store ducklake:postgres:dbname=tracefix host=db --data-path s3://bucket/lake`
opens the same `Store` on an in-memory DuckDB with the lake attached and in use; every
query of the store runs unchanged on it. Nothing is downloaded: the `ducklake` and
`postgres` extensions are loaded from their PyPI packages' files.

What several writers change, and how the store stays correct (README, "Scaling out"):

DuckLake has no PRIMARY KEY, UNIQUE, index or ON CONFLICT, and two transactions that
insert into the same table never conflict (snapshot isolation, appends retried by DuckLake
itself). Every write of the store is a read-check-write (a span not stored yet, a message
key not stored yet, a session row to merge, a feedback id not seen, the oldest queued job),
so two collectors checking at once would both insert. What keeps each check exact is a
PostgreSQL advisory lock (`LakeLock`, on a connection of its own to the catalog database)
on what the check is about, taken before the lake transaction begins: its snapshot then
holds every write committed before by anyone who held the same lock.

- A batch of spans (`LakeLock.run` with `batch_keys`) locks its sessions, its traces, its
  feedback ids and, when it carries them, the OTLP log records or metric points it
  appends: a retried export that reaches another collector has the same trace ids, a
  session's traces that reach two collectors have its session id. With the balancer routing
  by trace id, collectors rarely want the same key, so their span transactions run side by
  side. Messages are content-addressed: a message two collectors first see at the same
  moment may be stored twice, identical; reads look messages up by key (a duplicate changes
  nothing) and `compact` keeps one.
- DuckLake itself refuses a commit that deletes from or updates a table another transaction
  inserted into meanwhile, or inserts into one another deleted from (its conflict check is
  per table, not per row). So a span transaction only appends: a long session's later
  exports append a new version of its row and the steps that follow its stored ones
  (lake_appends). One that must delete (spans arriving out of order renumber stored steps, a
  trace's session found) never loses a concurrent write: it fails whole and runs again under
  the lake-wide lock.
- Claims (the oldest queued job of a kind, due alert deliveries) lock the queue they claim
  from. Every other write (the API's feedback, job changes, datasets, results, migrations,
  compaction) takes the lake-wide lock exclusively; span transactions hold it shared, so it
  waits for them and they for it, and those writes stay exact by the same argument as on one
  DuckDB file.

A collector killed with -9 loses its PostgreSQL session, so PostgreSQL frees its locks at
once. `LakeLock.seconds` counts the time this store held and waited for its locks
(`tracefix_lake_lock_seconds_total`; `bench/ingest.py --store ducklake` prints the shares).

A diagnosis job claimed by a collector (no lease; the collector runs it) names the
collector's instance, which holds a second advisory lock for its whole life: a job whose
collector's lock is free belongs to a dead collector and is queued again.
"""
from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import tempfile
import threading
import time
from pathlib import Path

import duckdb

from tracefix.collector.store import lake_appends
from tracefix.collector.store.sql import scalar

log = logging.getLogger("tracefix.collector")

PREFIX = "ducklake:"
CATALOG = "lake"  # the name the lake is attached under
LOCK_CLASS = 0x7472_6678  # "trfx": the advisory locks' first key, so other applications' locks never collide
WRITE_LOCK = 0  # second key of the lake-wide write lock
KEY_CLASS = LOCK_CLASS + 1  # first key of the locks of sessions, traces, feedback ids and queues
MAX_KEYS = 512  # a transaction wanting more locks takes the lake-wide one (PostgreSQL's lock table is finite)
KEYED_ATTEMPTS = 1  # DuckLake conflicts a keyed transaction meets before it runs under the lake-wide lock
# TRACEFIX_LAKE_LOCKS=lake: every write under the lake-wide lock, as before the locks of keys
# (what bench/ingest.py compares with; a way back should the keys' argument ever fail)
LOCKS_ENV = "TRACEFIX_LAKE_LOCKS"


def is_lake(location: str | os.PathLike | None) -> bool:
    return isinstance(location, str) and location.startswith(PREFIX)


def catalog_conninfo(location: str) -> str:
    """The PostgreSQL connection string of a `ducklake:postgres:...` location (libpq's
    `key=value` form or a postgresql:// URI)."""
    rest = location[len(PREFIX):]
    if not rest.startswith("postgres:"):
        raise ValueError(f"{location!r}: a DuckLake store's catalog is PostgreSQL: ducklake:postgres:dbname=... host=...")
    return rest[len("postgres:"):]


def redacted(location: str) -> str:
    """The location as logs may show it: without a password."""
    return re.sub(r"(password\s*=\s*)('[^']*'|\S+)|(://[^:/@]+:)[^@]*@", lambda m: (m.group(1) + "***") if m.group(1)
                  else m.group(3) + "***@", location)


def _extension_file(package: str, name: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the DuckLake store needs the {package.replace('_', '-')}=={duckdb.__version__} package "
                           "(pip install 'tracefix[collector]')")
    path = Path(list(spec.submodule_search_locations)[0]) / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if not path.exists():
        raise RuntimeError(f"{path} is missing: {package.replace('_', '-')} must match duckdb {duckdb.__version__}")
    return path


def load_extensions(con: duckdb.DuckDBPyConnection) -> None:
    """LOAD ducklake and postgres from their packages' files. The postgres extension's entry
    point is named after its internal name, `postgres_scanner`, which DuckDB derives from the
    file name: it is loaded through a link of that name in a private directory."""
    con.execute(f"LOAD '{_extension_file('duckdb_extension_ducklake', 'ducklake')}'")
    target = _extension_file("duckdb_extension_postgres", "postgres")
    link_dir = Path(tempfile.gettempdir()) / f"tracefix-duckdb-ext-{os.getuid()}-{duckdb.__version__}"
    link_dir.mkdir(mode=0o700, exist_ok=True)
    link = link_dir / "postgres_scanner.duckdb_extension"
    if not link.exists() or link.resolve() != target.resolve():
        tmp = link_dir / f".{os.getpid()}.{threading.get_ident()}"
        tmp.symlink_to(target)
        os.replace(tmp, link)
    con.execute(f"LOAD '{link}'")


def connect_lake(*, threads: int | None = None, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the ducklake and postgres extensions loaded, for
    `attach_lake`. A lake's `data_path` (a directory or an s3:// URL) is where its Parquet
    files go; the catalog remembers it, so only the first collector of a lake must name it."""
    config: dict[str, str | bool | int | float | list[str]] = {"threads": threads} if threads else {}
    if memory_limit:
        config["memory_limit"] = memory_limit
    con = duckdb.connect(":memory:", config=config)
    load_extensions(con)
    return con


def attach_lake(con: duckdb.DuckDBPyConnection, location: str, data_path: str | None) -> None:
    """Attach the lake to a connection of `connect_lake` and use it. The first ATTACH of a
    new lake creates DuckLake's catalog tables: run it with the write lock held."""
    conninfo = catalog_conninfo(location).replace("'", "''")
    options = ""
    if data_path:
        if "://" not in data_path:
            Path(data_path).mkdir(parents=True, exist_ok=True)
        options = f" (DATA_PATH '{data_path.rstrip('/')}/')"
    con.execute(f"ATTACH 'ducklake:postgres:{conninfo}' AS {CATALOG}{options}")
    con.execute(f"USE {CATALOG}")


def _lock_key(name: str) -> int:
    """A 32-bit key for an advisory lock named `name` (its second key)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big", signed=True) or 1


def batch_keys(batch) -> list[str]:
    """The names of the locks a batch's transaction holds (see the module's docstring): each
    session it writes, each trace whose spans it checks and each feedback id it records, and
    the OTLP log records or metric points it appends (checked against every stored one)."""
    import pyarrow.compute as pc

    sessions = set(batch.sessions) | set(batch.explicit_traces.values())
    traces = set(batch.fallback_traces)
    table = batch.span_arrow()
    if table is not None and table.num_rows:
        sessions.update(pc.unique(table["session_id"]).to_pylist())
        traces.update(pc.unique(table["trace_id"]).to_pylist())
    sessions.update(ev.session_id for ev in batch.evaluations)
    return ([f"session:{s}" for s in sessions] + [f"trace:{t}" for t in traces]
            + [f"feedback:{ev.feedback_id}" for ev in batch.evaluations]
            + (["log_records"] if batch.log_records else []) + (["metric_points"] if batch.metric_points else []))


def is_conflict(exc: BaseException) -> bool:
    """Whether DuckLake refused a commit because a concurrent one changed the same table."""
    return isinstance(exc, duckdb.Error) and "Transaction conflict" in str(exc)


class LakeLock:
    """The advisory locks of one store, on a PostgreSQL session of its own.

    `run` runs a write transaction under the locks of its keys, `acquire` / `release` hold
    the lake-wide lock exclusively; either way one thread of this process at a time (they
    share one DuckDB connection). The instance lock is held for the store's life: while it
    is held, the jobs this instance claimed are its own."""

    def __init__(self, location: str, instance: str):
        import psycopg  # the collector extra; imported here so embedded stores never load it

        self._psycopg = psycopg
        self.conninfo = catalog_conninfo(location)
        self.instance = instance
        self._mutex = threading.Lock()
        self._pg = self._connect()
        self.keyed = os.environ.get(LOCKS_ENV, "keys") != "lake"
        # seconds this store held the lake-wide lock, held the locks of keys (span transactions,
        # claims) and waited for either; DuckLake conflicts that ran a transaction again, and
        # transactions that then ran under the lake-wide lock
        self.seconds = {"lake_held": 0.0, "keys_held": 0.0, "waited": 0.0}
        self.conflicts = self.escalated = 0
        self._since = 0.0

    def _connect(self):
        pg = self._psycopg.connect(self.conninfo, autocommit=True)
        pg.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_CLASS, _lock_key(self.instance)])
        return pg

    def _lock(self, sql: str, params: list) -> None:
        """Run a statement that takes locks, on a new session if the old one broke (a
        PostgreSQL restart: the old session's locks are gone with it), counting the wait."""
        t0 = time.monotonic()
        try:
            self._pg.execute(sql, params)
        except self._psycopg.OperationalError:
            log.warning("lost the PostgreSQL session of the lake's lock; reconnecting")
            try:
                self._pg.close()
            finally:
                self._pg = self._connect()
            self._pg.execute(sql, params)
        self._since = time.monotonic()
        self.seconds["waited"] += self._since - t0

    def _unlock(self, sql: str, params: list, held: str) -> None:
        self.seconds[held] += time.monotonic() - self._since
        try:
            self._pg.execute(sql, params)
        except self._psycopg.Error as exc:  # a broken session holds nothing any more
            log.warning("releasing the lake's locks: %s", exc)

    def acquire(self) -> None:
        """Take the lake-wide lock exclusively (after this process's other writers)."""
        self._mutex.acquire()
        try:
            self._lock("SELECT pg_advisory_lock(%s, %s)", [LOCK_CLASS, WRITE_LOCK])
        except BaseException:
            self._mutex.release()
            raise

    def release(self) -> None:
        try:
            self._unlock("SELECT pg_advisory_unlock(%s, %s)", [LOCK_CLASS, WRITE_LOCK], "lake_held")
        finally:
            self._mutex.release()

    def run(self, con: duckdb.DuckDBPyConnection, work, keys: list[str] | None = None):
        """`work(con)` in one lake transaction, its result. With `keys` (lock names: see
        `batch_keys`) the transaction holds their locks and the lake-wide lock shared, and
        runs again under the lake-wide lock alone when DuckLake refuses its commit for a
        concurrent change to a table it deleted from or updated (after KEYED_ATTEMPTS such
        refusals). It holds the lake-wide lock from the start without `keys` and with more
        than MAX_KEYS."""
        ids = sorted({_lock_key(k) for k in keys}) if keys is not None else []
        if keys is not None and self.keyed and len(ids) <= MAX_KEYS:
            for _ in range(KEYED_ATTEMPTS):
                with self._mutex:
                    # the shared lake-wide lock first, then the keys in order: no two span
                    # transactions wait for each other in a circle
                    self._lock("SELECT CASE WHEN n = 0 THEN pg_advisory_lock_shared(%s, %s) "
                               "ELSE pg_advisory_lock(%s, k) END FROM (SELECT 0::bigint AS n, 0 AS k UNION ALL "
                               "SELECT n, k FROM unnest(%s::int[]) WITH ORDINALITY AS u(k, n) ORDER BY n) s",
                               [LOCK_CLASS, WRITE_LOCK, KEY_CLASS, ids])
                    try:
                        con.begin()
                        try:
                            result = work(con)
                        except BaseException:
                            con.rollback()
                            raise
                        try:
                            con.commit()
                            return result
                        except duckdb.Error as exc:
                            if not is_conflict(exc):
                                raise
                            self.conflicts += 1
                    finally:
                        self._unlock("SELECT pg_advisory_unlock_shared(%s, %s), (SELECT count(*) FROM "
                                     "unnest(%s::int[]) AS u(k) WHERE pg_advisory_unlock(%s, k))",
                                     [LOCK_CLASS, WRITE_LOCK, ids, KEY_CLASS], "keys_held")
            self.escalated += 1
        with LakeTransaction(con, self) as con:
            return work(con)

    def alive(self, instance: str) -> bool:
        """Whether the store instance `instance` still runs (holds its instance lock). Asked
        in a transaction (under the lock of the jobs it claims), on the same session."""
        if instance == self.instance:
            return True
        got = self._pg.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_CLASS, _lock_key(instance)]).fetchone()[0]
        if got:
            self._pg.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_CLASS, _lock_key(instance)])
        return not got

    def close(self) -> None:
        try:
            self._pg.close()
        except Exception:
            pass


class LakeTransaction:
    """`with LakeTransaction(con, lock) as con:` holds the lake-wide write lock exclusively
    from before BEGIN (so the snapshot has every commit before it) until after COMMIT."""

    def __init__(self, con: duckdb.DuckDBPyConnection, lock: LakeLock):
        self.con = con
        self.lock = lock

    def __enter__(self):
        self.lock.acquire()
        try:
            self.con.begin()
        except BaseException:
            self.lock.release()
            raise
        return self.con

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.con.commit()
            else:
                self.con.rollback()
        finally:
            self.lock.release()
        return False


def compact(con: duckdb.DuckDBPyConnection, older_than_s: float = 3600.0) -> dict:
    """Keep one of each message stored twice and the latest version of each session's row
    (lake_appends), merge the small Parquet files many short
    ingest transactions leave into larger ones, flush rows inlined in the catalog to files,
    expire snapshots older than `older_than_s` and delete the files nothing refers to any
    more. Run with the write lock held."""
    def files() -> int:
        return sum(scalar(con.execute(f"SELECT count(*) FROM ducklake_list_files('{CATALOG}', ?)", [t]))
                   for (t,) in con.execute(f"SELECT table_name FROM duckdb_tables() WHERE database_name = '{CATALOG}'"
                                           ).fetchall())
    before = files()
    t0 = time.monotonic()
    # a message two collectors first stored at the same moment is there twice, identical: one stays
    doubled = scalar(con.execute("""DELETE FROM messages WHERE rowid IN (SELECT rowid FROM (
        SELECT rowid, row_number() OVER (PARTITION BY key ORDER BY rowid) AS n FROM messages
        WHERE key IN (SELECT key FROM messages GROUP BY key HAVING count(*) > 1)) WHERE n > 1)"""))
    versions = lake_appends.drop_old_versions(con)
    con.execute(f"CALL ducklake_flush_inlined_data('{CATALOG}')")
    con.execute(f"CALL ducklake_merge_adjacent_files('{CATALOG}')")
    cutoff = time.time() - older_than_s
    # counted in SQL: the functions answer timestamps with time zones, which Python would need pytz for
    expired = scalar(con.execute(f"SELECT count(*) FROM ducklake_expire_snapshots('{CATALOG}', "
                                 "older_than => to_timestamp(?))", [cutoff]))
    cleaned = scalar(con.execute(f"SELECT count(*) FROM ducklake_cleanup_old_files('{CATALOG}', "
                                 "older_than => to_timestamp(?))", [cutoff]))
    return {"files_before": before, "files_after": files(), "messages_deduplicated": doubled,
            "session_versions_dropped": versions,
            "snapshots_expired": expired, "files_deleted": cleaned, "seconds": round(time.monotonic() - t0, 3)}
