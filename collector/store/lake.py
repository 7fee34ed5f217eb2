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
so two collectors checking at once would both insert. The store therefore takes one
PostgreSQL advisory lock (`LakeLock`, on a connection of its own to the catalog database)
around each of its write transactions, and begins the lake transaction only once it holds
it: the transaction's snapshot then contains every write committed before it, and the
checks that are exact on one DuckDB file are exact on the lake. Kept this way rather than
coordination tables beside the lake because one lock makes every invariant (spans once,
messages once, sessions merged, one alert per feedback, one worker per job) hold by the
same argument as on one file, and a collector killed with -9 loses its PostgreSQL session,
so PostgreSQL frees its lock at once. The cost: lake writes of all collectors take turns.
Decoding, normalizing, reads, the API and analysis run in parallel; DuckLake's own catalog
commit is one snapshot at a time anyway.

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

from tracefix.collector.store.sql import scalar

log = logging.getLogger("tracefix.collector")

PREFIX = "ducklake:"
CATALOG = "lake"  # the name the lake is attached under
LOCK_CLASS = 0x7472_6678  # "trfx": the advisory locks' first key, so other applications' locks never collide
WRITE_LOCK = 0  # second key of the lake-wide write lock


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


class LakeLock:
    """The advisory locks of one store, on a PostgreSQL session of its own.

    `hold()` is the lake-wide write lock, taken around every write transaction (one thread
    of this process at a time, then one collector at a time). The instance lock is held for
    the store's life: while it is held, the jobs this instance claimed are its own."""

    def __init__(self, location: str, instance: str):
        import psycopg  # the collector extra; imported here so embedded stores never load it

        self._psycopg = psycopg
        self.conninfo = catalog_conninfo(location)
        self.instance = instance
        self._mutex = threading.Lock()
        self._pg = self._connect()

    def _connect(self):
        pg = self._psycopg.connect(self.conninfo, autocommit=True)
        pg.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_CLASS, _lock_key(self.instance)])
        return pg

    def acquire(self) -> None:
        self._mutex.acquire()
        try:
            try:
                self._pg.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_CLASS, WRITE_LOCK])
            except self._psycopg.OperationalError:  # the session broke (a PostgreSQL restart): once more
                log.warning("lost the PostgreSQL session of the lake's lock; reconnecting")
                try:
                    self._pg.close()
                finally:
                    self._pg = self._connect()
                self._pg.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_CLASS, WRITE_LOCK])
        except BaseException:
            self._mutex.release()
            raise

    def release(self) -> None:
        try:
            self._pg.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_CLASS, WRITE_LOCK])
        except self._psycopg.Error as exc:  # a broken session holds nothing any more
            log.warning("releasing the lake's lock: %s", exc)
        finally:
            self._mutex.release()

    def alive(self, instance: str) -> bool:
        """Whether the store instance `instance` still runs (holds its instance lock). Asked
        with the write lock held, on the same session."""
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
    """`with LakeTransaction(con, lock) as con:` holds the lake's write lock from before
    BEGIN (so the snapshot has every commit before it) until after COMMIT."""

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
    """Merge the small Parquet files many short ingest transactions leave into larger ones,
    flush rows inlined in the catalog to files, expire snapshots older than `older_than_s`
    and delete the files nothing refers to any more. Run with the write lock held."""
    def files() -> int:
        return sum(scalar(con.execute(f"SELECT count(*) FROM ducklake_list_files('{CATALOG}', ?)", [t]))
                   for (t,) in con.execute(f"SELECT table_name FROM duckdb_tables() WHERE database_name = '{CATALOG}'"
                                           ).fetchall())
    before = files()
    t0 = time.monotonic()
    con.execute(f"CALL ducklake_flush_inlined_data('{CATALOG}')")
    con.execute(f"CALL ducklake_merge_adjacent_files('{CATALOG}')")
    cutoff = time.time() - older_than_s
    # counted in SQL: the functions answer timestamps with time zones, which Python would need pytz for
    expired = scalar(con.execute(f"SELECT count(*) FROM ducklake_expire_snapshots('{CATALOG}', "
                                 "older_than => to_timestamp(?))", [cutoff]))
    cleaned = scalar(con.execute(f"SELECT count(*) FROM ducklake_cleanup_old_files('{CATALOG}', "
                                 "older_than => to_timestamp(?))", [cutoff]))
    return {"files_before": before, "files_after": files(), "snapshots_expired": expired,
            "files_deleted": cleaned, "seconds": round(time.monotonic() - t0, 3)}
