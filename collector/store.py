"""The DuckDB store: the only module of tracefix that speaks SQL.

`connect_db(path)` is the connection factory (a DuckLake catalog later is configuration
here, not a rewrite). `Store` owns one connection; `Store.reader()` hands out cursors of
the same database for concurrent reads. In `tracefix serve` only the writer thread calls
the mutating methods; a CLI without a server calls them directly on the file.

Schema changes are numbered migrations recorded in `schema_version`.
"""
from __future__ import annotations

import json
import math
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator
from urllib.parse import quote

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from tracefix.attributes import from_json_text
from tracefix.collector.jobs import FINISHED_JOB_STATES, JOB_KINDS, MAX_JOB_ATTEMPTS, replay_request
from tracefix.collector import DEFAULT_DB, document, jsonsafe  # noqa: F401 (DEFAULT_DB re-exported)
from tracefix.collector.keyset import KeySet
from tracefix.collector.normalize import SPAN_COLUMNS, Batch, spans_table  # noqa: F401 (re-exported)

_HEX = re.compile(r"[0-9a-f]{1,64}")  # span ids are hex we wrote ourselves: safe to inline in SQL


def _distinct_spans(table: pa.Table) -> int:
    """How many different spans (trace_id, span_id) an Arrow table of spans holds."""
    return pc.count_distinct(pc.binary_join_element_wise(table["trace_id"], table["span_id"], "")).as_py()


def _in_strings(values: Iterable[str]) -> tuple[str, list]:
    """`IN (...)` over strings, and its parameters: how the store puts a list of ids in SQL.

    DuckDB's Python client tries `import pandas` for every bound parameter value (each failed
    attempt walks sys.path: ~2 ms of each ingest transaction went there), so the values go
    in as SQL string literals. A value with a NUL byte, which SQL text cannot carry, falls
    back to a bound list."""
    values = list(values)
    if any("\x00" in v for v in values):
        return "IN (SELECT unnest(?::VARCHAR[]))", [values]
    return "IN (" + (", ".join("'" + v.replace("'", "''") + "'" for v in values) or "NULL") + ")", []


STEP_SOURCE_COLUMNS = ("session_id", "kind", "step", "start_ns", "call_seq", "span_id", "trace_id")


def numbered_steps(spans: pa.Table) -> pa.Table:
    """The steps table's rows for these spans: each session's LLM calls and messages numbered
    0..n-1 by `tracefix.step` (absent last), then start time, call sequence and span id. A
    span present twice (a retry merged into the batch) counts once. Done in Arrow, not SQL:
    a DuckDB window over a registered Arrow table cost ~3 ms per ingest transaction."""
    spans = spans.filter(pc.is_in(spans["kind"], value_set=pa.array(["llm", "message"])))
    spans = spans.take(pc.sort_indices(spans, sort_keys=[
        ("session_id", "ascending"), ("step", "ascending", "at_end"), ("start_ns", "ascending"),
        ("call_seq", "ascending", "at_end"), ("span_id", "ascending"), ("trace_id", "ascending")]))
    keep, idx = [], []
    prev_sid = prev_span = None
    n = 0
    for i, (sid, trace_id, span_id) in enumerate(zip(spans["session_id"].to_pylist(), spans["trace_id"].to_pylist(),
                                                      spans["span_id"].to_pylist())):
        if (sid, trace_id, span_id) == prev_span:
            continue
        n = n + 1 if sid == prev_sid else 0
        prev_sid, prev_span = sid, (sid, trace_id, span_id)
        keep.append(i)
        idx.append(n)
    spans = spans.take(pa.array(keep, pa.int64()))
    return pa.table({"session_id": spans["session_id"], "idx": pa.array(idx, pa.int32()),
                     "trace_id": spans["trace_id"], "span_id": spans["span_id"],
                     "raw_step": spans["step"], "started_ns": spans["start_ns"]})


class UnknownSession(KeyError):
    pass


def check_score(score: float) -> float:
    """A feedback score as stored: a finite number. NaN compares false with everything (it
    would never alert) and ±Infinity is no JSON number, so both are refused."""
    if not math.isfinite(score):
        raise ValueError(f"feedback 'score' must be a finite number, not {score!r}")
    return score


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
    target = str(path or os.environ.get("TRACEFIX_DB") or DEFAULT_DB)
    if target != ":memory:":
        Path(target).parent.mkdir(parents=True, exist_ok=True)
    threads = threads or int(os.environ.get("TRACEFIX_DB_THREADS") or 0) or None
    config = {"threads": threads} if threads else {}
    threshold = checkpoint_threshold or os.environ.get("TRACEFIX_CHECKPOINT_THRESHOLD")
    if threshold:
        config["checkpoint_threshold"] = threshold
    memory_limit = os.environ.get("TRACEFIX_DB_MEMORY_LIMIT") or memory_limit
    if memory_limit:
        config["memory_limit"] = memory_limit
    return duckdb.connect(target, read_only=read_only, config=config)


MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (1, "initial schema", [
        """CREATE TABLE sessions (
            session_id VARCHAR PRIMARY KEY, service VARCHAR, name VARCHAR, entrypoint VARCHAR,
            inputs VARCHAR, user_id VARCHAR, metadata VARCHAR, outcome VARCHAR, score DOUBLE,
            output VARCHAR, evaluation VARCHAR, replayable BOOLEAN, parent_session_id VARCHAR,
            intervention_id VARCHAR, intervention VARCHAR, started_ns BIGINT, ended_ns BIGINT,
            source VARCHAR, updated_ns BIGINT)""",
        """CREATE TABLE spans (
            trace_id VARCHAR NOT NULL, span_id VARCHAR NOT NULL, parent_span_id VARCHAR,
            session_id VARCHAR NOT NULL, service VARCHAR, name VARCHAR, span_kind INTEGER,
            kind VARCHAR, start_ns BIGINT, end_ns BIGINT, status_code INTEGER, status_message VARCHAR,
            step INTEGER, call_seq INTEGER, agent VARCHAR, model VARCHAR, provider VARCHAR,
            input_tokens BIGINT, output_tokens BIGINT, finish_reason VARCHAR,
            input_keys BIGINT[], output_key BIGINT, message_dialect VARCHAR,
            tool_name VARCHAR, tool_call_id VARCHAR, tool_arguments VARCHAR, tool_result VARCHAR,
            error VARCHAR, replay_source VARCHAR, truncated BOOLEAN, scope VARCHAR, resource VARCHAR,
            attributes VARCHAR, events VARCHAR,
            PRIMARY KEY (trace_id, span_id))""",
        # content-addressed chat messages: key = first 8 bytes of sha256(canonical JSON)
        "CREATE TABLE messages (key BIGINT PRIMARY KEY, sha256 VARCHAR, message VARCHAR)",
        # steps are derived from spans per touched session after each commit
        """CREATE TABLE steps (session_id VARCHAR, idx INTEGER, trace_id VARCHAR, span_id VARCHAR,
            raw_step INTEGER, started_ns BIGINT)""",
        """CREATE TABLE snapshots (session_id VARCHAR, trace_id VARCHAR, span_id VARCHAR, seq INTEGER,
            key VARCHAR, state VARCHAR, hash VARCHAR, step INTEGER, time_ns BIGINT,
            PRIMARY KEY (trace_id, span_id, seq))""",
        """CREATE TABLE feedback (feedback_id VARCHAR PRIMARY KEY, session_id VARCHAR, score DOUBLE,
            comment VARCHAR, source VARCHAR, created_ns BIGINT)""",
        # the alert outbox: one alert per negative feedback, one delivery per webhook
        """CREATE TABLE alerts (alert_id VARCHAR PRIMARY KEY, feedback_id VARCHAR, session_id VARCHAR,
            payload VARCHAR, fanout_done BOOLEAN, created_ns BIGINT)""",
        """CREATE TABLE deliveries (alert_id VARCHAR, webhook VARCHAR, state VARCHAR, attempts INTEGER,
            next_attempt_ns BIGINT, last_error VARCHAR, delivered_ns BIGINT,
            PRIMARY KEY (alert_id, webhook))""",
        """CREATE TABLE jobs (job_id VARCHAR PRIMARY KEY, session_id VARCHAR, kind VARCHAR, state VARCHAR,
            reason VARCHAR, attempts INTEGER, error VARCHAR, created_ns BIGINT, started_ns BIGINT,
            finished_ns BIGINT)""",
        "CREATE TABLE analyses (session_id VARCHAR PRIMARY KEY, result VARCHAR, created_ns BIGINT)",
        "CREATE TABLE replays (session_id VARCHAR PRIMARY KEY, result VARCHAR, created_ns BIGINT)",
        """CREATE VIEW tool_calls AS SELECT session_id, trace_id, span_id, parent_span_id, step,
            tool_name, tool_call_id, tool_arguments, tool_result, error, start_ns, end_ns
            FROM spans WHERE kind = 'tool'""",
    ]),
    (2, "content-addressed tool definitions of LLM spans", [
        "ALTER TABLE spans ADD COLUMN tools_key BIGINT",
    ]),
    # An ART index on (trace_id, span_id) cost two thirds of insert throughput; duplicates are
    # now refused by an anti-join limited to the batch's time range (zonemap-pruned), see _ingest.
    (3, "spans without a primary key index", [
        "DROP VIEW tool_calls",
        "CREATE TABLE spans_v3 AS SELECT * FROM spans ORDER BY start_ns",
        "DROP TABLE spans",
        "ALTER TABLE spans_v3 RENAME TO spans",
        """CREATE VIEW tool_calls AS SELECT session_id, trace_id, span_id, parent_span_id, step,
            tool_name, tool_call_id, tool_arguments, tool_result, error, start_ns, end_ns
            FROM spans WHERE kind = 'tool'""",
    ]),
    # same reason as 3: snapshot rows are deduplicated by a time-pruned anti-join
    (4, "snapshots without a primary key index", [
        "CREATE TABLE snapshots_v4 AS SELECT * FROM snapshots ORDER BY time_ns",
        "DROP TABLE snapshots",
        "ALTER TABLE snapshots_v4 RENAME TO snapshots",
    ]),
    # DuckDB rewrites a whole ART index at each checkpoint (0.6 s at 3M messages): the writer
    # knows the stored keys instead (tracefix.collector.keyset)
    (5, "messages without a primary key index", [
        "CREATE TABLE messages_v5 AS SELECT * FROM messages",
        "DROP TABLE messages",
        "ALTER TABLE messages_v5 RENAME TO messages",
    ]),
    # replay runs in `tracefix worker` processes beside the agent's code, never in the collector:
    # a replay job is leased to one worker, which renews the lease while it runs
    (6, "jobs leased to workers", [
        "ALTER TABLE jobs ADD COLUMN worker VARCHAR",
        "ALTER TABLE jobs ADD COLUMN lease_until_ns BIGINT",
        # what a person asked a replay job to test (replay_request), JSON
        "ALTER TABLE jobs ADD COLUMN options VARCHAR",
    ]),
]

