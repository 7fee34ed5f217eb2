"""The DuckDB store: the only part of tracefix that speaks SQL.

`connect_db(path)` is the connection factory; `Store("ducklake:postgres:...")` opens the same
store on a DuckLake several collectors share (`lake`). `Store` owns one connection and hands
out cursors of the same database for concurrent reads. In `tracefix serve` only the writer thread calls the
mutating methods; a CLI without a server calls them directly on the file.

`Store` is put together from one class per concern, each in its own module:

| module | what it holds |
|---|---|
| `schema` | DDL as numbered migrations (recorded in `schema_version`), column lists |
| `connection` | `connect_db`, the connection, read cursors, transactions, checkpoints |
| `ingest` | batches in: messages, sessions, spans, snapshots, steps; imported message logs |
| `outbox` | feedback, alerts and their webhook deliveries |
| `annotations` | a person's marks on steps (label, score, comment), and the alert a negative one raises |
| `jobs` | the job queue (diagnosis jobs, replay jobs leased to workers) |
| `results` | analysis and replay results |
| `reads` | what every read shares: time ranges, messages fetched by key |
| `queries` | session lists, session documents, spans, training sets |
| `pages` | bounded reads for the API (docs/contracts.md §1b), the outline of a session |
| `browse` | the web UI's sessions table: sort, filters, text search, a page at a time |
| `dashboard` | the dashboards' charts over time, per service, model, agent or tool, one query each |
| `waterfall` | a session's spans as rows on a time axis (the UI's waterfall), one span whole |
| `signals` | OTLP logs' GenAI events and the GenAI metrics' points in; the points read back |
| `log_events` | GenAI events joined to their LLM spans when a session is read |
| `filters` | the one WHERE clause the session list and the UI's table filter sessions by |
| `lake` | DuckLake: extensions from their packages, the write lock, the lake's schema, compaction |
"""
from __future__ import annotations

from tracefix.collector import DEFAULT_DB
from tracefix.collector.normalize import SPAN_COLUMNS, Batch, spans_table
from tracefix.collector.store.annotations import StepAnnotations, UnknownStep
from tracefix.collector.store.browse import Browse
from tracefix.collector.store.connection import StoreConnection, checkpoint_threshold_bytes, connect_db
from tracefix.collector.store.dashboard import Dashboard
from tracefix.collector.store.ingest import Ingest
from tracefix.collector.store.jobs import JobQueue
from tracefix.collector.store.outbox import check_score
from tracefix.collector.store.pages import Pages
from tracefix.collector.store.queries import Queries
from tracefix.collector.store.results import Results
from tracefix.collector.store.schema import MIGRATIONS, PAGE_BUDGET_CHARS
from tracefix.collector.store.signals import MetricPoints
from tracefix.collector.store.steps import numbered_steps
from tracefix.collector.store.waterfall import Waterfall
from tracefix.errors import UnknownSession

__all__ = ["DEFAULT_DB", "MIGRATIONS", "PAGE_BUDGET_CHARS", "SPAN_COLUMNS", "Batch", "Store", "StoreConnection",
           "UnknownSession", "UnknownStep", "check_score", "checkpoint_threshold_bytes", "connect_db", "numbered_steps",
           "spans_table"]


class Store(Ingest, StepAnnotations, JobQueue, Results, Queries, Pages, Browse, Waterfall, Dashboard,
            MetricPoints):
    """The store of one DuckDB file: `Store(path)` opens (and migrates) it; `read_only=True`
    opens it beside a running writer's file for reads only."""
