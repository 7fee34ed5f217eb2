"""The store's tables: numbered migrations (recorded in `schema_version`) and the column
lists the reads select."""
from __future__ import annotations

import time
from typing import Any

import duckdb
import pyarrow as pa

from tracefix.collector.store import lake_appends
from tracefix.collector.store.sql import scalar
from tracefix.collector.store.tasks import backfill_tasks


# A migration's steps are SQL statements, or functions of the connection for what SQL cannot say.
MIGRATIONS: list[tuple[int, str, list[Any]]] = [
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
    # what each LLM call cost, priced at ingest (normalize.cost) so the session list sorts by it
    (7, "the cost of LLM calls", [
        "ALTER TABLE spans ADD COLUMN cost_usd DOUBLE",
    ]),
    # a person's mark on one step (label, score, comment): Phoenix's span annotations, Langfuse's
    # scores on observations; the step's span id keeps it on its step if the steps are renumbered
    (8, "step annotations", [
        """CREATE TABLE step_annotations (annotation_id VARCHAR, session_id VARCHAR, step INTEGER,
            span_id VARCHAR, label VARCHAR, score DOUBLE, comment VARCHAR, source VARCHAR, created_ns BIGINT)""",
    ]),
    # GenAI events received as OTLP logs (normalize.log_records): their messages are
    # content-addressed in `messages`, joined to their span when a session is read (log_events)
    (9, "OTLP log records", [
        """CREATE TABLE log_records (record_key BIGINT, trace_id VARCHAR, span_id VARCHAR, time_ns BIGINT,
            observed_ns BIGINT, seq INTEGER, event_name VARCHAR, service VARCHAR, scope VARCHAR,
            severity_number INTEGER, severity_text VARCHAR, body VARCHAR, attributes VARCHAR, resource VARCHAR,
            input_keys BIGINT[], output_key BIGINT)""",
    ]),
    # the GenAI metrics' data points received as OTLP metrics (normalize.metric_points)
    (10, "OTLP metric points", [
        """CREATE TABLE metric_points (point_key BIGINT, name VARCHAR, unit VARCHAR, kind VARCHAR, service VARCHAR,
            scope VARCHAR, resource VARCHAR, attributes VARCHAR, model VARCHAR, operation VARCHAR,
            token_type VARCHAR, provider VARCHAR, start_ns BIGINT, time_ns BIGINT, temporality INTEGER,
            value DOUBLE, count BIGINT, sum DOUBLE, min DOUBLE, max DOUBLE, bounds DOUBLE[],
            bucket_counts BIGINT[])""",
    ]),
    # sessions kept to be run again (a thumbs-down, a person's choice, an import: `kind`; an
    # imported item whole in `item`), and what each regression run found for each of them
    (11, "datasets of sessions", [
        """CREATE TABLE dataset_items (dataset VARCHAR, session_id VARCHAR, kind VARCHAR, item VARCHAR,
            added_ns BIGINT)""",
        """CREATE TABLE regress_results (run_id VARCHAR, session_id VARCHAR, dataset VARCHAR, result VARCHAR,
            created_ns BIGINT)""",
    ]),
    # each session's task in its row, so the session list sorts and filters by it without
    # reading messages (tasks.py: set at ingest; here, for the sessions stored before)
    (12, "the task of each session", [
        "ALTER TABLE sessions ADD COLUMN task VARCHAR",
        backfill_tasks,  # a step in Python: (con) -> None
    ]),
]

# The span columns a span dict is made of (assemble.span_dict).
SPAN_DICT_COLUMNS = ["trace_id", "span_id", "parent_span_id", "session_id", "service", "name", "span_kind", "kind",
                     "start_ns", "end_ns", "status_code", "status_message", "attributes", "events", "resource",
                     "scope", "message_dialect", "input_keys", "output_key", "tools_key"]