# The span columns of a span dict (document.span_dict), in its order.
SPAN_DICT_COLUMNS = ["trace_id", "span_id", "parent_span_id", "session_id", "service", "name", "span_kind", "kind",
                     "start_ns", "end_ns", "status_code", "status_message", "attributes", "events", "resource",
                     "scope", "message_dialect", "input_keys", "output_key", "tools_key"]
# The span columns the session document is built from (document.build).
DOCUMENT_SPAN_COLUMNS = ["trace_id", "span_id", "parent_span_id", "name", "kind", "start_ns", "end_ns", "status_code",
                         "step", "call_seq", "agent", "model", "input_tokens", "output_tokens", "finish_reason",
                         "input_keys", "output_key", "tool_name", "tool_call_id", "tool_arguments", "tool_result",
                         "error", "replay_source", "truncated"]
# What one API page of a session may hold, in characters of content (docs/contracts.md §1b):
# reads stay bounded however long the session or its messages are.
PAGE_BUDGET_CHARS = 4_000_000

SESSION_FIELDS = ["session_id", "service", "name", "entrypoint", "inputs", "user_id", "metadata", "outcome",
                  "score", "output", "evaluation", "replayable", "parent_session_id", "intervention_id",
                  "intervention", "started_ns", "ended_ns", "source", "updated_ns"]
SESSION_SCHEMA = pa.schema([(f, pa.float64() if f == "score" else pa.bool_() if f == "replayable"
                             else pa.int64() if f.endswith("_ns") else pa.string()) for f in SESSION_FIELDS])


def _merge_expressions() -> list[str]:
    out = []
    for f in SESSION_FIELDS[1:]:
        if f == "started_ns":
            out.append("started_ns = least(sessions.started_ns, u.started_ns)")
        elif f == "ended_ns":
            out.append("ended_ns = greatest(sessions.ended_ns, u.ended_ns)")
        elif f == "replayable":  # false wins: one truncated span makes the session not replayable
            out.append("replayable = CASE WHEN sessions.replayable = false OR u.replayable = false "
                       "THEN false ELSE coalesce(u.replayable, sessions.replayable) END")
        elif f == "source":
            out.append("source = coalesce(sessions.source, u.source)")
        else:
            out.append(f"{f} = coalesce(u.{f}, sessions.{f})")
    return out


_MERGE_SESSION = _merge_expressions()


def _now_ns() -> int:
    return time.time_ns()


def _insert_job(con, session_id: str, kind: str, reason: str, created_ns: int, options: dict | None = None) -> str:
    job_id = f"job-{uuid.uuid4().hex[:16]}"
    con.execute("INSERT INTO jobs (job_id, session_id, kind, state, reason, attempts, created_ns, options) "
                "VALUES (?, ?, ?, 'queued', ?, 0, ?, ?)",
                [job_id, session_id, kind, reason, created_ns, json.dumps(options) if options else None])
    return job_id


