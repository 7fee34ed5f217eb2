"""On a lake, a long session's later exports only append rows, so they commute with other
collectors' writes.

DuckLake checks conflicts per table, not per row: a commit that deletes from or updates a
table (an UPDATE is a delete and an insert) is refused when another transaction inserted
into that table meanwhile, and an insert is refused when another deleted from it; inserts
beside inserts always commit. Merging a later export into a stored session's row and
renumbering its steps (an UPDATE of sessions, a DELETE of steps) was therefore refused
beside any other collector's span transaction, and ran again under the lake-wide lock. So,
on a lake only:

- each merge into a session appends the merged row, a new version of it, to `session_rows`
  (its `updated_ns` after the stored version's: a session's writers take turns under its
  lock, so versions are ordered by it), and `sessions` is a view of each session's latest
  version: every read of the store runs unchanged. Other writes of a session's row (its
  task, an import's source, dropping a session a trace id named) change all its versions
  under the lake-wide lock; `compact` and migrations keep only the latest.
- a batch that only adds steps after a session's stored ones (a long session's exports in
  order) appends those steps; one whose numbering moves a stored step (spans that arrive
  out of order) deletes and rewrites the session's steps as before.

The embedded DuckDB store keeps one row per session and updates it in place.
"""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from tracefix.collector.store.sql import Transaction, scalar

SESSION_ROWS = "session_rows"  # on a lake: every version of each session's row
# the filter of a read by session id reaches the scan through the window (not through DISTINCT ON)
LATEST_VERSIONS = (f"SELECT * FROM {SESSION_ROWS} "
                   "QUALIFY row_number() OVER (PARTITION BY session_id ORDER BY updated_ns DESC) = 1")


def sessions_table(shared: bool) -> str:
    """The table a write of sessions' rows goes to: `session_rows` on a lake (`shared`)."""
    return SESSION_ROWS if shared else "sessions"


def _is_view(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(scalar(con.execute("SELECT count(*) FROM duckdb_views() WHERE database_name = current_database() "
                                   "AND view_name = ?", [name])))


def keep_versions(con: duckdb.DuckDBPyConnection) -> None:
    """Make the lake's `sessions` the view of the latest versions in `session_rows` (once;
    the caller holds the lake-wide lock)."""
    if _is_view(con, "sessions"):
        return
    # copied, not renamed: a renamed table's rows failed to read (DuckDB's internal error,
    # duckdb-extension-ducklake 1.5.5) once another connection had flushed its inlined rows
    with Transaction(con):
        con.execute(f"CREATE TABLE {SESSION_ROWS} AS SELECT * FROM sessions")
        con.execute("DROP TABLE sessions")
        con.execute(f"CREATE VIEW sessions AS {LATEST_VERSIONS}")


def one_row_each(con: duckdb.DuckDBPyConnection) -> None:
    """Undo `keep_versions` (only the latest versions stay), so that a migration altering
    `sessions` finds the table (the caller holds the lake-wide lock, and calls
    `keep_versions` after)."""
    if not _is_view(con, "sessions"):
        return
    with Transaction(con):
        con.execute("DROP VIEW sessions")
        con.execute(f"CREATE TABLE sessions AS {LATEST_VERSIONS}")
        con.execute(f"DROP TABLE {SESSION_ROWS}")


def drop_old_versions(con: duckdb.DuckDBPyConnection) -> int:
    """Delete every version of a session's row but its latest (reads then aggregate less);
    the number deleted. The caller holds the lake-wide lock."""
    if not _is_view(con, "sessions"):
        return 0
    return scalar(con.execute(f"""DELETE FROM {SESSION_ROWS} WHERE rowid IN (SELECT rowid FROM {SESSION_ROWS}
        QUALIFY row_number() OVER (PARTITION BY session_id ORDER BY updated_ns DESC) > 1)"""))


STEP_COLUMNS = ["session_id", "idx", "trace_id", "span_id", "raw_step", "started_ns"]


def appended_steps(stored: pa.Table, numbered: pa.Table) -> pa.Table | None:
    """The rows of `numbered` (the steps of some sessions, numbered again from all their
    spans, in session and index order) that follow each session's `stored` steps, when the
    stored steps are the first ones of the new numbering unchanged; None when a stored step
    moved (its session's steps must be written again)."""
    if not stored.num_rows:
        return numbered
    stored = stored.select(STEP_COLUMNS).sort_by([("session_id", "ascending"), ("idx", "ascending")])
    counts = stored.group_by("session_id").aggregate([("idx", "count")])
    where = pc.index_in(numbered["session_id"], value_set=counts["session_id"])
    kept = pc.fill_null(pc.take(counts["idx_count"], where), 0)  # how many of each row's session are stored
    old = pc.less(numbered["idx"], pc.cast(kept, pa.int32()))
    before = numbered.filter(old).select(STEP_COLUMNS)
    if before.num_rows != stored.num_rows or not before.cast(stored.schema).equals(stored):
        return None
    return numbered.filter(pc.invert(old))