# The span columns the session document is built from (assemble.build).
DOCUMENT_SPAN_COLUMNS = ["trace_id", "span_id", "parent_span_id", "name", "kind", "start_ns", "end_ns", "status_code",
                         "step", "call_seq", "agent", "model", "input_tokens", "output_tokens", "cost_usd", "finish_reason",
                         "input_keys", "output_key", "tool_name", "tool_call_id", "tool_arguments", "tool_result",
                         "error", "replay_source", "truncated", "scope"]
# What one API page of a session may hold, in characters of content (docs/contracts.md §1b):
# reads stay bounded however long the session or its messages are.
PAGE_BUDGET_CHARS = 4_000_000

SESSION_FIELDS = ["session_id", "service", "name", "entrypoint", "inputs", "user_id", "metadata", "outcome",
                  "score", "output", "evaluation", "replayable", "parent_session_id", "intervention_id",
                  "intervention", "started_ns", "ended_ns", "source", "updated_ns"]
SESSION_SCHEMA = pa.schema([(f, pa.float64() if f == "score" else pa.bool_() if f == "replayable"
                             else pa.int64() if f.endswith("_ns") else pa.string()) for f in SESSION_FIELDS])


def migrate(con: duckdb.DuckDBPyConnection, migrations: list[tuple[int, str, list[Any]]] | None = None) -> int:
    """Apply the migrations this database lacks, each in its own transaction; returns the
    schema version it is at now."""
    con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                "description VARCHAR, applied_ns BIGINT)")
    current = scalar(con.execute("SELECT coalesce(max(version), 0) FROM schema_version"))
    for version, description, statements in (MIGRATIONS if migrations is None else migrations):
        if version <= current:
            continue
        con.begin()
        try:
            for step in statements:
                if isinstance(step, str):
                    con.execute(step)
                else:
                    step(con)
            con.execute("INSERT INTO schema_version VALUES (?, ?, ?)", [version, description, time.time_ns()])
            con.commit()
        except Exception:
            con.rollback()
            raise
        current = version
    return current


def lake_statements(migrations) -> list[str]:
    """The store's schema as DuckLake takes it: the embedded migrations applied to an
    in-memory DuckDB, then each table re-declared column by column without its keys (the
    lake has none; the write lock keeps rows unique) and each view as written. One source
    of truth for both engines."""
    scratch = duckdb.connect(":memory:")
    try:
        migrate(scratch, migrations)
        out = []
        for (table,) in scratch.execute("SELECT table_name FROM duckdb_tables() WHERE table_name <> 'schema_version' "
                                        "ORDER BY table_name").fetchall():
            cols = scratch.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
                                   "ORDER BY column_index", [table]).fetchall()
            out.append(f"CREATE TABLE {table} (" + ", ".join(f"{c} {t}" for c, t in cols) + ")")
        out += [sql for (sql,) in scratch.execute("SELECT sql FROM duckdb_views() WHERE NOT internal "
                                                  "ORDER BY view_name").fetchall()]
        return out
    finally:
        scratch.close()


def migrate_lake(con: duckdb.DuckDBPyConnection, migrations: list[tuple[int, str, list[Any]]] | None = None) -> int:
    """The same for a DuckLake store, with the lake's write lock held by the caller: a new
    lake gets the current schema at once (lake_statements: the migrations' tables without
    keys); one made by an older tracefix gets the newer
    migrations, which must therefore be statements DuckLake runs (no keys, no indexes).
    Its `sessions` is a view of the session rows' latest versions (lake_appends), the table
    again while migrations run. `migrations`: MIGRATIONS unless given (as for `migrate`)."""
    migrations = MIGRATIONS if migrations is None else migrations
    con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER, description VARCHAR, applied_ns BIGINT)")
    current = scalar(con.execute("SELECT coalesce(max(version), 0) FROM schema_version"))
    if current == 0:
        version, description, _ = migrations[-1]
        current = migrate(con, [(version, f"{description} (new DuckLake: schema of version {version})",
                                 lake_statements(migrations))])
    pending = [m for m in migrations if m[0] > current]
    if pending:
        lake_appends.one_row_each(con)
    current = migrate(con, pending)
    lake_appends.keep_versions(con)
    return current