class Store:
    def __init__(self, path: str | os.PathLike | None = None, *, read_only: bool = False,
                 threads: int | None = None, checkpoint_threshold: str | None = None,
                 memory_limit: str | None = None):
        self.path = str(path or os.environ.get("TRACEFIX_DB") or DEFAULT_DB)
        self.con = connect_db(self.path, read_only=read_only, threads=threads,
                              checkpoint_threshold=checkpoint_threshold, memory_limit=memory_limit)
        self._local = threading.local()
        self._message_keys: KeySet | None = None  # loaded by the first write of messages
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._cursors_lock = threading.Lock()
        if not read_only:
            self.migrate()

    # --- lifecycle -------------------------------------------------------------------------
    def migrate(self) -> int:
        con = self.con
        con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                    "description VARCHAR, applied_ns BIGINT)")
        current = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]
        for version, description, statements in MIGRATIONS:
            if version <= current:
                continue
            con.begin()
            try:
                for sql in statements:
                    con.execute(sql)
                con.execute("INSERT INTO schema_version VALUES (?, ?, ?)", [version, description, _now_ns()])
                con.commit()
            except Exception:
                con.rollback()
                raise
            current = version
        return current

    def schema_version(self) -> int:
        return self._read().execute("SELECT max(version) FROM schema_version").fetchone()[0]

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
        """Fold the WAL into the file (a crash without it is fine: the WAL replays on open)."""
        self._close_cursors()
        try:
            self.con.execute("CHECKPOINT")
        except duckdb.Error:  # a reader thread still mid-transaction: wait for it instead
            self.con.execute("FORCE CHECKPOINT")

    def close(self) -> None:
        self._close_cursors()
        self.con.close()

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
            cur = self.con.cursor()
            self._local.cursor = cur
            with self._cursors_lock:
                self._cursors.append(cur)
        return cur

    def _tx(self):
        return _Transaction(self.con)

    # --- ingest ----------------------------------------------------------------------------
    def ingest(self, batch: Batch, *, alert_threshold: float = 0.0, webhooks: Iterable[str] = (),
               public_url: str | None = None) -> dict:
        """Store one batch in one transaction; returns what it created (feedback, alerts, jobs)."""
        with self._tx() as con:
            created, message_keys = self._ingest(con, batch, alert_threshold, list(webhooks), public_url)
        self._message_keys.add(message_keys)  # committed: from now on they are stored
        return created

    def _new_messages(self, con, batch: Batch) -> list[int]:
        """Keys of the batch's messages not stored yet. This store is its file's only writer
        (DuckDB lets one process write; the collector has one Store), so the keys it loaded
        and added since are exactly the stored ones."""
        if self._message_keys is None:
            stored = con.execute("SELECT key FROM messages").to_arrow_table().column("key")
            self._message_keys = KeySet(stored.to_numpy())
        return self._message_keys.missing(list(batch.messages))

    def _ingest(self, con, batch: Batch, alert_threshold: float, webhooks: list[str],
                public_url) -> tuple[dict, list[int]]:
        """Write one batch in the caller's transaction. Returns what it created (feedback,
        alerts, jobs) and the keys of the messages it inserted, stored once it commits."""
        if batch.fallback_traces:  # rare: foreign spans that name their session on some spans only
            in_traces, params = _in_strings(batch.fallback_traces)
            found = con.execute(f"SELECT trace_id, any_value(session_id) FROM spans WHERE trace_id {in_traces} "
                                "AND session_id <> trace_id GROUP BY trace_id", params).fetchall()
            batch.reassign(dict(found))
        # The Arrow tables of a transaction reach DuckDB as local variables its SQL names
        # (DuckDB's replacement scans; no table is called `_..._batch`): con.register and
        # unregister cost ~0.8 ms per table, and a transaction has up to six.
        keys = self._new_messages(con, batch)
        if keys:
            _msg_batch = pa.table({"key": pa.array(keys, pa.int64()),  # noqa: F841 (scanned by name)
                                   "sha256": pa.array([batch.messages[k][0] for k in keys], pa.string()),
                                   "message": pa.array([batch.messages[k][1] for k in keys], pa.string())})
            con.execute("INSERT INTO messages SELECT * FROM _msg_batch")
        table = batch.span_arrow()
        if table is not None and not table.num_rows:
            table = None
        # Sessions first: a span is written in the same transaction as its session's row, so
        # only spans of sessions that existed before can be stored already (an exporter retry).
        # A span stored before its trace's session was known sits in the trace id's session.
        touched = list(batch.sessions)
        span_range, new_sessions, existed = None, set(), table is not None
        if batch.sessions:
            trace_ids = pc.unique(table["trace_id"]).to_pylist() if table is not None else []
            span_range, new_sessions, existed = self._upsert_sessions(con, batch.sessions, source="otlp",
                                                                      fallback_ids=trace_ids)
        # fresh: every span of the batch was new, so none of its snapshots can be stored yet
        fresh, source = True, "_span_batch"
        if table is not None:
            table = _span_batch = table.combine_chunks()  # one chunk per column: scanned ~30% faster
            unique = _distinct_spans(table) if batch.merged else table.num_rows
            if unique != table.num_rows:  # requests merged into one transaction repeat a span (a retry)
                source = "(SELECT DISTINCT ON (trace_id, span_id) * FROM _span_batch)"
            if existed:
                # a retried span has the same start time: only row groups overlapping the batch's
                # time range are read (zonemaps), so this stays cheap as the table grows
                lo, hi = (int(x.as_py()) for x in pc.min_max(table["start_ns"]).values())
                inserted = con.execute(f"""INSERT INTO spans SELECT b.* FROM {source} b WHERE NOT EXISTS (
                                    SELECT 1 FROM spans s WHERE s.start_ns BETWEEN {lo} AND {hi}
                                    AND s.trace_id = b.trace_id AND s.span_id = b.span_id)""").fetchone()[0]
            else:  # only new sessions: nothing stored to compare against
                inserted = con.execute(f"INSERT INTO spans SELECT * FROM {source}").fetchone()[0]
            fresh = inserted == unique
        if batch.snapshots:  # one copy per (span, event) even when a retry shares the batch
            s = list({(x.trace_id, x.span_id, x.seq): x for x in reversed(batch.snapshots)}.values())
            _snap_batch = pa.table({  # noqa: F841 (scanned by name)
                "session_id": [x.session_id for x in s], "trace_id": [x.trace_id for x in s],
                "span_id": [x.span_id for x in s], "seq": pa.array([x.seq for x in s], pa.int32()),
                "key": [x.key for x in s], "state": [x.state for x in s], "hash": pa.array([x.hash for x in s], pa.string()),
                "step": pa.array([x.step for x in s], pa.int32()), "time_ns": pa.array([x.time_ns for x in s], pa.int64())})
            if fresh:
                con.execute("INSERT INTO snapshots SELECT * FROM _snap_batch")
            else:
                lo, hi = int(min(x.time_ns for x in s)), int(max(x.time_ns for x in s))
                con.execute(f"""INSERT INTO snapshots SELECT b.* FROM _snap_batch b WHERE NOT EXISTS (
                                   SELECT 1 FROM snapshots s WHERE s.time_ns BETWEEN {lo} AND {hi}
                                   AND s.trace_id = b.trace_id AND s.span_id = b.span_id AND s.seq = b.seq)""")
        if touched:
            self._derive_steps(con, touched, span_range, new_sessions=new_sessions, batch=table)
        created = {"feedback": [], "alerts": [], "jobs": []}
        for ev in batch.evaluations:
            exists = con.execute("SELECT 1 FROM feedback WHERE feedback_id = ?", [ev.feedback_id]).fetchone()
            if exists:
                continue
            res = self._add_feedback(con, ev.session_id, ev.score, ev.comment, source="span_event",
                                     feedback_id=ev.feedback_id, created_ns=ev.time_ns,
                                     alert_threshold=alert_threshold, webhooks=webhooks, public_url=public_url)
            for k in created:
                created[k].extend(res[k])
        return created, keys

    def _upsert_sessions(self, con, sessions: dict[str, dict], source: str,
                         fallback_ids: Iterable[str] = ()) -> tuple[tuple, set[str], bool]:
        """Insert new sessions; merge fields into known ones (an UPDATE is much cheaper than
        INSERT ... ON CONFLICT in DuckDB 1.5 for the common all-new case). Returns the time
        range the touched sessions' spans start in, after the merge, the new sessions' ids, and
        whether any of them or of `fallback_ids` (the batch's trace ids) was stored before."""
        now = _now_ns()
        ids = list(sessions)
        in_ids, params = _in_strings(ids + [t for t in fallback_ids if t not in sessions])
        rows = con.execute(f"SELECT session_id, started_ns, ended_ns FROM sessions WHERE session_id {in_ids}",
                           params).fetchall()
        existed = bool(rows)
        rows = [r for r in rows if r[0] in sessions]
        known = {r[0] for r in rows}
        starts = [r[1] for r in rows] + [f.get("started_ns") for f in sessions.values()]
        ends = [r[2] for r in rows] + [f.get("ended_ns") for f in sessions.values()] + starts
        starts = [x for x in starts if x is not None]
        ends = [x for x in ends if x is not None]
        span_range = (min(starts) if starts else None, max(ends) if ends else None)
        for part, is_new in (([i for i in ids if i not in known], True), ([i for i in ids if i in known], False)):
            if not part:
                continue
            cols = {f: [] for f in SESSION_FIELDS}
            for sid in part:
                fields = sessions[sid]
                for f in SESSION_FIELDS:
                    cols[f].append(sid if f == "session_id" else source if f == "source"
                                   else now if f == "updated_ns" else fields.get(f))
            _sess_batch = pa.Table.from_arrays(  # noqa: F841 (scanned by name, see _ingest)
                [pa.array(cols[f], type=SESSION_SCHEMA.field(f).type) for f in SESSION_FIELDS], schema=SESSION_SCHEMA)
            if is_new:
                con.execute("INSERT INTO sessions SELECT * FROM _sess_batch")
            else:
                con.execute("UPDATE sessions SET " + ", ".join(_MERGE_SESSION)
                            + " FROM _sess_batch u WHERE sessions.session_id = u.session_id")
        return span_range, set(ids) - known, existed

    def _derive_steps(self, con, session_ids: list[str], span_range: tuple | None = None, *,
                      new_sessions: set | frozenset = frozenset(), batch: pa.Table | None = None) -> None:
        """Number a session's decisions 0..n-1 (`numbered_steps`). Sessions in `new_sessions`
        were created in this transaction: they have no steps to delete, and all their spans
        are in `batch` (this batch's spans), so the spans table is read only for sessions that
        existed before."""
        if batch is None:
            new_sessions = frozenset()
        old = [sid for sid in session_ids if sid not in new_sessions]
        parts = []
        if len(old) < len(session_ids):  # new sessions: their spans are all in the batch
            if old:
                batch = batch.filter(pc.is_in(batch["session_id"], value_set=pa.array(list(new_sessions), pa.string())))
            parts.append(batch.select(list(STEP_SOURCE_COLUMNS)))
        if old:
            in_old, params = _in_strings(old)
            con.execute(f"DELETE FROM steps WHERE session_id {in_old}", params)
            # a session's spans start within [started_ns, ended_ns] of its row: prune by time first
            lo, hi = span_range if span_range and None not in span_range else (-(1 << 63), (1 << 63) - 1)
            parts.append(con.execute(f"SELECT {', '.join(STEP_SOURCE_COLUMNS)} FROM spans "
                                     f"WHERE start_ns BETWEEN {int(lo)} AND {int(hi)} AND kind IN ('llm', 'message') "
                                     f"AND session_id {in_old}", params).to_arrow_table())
        _steps_batch = numbered_steps(pa.concat_tables(parts)) if parts else None
        if _steps_batch is not None and _steps_batch.num_rows:
            con.execute("INSERT INTO steps SELECT * FROM _steps_batch")  # scanned by name, see _ingest

    # --- feedback, alerts, jobs ----------------------------------------------------------
    def add_feedback(self, session_id: str, score: float, comment: str | None = None, *, source: str = "api",
                     alert_threshold: float = 0.0, webhooks: Iterable[str] = (), public_url: str | None = None) -> dict:
        """Record feedback; below the threshold, the alert (outbox) and a diagnosis job are
        created in the same transaction. Raises UnknownSession."""
        score = check_score(float(score))
        with self._tx() as con:
            res = self._add_feedback(con, session_id, score, comment, source=source,
                                     feedback_id=None, created_ns=None, alert_threshold=alert_threshold,
                                     webhooks=list(webhooks), public_url=public_url)
        fb = res["feedback"][0]
        fb["alert_id"] = res["alerts"][0]["alert_id"] if res["alerts"] else None
        fb["job_id"] = res["jobs"][0]["job_id"] if res["jobs"] else None
        return fb

    def _add_feedback(self, con, session_id, score, comment, *, source, feedback_id, created_ns,
                      alert_threshold, webhooks, public_url) -> dict:
        row = con.execute("SELECT session_id, metadata, inputs, output FROM sessions WHERE session_id = ?",
                          [session_id]).fetchone()
        if row is None:
            raise UnknownSession(session_id)
        feedback_id = feedback_id or f"fb-{uuid.uuid4().hex[:16]}"
        created_ns = created_ns or _now_ns()
        con.execute("INSERT INTO feedback VALUES (?, ?, ?, ?, ?, ?)",
                    [feedback_id, session_id, score, comment, source, created_ns])
        fb = {"feedback_id": feedback_id, "session_id": session_id, "score": score, "comment": comment,
              "source": source, "created_at": document.iso(created_ns)}
        out = {"feedback": [fb], "alerts": [], "jobs": []}
        if score < alert_threshold:
            alert_id = f"al-{uuid.uuid4().hex[:16]}"
            task = self._task_of(con, session_id)
            final_answer = document.final_answer(from_json_text(row[3]))
            link = f"{(public_url or '').rstrip('/')}/api/v1/sessions/{quote(session_id, safe='')}/report"
            payload = {
                "text": f":thumbsdown: tracefix: negative feedback ({score:g}) on session {session_id}"
                        + (f": {comment}" if comment else "") + (f"\nTask: {task}" if task else "")
                        + f"\nReport: {link}",
                "alert_id": alert_id, "session_id": session_id, "score": score, "task": task,
                "final_answer": final_answer, "comment": comment, "link": link,
            }
            con.execute("INSERT INTO alerts VALUES (?, ?, ?, ?, ?, ?)",
                        [alert_id, feedback_id, session_id, jsonsafe.dumps(payload), bool(public_url), created_ns])
            for url in dict.fromkeys(webhooks):
                con.execute("INSERT INTO deliveries VALUES (?, ?, 'pending', 0, ?, NULL, NULL)",
                            [alert_id, url, created_ns])
            job_id = _insert_job(con, session_id, "diagnosis", f"feedback {feedback_id}", created_ns)
            out["alerts"].append({"alert_id": alert_id, "payload": payload})
            out["jobs"].append({"job_id": job_id, "session_id": session_id})
        return out

    def _task_of(self, con, session_id: str) -> str | None:
        sess = con.execute("SELECT metadata, inputs FROM sessions WHERE session_id = ?", [session_id]).fetchone()
        msgs = self._first_messages(con, [session_id]).get(session_id, [])
        return document.task_of(from_json_text(sess[0]) if sess else None, from_json_text(sess[1]) if sess else None,
                                msgs)

    def _first_messages(self, con, session_ids: list[str]) -> dict[str, list[dict]]:
        """The input messages of each session's step 0 (where the task usually is)."""
        in_sessions, params = _in_strings(session_ids)
        firsts = con.execute(f"SELECT session_id, span_id, started_ns FROM steps WHERE idx = 0 "
                             f"AND session_id {in_sessions}", params).fetchall()
        span_ids = [r[1] for r in firsts if _HEX.fullmatch(r[1] or "")]
        if not span_ids:
            return {}
        starts = [r[2] for r in firsts if r[2] is not None]
        lo, hi = (min(starts), max(starts)) if starts else (-(1 << 63), (1 << 63) - 1)
        in_spans, _ = _in_strings(span_ids)  # hex: never the bound fallback
        rows = con.execute(
            f"""SELECT session_id, kind, input_keys, output_key FROM spans
                WHERE start_ns BETWEEN {int(lo)} AND {int(hi)} AND span_id {in_spans}
                AND session_id {in_sessions}""", params).fetchall()
        wanted = {sid: (list(keys or []) + ([out] if kind == "message" and out is not None else []))
                  for sid, kind, keys, out in rows}
        texts = self._message_texts({k for keys in wanted.values() for k in keys}, con)
        return {sid: [json.loads(texts[k]) for k in keys if k in texts] for sid, keys in wanted.items()}

    def fan_out_alerts(self, webhooks: list[str], public_url: str) -> int:
        """Give alerts recorded without a server (CLI on the file) a delivery per webhook."""
        with self._tx() as con:
            rows = con.execute("SELECT alert_id, payload, created_ns FROM alerts WHERE NOT fanout_done").fetchall()
            for alert_id, payload, created_ns in rows:
                p = json.loads(payload)
                if not p.get("link", "").startswith("http"):
                    p["link"] = f"{public_url.rstrip('/')}{p['link']}"
                    p["text"] = p["text"].replace("Report: /api", f"Report: {public_url.rstrip('/')}/api")
                for url in dict.fromkeys(webhooks):
                    con.execute("INSERT OR IGNORE INTO deliveries VALUES (?, ?, 'pending', 0, ?, NULL, NULL)",
                                [alert_id, url, created_ns])
                con.execute("UPDATE alerts SET fanout_done = true, payload = ? WHERE alert_id = ?",
                            [jsonsafe.dumps(p), alert_id])
        return len(rows)

    def due_deliveries(self, now_ns: int | None = None, limit: int = 50) -> list[dict]:
        rows = self._read().execute(
            """SELECT d.alert_id, d.webhook, d.attempts, a.payload FROM deliveries d JOIN alerts a USING (alert_id)
               WHERE d.state = 'pending' AND d.next_attempt_ns <= ? ORDER BY d.next_attempt_ns LIMIT ?""",
            [now_ns or _now_ns(), limit]).fetchall()
        return [{"alert_id": r[0], "webhook": r[1], "attempts": r[2], "payload": json.loads(r[3])} for r in rows]

    def next_delivery_ns(self) -> int | None:
        return self._read().execute("SELECT min(next_attempt_ns) FROM deliveries WHERE state = 'pending'").fetchone()[0]

    def mark_delivery(self, alert_id: str, webhook: str, *, delivered: bool, error: str | None = None,
                      next_attempt_ns: int | None = None, dead: bool = False) -> None:
        """Record one attempt: delivered, failed and due again at `next_attempt_ns`, or failed and
        `dead` (dead-lettered: kept with its last error for `list_alerts`, never due again)."""
        with self._tx() as con:
            if delivered:
                con.execute("UPDATE deliveries SET state = 'delivered', attempts = attempts + 1, delivered_ns = ?, "
                            "last_error = NULL WHERE alert_id = ? AND webhook = ?", [_now_ns(), alert_id, webhook])
            elif dead:
                con.execute("UPDATE deliveries SET state = 'dead', attempts = attempts + 1, last_error = ?, "
                            "next_attempt_ns = NULL WHERE alert_id = ? AND webhook = ?", [error, alert_id, webhook])
            else:
                con.execute("UPDATE deliveries SET attempts = attempts + 1, last_error = ?, next_attempt_ns = ? "
                            "WHERE alert_id = ? AND webhook = ?", [error, next_attempt_ns, alert_id, webhook])

    def list_alerts(self, session_id: str | None = None) -> list[dict]:
        rows = self._read().execute(
            """SELECT a.alert_id, a.feedback_id, a.session_id, a.payload, a.created_ns,
                      list({'webhook': d.webhook, 'state': d.state, 'attempts': d.attempts,
                            'last_error': d.last_error, 'delivered_ns': d.delivered_ns}) FILTER (d.webhook IS NOT NULL)
               FROM alerts a LEFT JOIN deliveries d USING (alert_id)
               WHERE ? IS NULL OR a.session_id = ?
               GROUP BY ALL ORDER BY a.created_ns""", [session_id, session_id]).fetchall()
        out = []
        for r in rows:
            deliveries = [{**{k: v for k, v in d.items() if k != "delivered_ns"},
                           "delivered_at": document.iso(d["delivered_ns"])} for d in (r[5] or [])]
            out.append({"alert_id": r[0], "feedback_id": r[1], "session_id": r[2], "payload": json.loads(r[3]),
                        "created_at": document.iso(r[4]), "deliveries": deliveries})
        return out

    def enqueue_job(self, session_id: str, reason: str = "manual", kind: str = "diagnosis",
                    options: dict | None = None) -> dict:
        """Queue a job; a replay job's `options` is a `replay_request` (what to test)."""
        if kind not in JOB_KINDS:
            raise ValueError(f"a job's kind is one of {', '.join(JOB_KINDS)}, not {kind!r}")
        if options and kind != "replay":
            raise ValueError("only a replay job takes steps or an edit")
        options = replay_request(options.get("steps"), options.get("edit")) if options else None
        with self._tx() as con:
            if con.execute("SELECT 1 FROM sessions WHERE session_id = ?", [session_id]).fetchone() is None:
                raise UnknownSession(session_id)
            job_id = _insert_job(con, session_id, kind, reason, _now_ns(), options)
        return {"job_id": job_id, "session_id": session_id, "kind": kind, "state": "queued", "options": options}

    def claim_job(self, kind: str = "diagnosis", worker: str | None = None, lease_s: float | None = None) -> dict | None:
        """The oldest queued job of `kind`, now running. With `lease_s` the job is leased to
        `worker` until the lease runs out; an expired lease (a worker that died) puts its job
        back in the queue first, or fails it after MAX_JOB_ATTEMPTS."""
        now = _now_ns()
        with self._tx() as con:
            con.execute("UPDATE jobs SET state = 'failed', finished_ns = ?, "
                        "error = 'its worker stopped renewing the lease ' || attempts || ' times' "
                        "WHERE kind = ? AND state = 'running' AND lease_until_ns < ? AND attempts >= ?",
                        [now, kind, now, MAX_JOB_ATTEMPTS])
            con.execute("UPDATE jobs SET state = 'queued', worker = NULL, lease_until_ns = NULL "
                        "WHERE kind = ? AND state = 'running' AND lease_until_ns < ?", [kind, now])
            row = con.execute("SELECT job_id FROM jobs WHERE kind = ? AND state = 'queued' ORDER BY created_ns LIMIT 1",
                              [kind]).fetchone()
            if row is None:
                return None
            lease = now + int(lease_s * 1e9) if lease_s else None
            con.execute("UPDATE jobs SET state = 'running', attempts = attempts + 1, started_ns = ?, worker = ?, "
                        "lease_until_ns = ? WHERE job_id = ?", [now, worker, lease, row[0]])
        return self.get_job(row[0])

    def renew_lease(self, job_id: str, worker: str, lease_s: float) -> bool:
        """Extend a running job's lease; False when the job is no longer this worker's."""
        with self._tx() as con:
            row = con.execute("UPDATE jobs SET lease_until_ns = ? WHERE job_id = ? AND state = 'running' "
                              "AND worker = ? RETURNING job_id", [_now_ns() + int(lease_s * 1e9), job_id, worker]
                              ).fetchone()
        return row is not None

    def finish_job(self, job_id: str, *, error: str | None = None, state: str | None = None,
                   worker: str | None = None) -> bool:
        """End a running job: `done`, `failed` (with `error`) or `refused` (the worker may not
        run it; `error` says why). With `worker`, only that worker's job; False otherwise."""
        state = state or ("failed" if error else "done")
        if state not in FINISHED_JOB_STATES:
            raise ValueError(f"a finished job's state is one of {', '.join(FINISHED_JOB_STATES)}, not {state!r}")
        with self._tx() as con:
            row = con.execute("UPDATE jobs SET state = ?, error = ?, finished_ns = ?, lease_until_ns = NULL "
                              "WHERE job_id = ? AND state = 'running' AND (? IS NULL OR worker = ?) RETURNING job_id",
                              [state, error, _now_ns(), job_id, worker, worker]).fetchone()
        return row is not None

    def requeue_running_jobs(self, kind: str = "diagnosis") -> int:
        """Jobs of `kind` left `running` by a crash of this process run again, unless they
        already ran MAX_JOB_ATTEMPTS times: a job that takes the process down with it must not
        do so at every start (leased jobs belong to workers that may outlive the collector:
        their leases decide)."""
        with self._tx() as con:
            con.execute("UPDATE jobs SET state = 'failed', finished_ns = ?, "
                        "error = 'the collector stopped while running it ' || attempts || ' times' "
                        "WHERE state = 'running' AND kind = ? AND attempts >= ?", [_now_ns(), kind, MAX_JOB_ATTEMPTS])
            n = con.execute("SELECT count(*) FROM jobs WHERE state = 'running' AND kind = ?", [kind]).fetchone()[0]
            con.execute("UPDATE jobs SET state = 'queued' WHERE state = 'running' AND kind = ?", [kind])
        return n

    def get_job(self, job_id: str) -> dict | None:
        jobs = self.list_jobs(job_id=job_id)
        return jobs[0] if jobs else None

    def job_counts(self) -> dict[tuple[str, str], int]:
        """How many jobs there are of each (kind, state), on a cursor of its own."""
        cur = self.cursor()
        try:
            return {(kind, state): n for kind, state, n in
                    cur.execute("SELECT kind, state, count(*) FROM jobs GROUP BY kind, state").fetchall()}
        finally:
            cur.close()

    def list_jobs(self, state: str | None = None, session_id: str | None = None, job_id: str | None = None,
                  kind: str | None = None) -> list[dict]:
        rows = self._read().execute(
            """SELECT job_id, session_id, kind, state, reason, attempts, error, created_ns, started_ns, finished_ns,
                      worker, lease_until_ns, options
               FROM jobs WHERE (? IS NULL OR state = ?) AND (? IS NULL OR session_id = ?) AND (? IS NULL OR job_id = ?)
               AND (? IS NULL OR kind = ?) ORDER BY created_ns""",
            [state, state, session_id, session_id, job_id, job_id, kind, kind]).fetchall()
        return [{"job_id": r[0], "session_id": r[1], "kind": r[2], "state": r[3], "reason": r[4], "attempts": r[5],
                 "error": r[6], "created_at": document.iso(r[7]), "started_at": document.iso(r[8]),
                 "finished_at": document.iso(r[9]), "worker": r[10], "lease_until": document.iso(r[11]),
                 "options": from_json_text(r[12])}
                for r in rows]

    # --- analysis / replay results ---------------------------------------------------------
    def _save_result(self, table: str, session_id: str, result: dict) -> None:
        with self._tx() as con:
            con.execute(f"INSERT OR REPLACE INTO {table} VALUES (?, ?, ?)",
                        [session_id, json.dumps(result, ensure_ascii=False), _now_ns()])

    def _get_result(self, table: str, session_id: str) -> dict | None:
        row = self._read().execute(f"SELECT result FROM {table} WHERE session_id = ?", [session_id]).fetchone()
        return json.loads(row[0]) if row else None

    def save_analysis(self, session_id: str, result: dict) -> None:
        self._save_result("analyses", session_id, result)

    def get_analysis(self, session_id: str) -> dict | None:
        return self._get_result("analyses", session_id)

    def save_replay(self, session_id: str, result: dict) -> None:
        self._save_result("replays", session_id, result)

    def get_replay(self, session_id: str) -> dict | None:
        return self._get_result("replays", session_id)

    # --- import of message-log sessions ------------------------------------------------------
    def import_sessions(self, docs: list[dict]) -> list[str]:
        from tracefix.collector.imports import batch_from_documents

        batch, ids = batch_from_documents(docs)
        with self._tx() as con:
            _, message_keys = self._ingest(con, batch, 0.0, [], None)
            in_ids, params = _in_strings(ids)
            con.execute(f"UPDATE sessions SET source = 'import' WHERE session_id {in_ids}", params)
        self._message_keys.add(message_keys)
        return ids

    # --- reads ---------------------------------------------------------------------------------
    def session_exists(self, session_id: str) -> bool:
        return self._read().execute("SELECT 1 FROM sessions WHERE session_id = ?", [session_id]).fetchone() is not None

    def list_sessions(self, feedback: str | None = None, outcome: str | None = None, service: str | None = None,
                      agent: str | None = None, since: Any = None, until: Any = None, limit: int = 50,
                      offset: int = 0, parent_session_id: str | None = None) -> list[dict]:
        where, params = ["true"], []
        if feedback == "negative":
            where.append("s.session_id IN (SELECT session_id FROM feedback WHERE score < 0)")
        elif feedback == "positive":
            where.append("s.session_id IN (SELECT session_id FROM feedback WHERE score > 0)")
        elif feedback == "any":
            where.append("s.session_id IN (SELECT session_id FROM feedback)")
        elif feedback is not None:
            raise ValueError("feedback must be 'negative', 'positive' or 'any'")
        if outcome is not None:
            where.append("s.outcome = ?")
            params.append(outcome)
        if service is not None:
            where.append("s.service = ?")
            params.append(service)
        if agent is not None:
            where.append("s.session_id IN (SELECT session_id FROM spans WHERE agent = ?)")
            params.append(agent)
        if since is not None:
            where.append("s.started_ns >= ?")
            params.append(document.to_ns(since))
        if until is not None:
            where.append("s.started_ns < ?")
            params.append(document.to_ns(until))
        if parent_session_id is not None:
            where.append("s.parent_session_id = ?")
            params.append(parent_session_id)
        cur = self._read()
        rows = cur.execute(
            f"""WITH page AS (SELECT * FROM sessions s WHERE {' AND '.join(where)}
                              ORDER BY s.started_ns DESC NULLS LAST, s.session_id LIMIT ? OFFSET ?),
                agg AS (SELECT session_id, count(*) FILTER (WHERE kind IN ('llm', 'message')) AS n_steps,
                               list(DISTINCT agent) FILTER (WHERE agent IS NOT NULL) AS agents,
                               list(DISTINCT model) FILTER (WHERE model IS NOT NULL) AS models,
                               count(*) FILTER (WHERE error IS NOT NULL) AS n_errors,
                               count(*) AS n_spans
                        FROM spans WHERE session_id IN (SELECT session_id FROM page) GROUP BY session_id),
                fb AS (SELECT session_id, arg_max(score, created_ns) AS last_score, count(*) AS n_feedback
                       FROM feedback WHERE session_id IN (SELECT session_id FROM page) GROUP BY session_id)
                SELECT page.session_id, page.service, page.name, page.entrypoint, page.outcome, page.score,
                       page.started_ns, page.ended_ns, page.parent_session_id, page.replayable, page.source,
                       agg.n_steps, agg.agents, agg.models, agg.n_errors, agg.n_spans, fb.last_score, fb.n_feedback,
                       page.metadata, page.inputs
                FROM page LEFT JOIN agg USING (session_id) LEFT JOIN fb USING (session_id)
                ORDER BY page.started_ns DESC NULLS LAST, page.session_id""",
            [*params, int(limit), int(offset)]).fetchall()
        firsts = self._first_messages(cur, [r[0] for r in rows]) if rows else {}
        out = []
        for r in rows:
            out.append({
                "session_id": r[0], "service": r[1], "name": r[2], "entrypoint": r[3], "outcome": r[4],
                "score": r[5], "started_at": document.iso(r[6]), "ended_at": document.iso(r[7]),
                "duration_ms": document.duration_ms(r[6], r[7]), "parent_session_id": r[8],
                "replayable": bool(r[9]), "source": r[10], "steps": r[11] or 0, "agents": sorted(r[12] or []),
                "models": sorted(r[13] or []), "errors": r[14] or 0, "spans": r[15] or 0,
                "feedback_score": r[16], "feedback_count": r[17] or 0,
                "task": document.task_of(from_json_text(r[18]), from_json_text(r[19]), firsts.get(r[0], [])),
            })
        return out

    # The sessions table of the web UI (tracefix.ui): sortable by these keys. Keys of the sessions
    # row page first and aggregate the page only; the others aggregate every matching session.
    TABLE_SORTS = {"time": "b.started_ns", "service": "b.service", "latency": "b.ended_ns - b.started_ns",
                   "outcome": "b.outcome", "steps": "agg_steps.n", "tokens": "agg_tokens.n",
                   "feedback": "agg_fb.last_score"}
    TABLE_DIAGNOSIS = ("none", "queued", "running", "analyzed", "replayed", "failed")

    def session_table(self, *, sort: str = "time", descending: bool = True, search: str | None = None,
                      outcome: str | None = None, service: str | None = None, feedback: str | None = None,
                      diagnosis: str | None = None, limit: int = 50, offset: int = 0) -> dict:
        """One page of sessions for the UI's table: `{"rows": [...], "total": n}`. Each row has the
        `list_sessions` summary fields plus `tokens` ({"input", "output"}) and `diagnosis` (the
        state of its latest job, else whether an analysis or replay is stored, else "none").
        `search` matches (case-insensitive) the id, service, name, entrypoint, inputs, metadata
        and output of a session; `outcome="none"` means no outcome recorded."""
        if sort not in self.TABLE_SORTS:
            raise ValueError(f"sort must be one of {', '.join(self.TABLE_SORTS)}")
        if diagnosis is not None and diagnosis not in self.TABLE_DIAGNOSIS:
            raise ValueError(f"diagnosis must be one of {', '.join(self.TABLE_DIAGNOSIS)}")
        where, params = ["true"], []
        if search:
            pattern = "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            where.append("(" + " OR ".join(f"s.{c} ILIKE ? ESCAPE '\\'" for c in (
                "session_id", "service", "name", "entrypoint", "inputs", "metadata", "output")) + ")")
            params += [pattern] * 7
        if outcome == "none":
            where.append("s.outcome IS NULL")
        elif outcome is not None:
            where.append("s.outcome = ?")
            params.append(outcome)
        if service is not None:
            where.append("s.service = ?")
            params.append(service)
        if feedback in ("negative", "positive"):
            where.append(f"s.session_id IN (SELECT session_id FROM feedback WHERE score {'<' if feedback == 'negative' else '>'} 0)")
        elif feedback == "none":
            where.append("s.session_id NOT IN (SELECT session_id FROM feedback)")
        elif feedback is not None:
            raise ValueError("feedback must be 'negative', 'positive' or 'none'")
        diagnosis_state = """(SELECT CASE WHEN j.state IN ('queued', 'running') THEN j.state
                                          WHEN j.state IN ('failed', 'refused') THEN 'failed'
                                          WHEN r.session_id IS NOT NULL THEN 'replayed'
                                          WHEN a.session_id IS NOT NULL THEN 'analyzed'
                                          WHEN j.state = 'done' THEN 'analyzed' ELSE 'none' END)"""
        jobs_cte = """last_job AS (SELECT session_id, arg_max(state, created_ns) AS state FROM jobs GROUP BY session_id)"""
        if diagnosis is not None:
            where.append(f"""s.session_id IN (SELECT s2.session_id FROM sessions s2
                                 LEFT JOIN last_job j ON j.session_id = s2.session_id
                                 LEFT JOIN analyses a ON a.session_id = s2.session_id
                                 LEFT JOIN replays r ON r.session_id = s2.session_id
                                 WHERE {diagnosis_state} = ?)""")
            params.append(diagnosis)
        filtered = " AND ".join(where)
        order = f"{self.TABLE_SORTS[sort]} {'DESC' if descending else 'ASC'} NULLS LAST, b.session_id"
        needs = {"steps": "agg_steps", "tokens": "agg_tokens", "feedback": "agg_fb"}.get(sort)
        aggregates = {
            "agg_steps": "SELECT session_id, count(*) AS n FROM steps {scope} GROUP BY session_id",
            "agg_tokens": "SELECT session_id, sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)) AS n "
                          "FROM spans WHERE kind IN ('llm', 'message') {and_scope} GROUP BY session_id",
            "agg_fb": "SELECT session_id, arg_max(score, created_ns) AS last_score FROM feedback {scope} "
                      "GROUP BY session_id",
        }
        sort_join = ""
        if needs:
            agg = aggregates[needs].format(scope="WHERE session_id IN (SELECT session_id FROM base)",
                                           and_scope="AND session_id IN (SELECT session_id FROM base)")
            sort_join = f"LEFT JOIN ({agg}) {needs} ON {needs}.session_id = b.session_id"
        cur = self._read()
        # the count rides on the page's own scan (a text search filters 100k rows once, not twice)
        found = cur.execute(
            f"""WITH {jobs_cte}, base AS (SELECT session_id, service, outcome, started_ns, ended_ns
                                          FROM sessions s WHERE {filtered})
                SELECT b.session_id, count(*) OVER () FROM base b {sort_join} ORDER BY {order} LIMIT ? OFFSET ?""",
            [*params, int(limit), int(offset)]).fetchall()
        page_ids = [r[0] for r in found]
        if not page_ids:  # past the last page: the count alone
            total = cur.execute(f"WITH {jobs_cte} SELECT count(*) FROM sessions s WHERE {filtered}", params).fetchone()[0]
            return {"rows": [], "total": total}
        total = found[0][1]
        in_page, page_params = _in_strings(page_ids)
        rows = cur.execute(
            f"""WITH {jobs_cte},
                page AS (SELECT * FROM sessions WHERE session_id {in_page}),
                agg AS (SELECT session_id, count(*) FILTER (WHERE kind IN ('llm', 'message')) AS n_steps,
                               list(DISTINCT agent) FILTER (WHERE agent IS NOT NULL) AS agents,
                               count(*) FILTER (WHERE error IS NOT NULL) AS n_errors,
                               sum(input_tokens) AS tokens_in, sum(output_tokens) AS tokens_out
                        FROM spans WHERE start_ns BETWEEN coalesce((SELECT min(started_ns) FROM page), {-(1 << 63)})
                                 AND coalesce((SELECT max(greatest(started_ns, ended_ns)) FROM page), {(1 << 63) - 1})
                        AND session_id {in_page} GROUP BY session_id),
                fb AS (SELECT session_id, arg_max(score, created_ns) AS last_score, count(*) AS n_feedback
                       FROM feedback WHERE session_id {in_page} GROUP BY session_id)
                SELECT s.session_id, s.service, s.name, s.outcome, s.score, s.started_ns, s.ended_ns,
                       s.parent_session_id, agg.n_steps, agg.agents, agg.n_errors, agg.tokens_in, agg.tokens_out,
                       fb.last_score, fb.n_feedback, {diagnosis_state}, s.metadata, s.inputs
                FROM page s LEFT JOIN agg USING (session_id) LEFT JOIN fb USING (session_id)
                LEFT JOIN last_job j ON j.session_id = s.session_id
                LEFT JOIN analyses a ON a.session_id = s.session_id
                LEFT JOIN replays r ON r.session_id = s.session_id""",
            [*page_params, *page_params, *page_params]).fetchall()
        firsts = self._first_messages(cur, page_ids)
        by_id = {}
        for r in rows:
            by_id[r[0]] = {
                "session_id": r[0], "service": r[1], "name": r[2], "outcome": r[3], "score": r[4],
                "started_at": document.iso(r[5]), "ended_at": document.iso(r[6]),
                "duration_ms": document.duration_ms(r[5], r[6]), "parent_session_id": r[7], "steps": r[8] or 0,
                "agents": sorted(r[9] or []), "errors": r[10] or 0,
                "tokens": {"input": int(r[11] or 0), "output": int(r[12] or 0)},
                "feedback_score": r[13], "feedback_count": r[14] or 0, "diagnosis": r[15],
                "task": document.task_of(from_json_text(r[16]), from_json_text(r[17]), firsts.get(r[0], [])),
            }
        return {"rows": [by_id[sid] for sid in page_ids if sid in by_id], "total": total}

    def _time_range(self, cur, session_id: str) -> tuple[int, int]:
        """Where a session's spans start: lets scans skip row groups by their zonemaps."""
        row = cur.execute("SELECT started_ns, greatest(started_ns, ended_ns) FROM sessions WHERE session_id = ?",
                          [session_id]).fetchone()
        if row is None or row[0] is None:
            return (-(1 << 63), (1 << 63) - 1)
        return row[0], row[1]

    def get_spans(self, session_id: str) -> list[dict]:
        cur = self._read()
        lo, hi = self._time_range(cur, session_id)
        rows = cur.execute(
            f"""SELECT {', '.join(SPAN_DICT_COLUMNS)}
                FROM spans WHERE start_ns BETWEEN ? AND ? AND session_id = ? ORDER BY start_ns, span_id""",
            [lo, hi, session_id]).fetchall()
        keys = {k for r in rows if r[16] == "genai" for k in (r[17] or [])}
        keys |= {r[18] for r in rows if r[16] == "genai" and r[18] is not None}
        keys |= {r[19] for r in rows if r[19] is not None}
        texts = {document.key_ref(k): t for k, t in self._iter_message_texts(keys, cur)}
        return [document.span_dict(r, texts) for r in rows]

    def _message_rowids(self, keys: Iterable[int], cur) -> dict[int, int]:
        """Where messages are, by key. The keys go in as a literal IN list (they are our own
        integers), which DuckDB filters in its scan of the key column (~12 ms at 3M messages);
        only the key column is read."""
        out: dict[int, int] = {}
        keys = [int(k) for k in keys]
        for i in range(0, len(keys), 1000):
            chunk = ", ".join(map(str, keys[i:i + 1000]))
            out.update(cur.execute(f"SELECT key, rowid FROM messages WHERE key IN ({chunk})").fetchall())
        return out

    def _fetch_by_rowid(self, cur, table: str, columns: str, rowids: list[int], chunk: int = 8) -> Iterator[tuple]:
        """Rows of `table` by rowid, a few per query. DuckDB reads a filtered column's strings
        a whole vector at a time (2,048 rows: 400 MB of 200 KB messages, ~70 ms, for any one of
        them) unless the filter is one rowid (or key) equality; an IN list of rowids reads the
        range between its ends. So: one equality per row, UNION ALL."""
        for i in range(0, len(rowids), chunk):
            yield from cur.execute(" UNION ALL ".join(
                f"SELECT rowid, {columns} FROM {table} WHERE rowid = {int(r)}" for r in rowids[i:i + chunk])).fetchall()

    def _iter_message_texts(self, keys: Iterable[int], cur, where: dict[int, int] | None = None
                            ) -> Iterator[tuple[int, str]]:
        """(key, stored text) of these messages in the order given, fetched a few at a time
        (keys not stored are skipped). `where`: their rowids, when already looked up."""
        keys = list(dict.fromkeys(int(k) for k in keys))
        where = self._message_rowids(keys, cur) if where is None else where
        for i in range(0, len(keys), 8):
            chunk = [k for k in keys[i:i + 8] if k in where]
            texts = {key: text for _, key, text in self._fetch_by_rowid(cur, "messages", "key, message",
                                                                       [where[k] for k in chunk])}
            for key in chunk:
                if key not in texts:  # a checkpoint between the two reads may have moved rows
                    row = cur.execute(f"SELECT message FROM messages WHERE key = {key}").fetchone()
                    if row is None:
                        continue
                    texts[key] = row[0]
                yield key, texts.pop(key)

    def _message_texts(self, keys: set[int], cur=None) -> dict[int, str]:
        """Messages by key."""
        return dict(self._iter_message_texts(keys, cur or self._read()))

    def _messages(self, keys: set[int], cur=None) -> dict[int, dict]:
        return {k: json.loads(m) for k, m in self._message_texts(keys, cur).items()}

    def get_session(self, session_id: str) -> dict | None:
        cur = self._read()
        srow = cur.execute(f"SELECT {', '.join(SESSION_FIELDS)} FROM sessions WHERE session_id = ?",
                           [session_id]).fetchone()
        if srow is None:
            return None
        session = dict(zip(SESSION_FIELDS, srow))
        cols = DOCUMENT_SPAN_COLUMNS
        lo, hi = self._time_range(cur, session_id)
        spans = [dict(zip(cols, r)) for r in cur.execute(
            f"""SELECT {', '.join(cols)} FROM spans WHERE start_ns BETWEEN ? AND ? AND session_id = ?
                AND kind <> 'other' ORDER BY start_ns""", [lo, hi, session_id]).fetchall()]
        # spans of kind 'other' only matter as parents (agent inheritance); fetch the links alone
        links = dict(cur.execute("SELECT span_id, parent_span_id FROM spans WHERE start_ns BETWEEN ? AND ? "
                                 "AND session_id = ? AND kind = 'other'", [lo, hi, session_id]).fetchall())
        order = cur.execute("SELECT span_id, idx FROM steps WHERE started_ns BETWEEN ? AND ? AND session_id = ? "
                            "ORDER BY idx", [lo, hi, session_id]).fetchall()
        keys = {k for s in spans for k in (s["input_keys"] or [])} | {s["output_key"] for s in spans if s["output_key"]}
        messages = self._messages(keys, cur)
        snaps = cur.execute("SELECT span_id, key, state, step, time_ns FROM snapshots WHERE session_id = ? "
                            "ORDER BY time_ns, seq", [session_id]).fetchall()
        feedback = cur.execute("SELECT feedback_id, score, comment, source, created_ns FROM feedback "
                               "WHERE session_id = ? ORDER BY created_ns", [session_id]).fetchall()
        return document.build(session, spans, links, order, messages, snaps, feedback)

    # --- bounded reads for the API (docs/contracts.md §1b) --------------------------------------
    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of its own for a read that outlives one thread hop (a streamed response);
        the caller closes it."""
        return self.con.cursor()

    def session_page(self, session_id: str, offset: int = 0, limit: int = 100, max_chars: int | None = 2000,
                     content: str = "previews", budget_chars: int = PAGE_BUDGET_CHARS) -> dict | None:
        """The session document with only steps [offset, offset + limit) (fewer when their
        content passes `budget_chars`), strings longer than `max_chars` cut and marked, input
        messages named by key with their previews under `messages`; `content="keys"` leaves
        messages out (keys only), for a reader that fetches them in full. Reads only what the
        page shows, so its memory is bounded by the page, not the session."""
        return self._paged_document(self._read(), session_id, offset, limit, max_chars, budget_chars,
                                    input_previews=content == "previews", output=content == "previews")

    def session_step(self, session_id: str, index: int) -> dict | None:
        """One step in full (contents uncut); its input messages by key only, since a growing
        prompt can be as large as the whole session."""
        cur = self._read()
        lo, hi = self._time_range(cur, session_id)
        row = cur.execute("SELECT count(*) FILTER (WHERE idx < ?), count(*) FILTER (WHERE idx = ?) FROM steps "
                          "WHERE started_ns BETWEEN ? AND ? AND session_id = ?",
                          [index, index, lo, hi, session_id]).fetchone()
        if not row or not row[1]:
            return None
        doc = self._paged_document(cur, session_id, row[0], 1, None, 1 << 62, input_previews=False, output=True)
        if doc is None or not doc["steps"]:
            return None
        return {"session_id": session_id, "step": doc["steps"][0]}

    def session_outline(self, session_id: str) -> dict | None:
        """The session document (§1) with every step but without contents: each step has its
        index, kind, agent, model, start, duration, tokens, error, `output_message_key`, and its
        tool calls' names, ids and errors (what a timeline draws). Reads no message, argument or
        result but step 0's messages (the task), so a tool call sits on the step its span
        recorded (`tracefix.step`), else the step before it in time, rather than on the step
        whose output names its call id. None for an unknown session."""
        doc = self._paged_document(self._read(), session_id, 0, 0, None, 0, input_previews=False, output=False,
                                   outline=True)
        if doc is None:
            return None
        fields = ("index", "kind", "agent", "model", "started_at", "duration_ms", "input_tokens", "output_tokens",
                  "finish_reason", "error", "replay_source")
        doc["steps"] = [
            {**{f: step.get(f) for f in fields},
             "output_message_key": (document.key_ref(step["output_message"].key)
                                    if step["output_message"] is not None else None),
             "tool_calls": [{"id": tc.get("id"), "name": tc.get("name"), "error": tc.get("error"),
                             "duration_ms": tc.get("duration_ms")} for tc in step.get("tool_calls") or []]}
            for step in doc["steps"]]
        return doc

    def _paged_document(self, cur, session_id: str, offset: int, limit: int, max_chars: int | None,
                        budget_chars: int, input_previews: bool, output: bool, outline: bool = False) -> dict | None:
        srow = cur.execute(f"SELECT {', '.join(SESSION_FIELDS)} FROM sessions WHERE session_id = ?",
                           [session_id]).fetchone()
        if srow is None:
            return None
        session = dict(zip(SESSION_FIELDS, srow))
        lo, hi = self._time_range(cur, session_id)
        order = cur.execute("SELECT span_id, idx FROM steps WHERE started_ns BETWEEN ? AND ? AND session_id = ? "
                            "ORDER BY idx", [lo, hi, session_id]).fetchall()
        page_ids = {span_id for span_id, _ in order[offset:offset + limit]}
        # step 0 too: its first messages name the session's task
        detail_ids = page_ids | ({order[0][0]} if order else set())
        in_detail, in_params = _in_strings(detail_ids)
        select = ", ".join(f"CASE WHEN span_id {in_detail} THEN input_keys END" if c == "input_keys"
                           else "NULL" if c in ("tool_arguments", "tool_result") else c
                           for c in DOCUMENT_SPAN_COLUMNS)
        spans = []
        for r in cur.execute(f"""SELECT {select}, rowid FROM spans WHERE start_ns BETWEEN ? AND ?
                                 AND session_id = ? AND kind <> 'other' ORDER BY start_ns""",
                             [*in_params, lo, hi, session_id]).fetchall():
            span = dict(zip(DOCUMENT_SPAN_COLUMNS, r))
            if span["kind"] == "tool":  # arguments and result: fetched for the page's steps only
                span["tool_arguments"] = span["tool_result"] = document.RowRef(r[-1])
            spans.append(span)
        links = dict(cur.execute("SELECT span_id, parent_span_id FROM spans WHERE start_ns BETWEEN ? AND ? "
                                 "AND session_id = ? AND kind = 'other'", [lo, hi, session_id]).fetchall())
        refs: dict[int, document.MessageRef] = {}
        for span in spans:
            for k in (span["input_keys"] or []):
                refs.setdefault(k, document.MessageRef(k))
            if span["output_key"] is not None:
                refs.setdefault(span["output_key"], document.MessageRef(span["output_key"]))
        # Outside the page an output matters only by its tool call ids, which place tool spans on steps.
        # (an outline reads no message: its tool calls sit on their recorded step, else by time)
        if not outline and any(s["kind"] == "tool" and s["tool_call_id"] for s in spans):
            outputs = [s["output_key"] for s in spans if s["output_key"] is not None and s["kind"] == "llm"]
            where = self._message_rowids(outputs, cur)
            for _, key, ids in self._fetch_by_rowid(
                    cur, "messages", "key, json_extract_string(message, '$.tool_calls[*].id')",
                    sorted(where.values()), chunk=64):
                if ids:
                    refs[key]["tool_calls"] = [{"id": i} for i in ids if i is not None]
        first = next((s for s in spans if order and s["span_id"] == order[0][0]), None)
        if first is not None:
            first_keys = [*(first["input_keys"] or []), *([first["output_key"]] if first["output_key"] is not None else [])]
            for key, text in self._iter_message_texts(first_keys, cur):
                refs[key].update(document.clip(json.loads(text), 1000)[0])
        snaps = [(span_id, key, document.RowRef(rowid), step, time_ns) for span_id, key, rowid, step, time_ns in
                 cur.execute("SELECT span_id, key, rowid, step, time_ns FROM snapshots WHERE session_id = ? "
                             "ORDER BY time_ns, seq", [session_id]).fetchall()]
        feedback = cur.execute("SELECT feedback_id, score, comment, source, created_ns FROM feedback "
                               "WHERE session_id = ? ORDER BY created_ns", [session_id]).fetchall()
        doc = document.build(session, spans, links, order, refs, snaps, feedback)

        if outline:
            return doc
        page, messages, used = [], {}, 0
        page_steps = [st for st in doc["steps"] if st["span_id"] in page_ids]
        # where the page's messages are, in one scan of the key column rather than one per step
        wanted = {m.key for st in page_steps for m in (st["input_messages"] if input_previews else [])}
        wanted |= {st["output_message"].key for st in page_steps if output and st["output_message"] is not None}
        where = self._message_rowids(wanted, cur)
        for step in page_steps:
            if page and used > budget_chars:
                break
            used += self._fill_step(cur, step, messages if input_previews else None, max_chars, output, where)
            page.append(step)
        doc["steps"] = page
        if input_previews:
            doc["messages"] = messages
        end = offset + len(page)
        doc["page"] = {"offset": offset, "limit": limit, "returned": len(page), "total": len(order),
                       "next_offset": end if end < len(order) else None, "max_chars": max_chars}
        return doc

    def _fill_step(self, cur, step: dict, messages: dict | None, max_chars: int | None, with_output: bool,
                   where: dict[int, int] | None = None) -> int:
        """Put a page step's contents in place (fetched now, cut to `max_chars`); returns
        about how many characters they add to the page."""
        used = 0
        inputs = step.pop("input_messages")
        step["input_message_keys"] = [document.key_ref(m.key) for m in inputs]
        if messages is not None:
            fresh = [m.key for m in inputs if document.key_ref(m.key) not in messages]
            for key, text in self._iter_message_texts(fresh, cur, where):
                preview, cut = document.clip(json.loads(text), max_chars)
                if cut:
                    preview["truncated"] = cut
                messages[document.key_ref(key)] = preview
                used += len(text) - cut + 64
        output = step["output_message"]
        step["output_message_key"] = document.key_ref(output.key) if output is not None else None
        if output is not None and not with_output:
            step["output_message"] = None
        elif output is not None:
            text = next((t for _, t in self._iter_message_texts([output.key], cur, where)), None)
            preview, cut = document.clip(json.loads(text), max_chars) if text is not None else (None, 0)
            if cut:
                preview["truncated"] = cut
            step["output_message"] = preview
            used += len(text or "") - cut
        calls = {tc["arguments"].rowid: tc for tc in step["tool_calls"] if isinstance(tc["arguments"], document.RowRef)}
        step_cut = 0
        for rowid, arguments, result in self._fetch_by_rowid(cur, "spans", "tool_arguments, tool_result", sorted(calls)):
            tc = calls.pop(rowid)
            (tc["arguments"], tc["result"]), cut = document.clip([from_json_text(arguments), from_json_text(result)],
                                                                 max_chars)
            if cut:
                tc["truncated"] = cut
            step_cut += cut
            used += len(arguments or "") + len(result or "") - cut
        for tc in calls.values():  # rows gone since the skeleton was read
            tc["arguments"] = tc["result"] = None
        states = {ref.rowid: key for key, ref in step["snapshots"].items() if isinstance(ref, document.RowRef)}
        for rowid, state in self._fetch_by_rowid(cur, "snapshots", "state", sorted(states)):
            step["snapshots"][states[rowid]], cut = document.clip(from_json_text(state), max_chars)
            step_cut += cut
            used += len(state or "") - cut
        for key, value in step["snapshots"].items():
            if isinstance(value, document.RowRef):  # rows gone since the skeleton was read
                step["snapshots"][key] = None
        if step_cut:
            step["truncated"] = step_cut  # the step in full: GET .../steps/{index}
        return used

    def session_message_keys(self, session_id: str, cur=None) -> list[int] | None:
        """Every message (and tool-definitions blob) the session's spans refer to, by key, in
        key order: what `GET .../messages` pages through. None for an unknown session."""
        cur = cur or self._read()
        if cur.execute("SELECT 1 FROM sessions WHERE session_id = ?", [session_id]).fetchone() is None:
            return None
        lo, hi = self._time_range(cur, session_id)
        where = "FROM spans WHERE start_ns BETWEEN ? AND ? AND session_id = ?"
        return [r[0] for r in cur.execute(
            f"""SELECT DISTINCT k FROM (SELECT unnest(input_keys) AS k {where} UNION ALL SELECT output_key {where}
                UNION ALL SELECT tools_key {where}) WHERE k IS NOT NULL ORDER BY k""",
            [lo, hi, session_id] * 3).fetchall()]

    def iter_message_texts(self, keys: Iterable[int], cur=None) -> Iterator[tuple[int, str]]:
        """(key, stored text) in the order given, a few messages in memory at a time."""
        return self._iter_message_texts(keys, cur or self._read())

    def session_message(self, session_id: str, key: int) -> str | None:
        """A message's stored text when the session refers to it (else None: keys are not
        a way to read other sessions' messages)."""
        cur = self._read()
        lo, hi = self._time_range(cur, session_id)
        key = int(key)
        used = cur.execute(f"""SELECT 1 FROM spans WHERE start_ns BETWEEN ? AND ? AND session_id = ?
                               AND (output_key = {key} OR tools_key = {key} OR list_contains(input_keys, {key}))
                               LIMIT 1""", [lo, hi, session_id]).fetchone()
        if used is None:
            return None
        return next((text for _, text in self._iter_message_texts([key], cur)), None)

    def session_span_rowids(self, session_id: str, cur=None) -> list[int] | None:
        """The session's spans in `get_spans` order, as rowids (what `GET .../spans` pages
        through). None for an unknown session."""
        cur = cur or self._read()
        if cur.execute("SELECT 1 FROM sessions WHERE session_id = ?", [session_id]).fetchone() is None:
            return None
        lo, hi = self._time_range(cur, session_id)
        return [r[0] for r in cur.execute("SELECT rowid FROM spans WHERE start_ns BETWEEN ? AND ? AND session_id = ? "
                                          "ORDER BY start_ns, span_id", [lo, hi, session_id]).fetchall()]

    def iter_spans(self, rowids: list[int], cur=None) -> Iterator[dict]:
        """Span dicts (contracts §2) for these rowids, in that order, a few in memory at a time;
        the attributes the messages table holds are named by key (`message_keys`), not rebuilt."""
        cur = cur or self._read()
        for i in range(0, len(rowids), 8):
            chunk = rowids[i:i + 8]
            rows = {r[0]: r[1:] for r in self._fetch_by_rowid(cur, "spans", ", ".join(SPAN_DICT_COLUMNS), chunk)}
            for rowid in chunk:
                if rowid in rows:
                    yield document.span_dict(rows.pop(rowid), None)

    def training_sessions(self, criterion: str = "success", limit: int = 10_000) -> list[dict]:
        if criterion == "success":
            cond = ("outcome = 'success' OR session_id IN (SELECT session_id FROM feedback "
                    "GROUP BY session_id HAVING arg_max(score, created_ns) > 0)")
        elif criterion == "positive":
            cond = "session_id IN (SELECT session_id FROM feedback GROUP BY session_id HAVING arg_max(score, created_ns) > 0)"
        elif criterion == "all":
            cond = "true"
        else:
            raise ValueError("criterion must be 'success', 'positive' or 'all'")
        ids = [r[0] for r in self._read().execute(
            f"SELECT session_id FROM sessions WHERE ({cond}) AND session_id NOT IN "
            f"(SELECT session_id FROM feedback WHERE score < 0) ORDER BY started_ns LIMIT ?", [limit]).fetchall()]
        return [d for d in (self.get_session(i) for i in ids) if d is not None]

    def stats(self) -> dict:
        cur = self._read()
        return {t: cur.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("sessions", "spans", "messages", "steps", "snapshots", "feedback", "alerts", "jobs")}


class _Transaction:
    def __init__(self, con):
        self.con = con

    def __enter__(self):
        self.con.begin()
        return self.con

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.con.commit()
        else:
            self.con.rollback()
        return False
