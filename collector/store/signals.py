"""What OTLP logs and metrics exports store (migrations 9 and 10): GenAI events in
`log_records` (read joined to their spans: `log_events`) and the GenAI metrics' data points
in `metric_points`, read back a time range at a time (`GET /api/v1/metrics`)."""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tracefix.attributes import from_json_text
from tracefix.collector import document
from tracefix.collector.normalize import LOG_COLUMNS, POINT_COLUMNS, Batch, logs_table, points_table
from tracefix.collector.store.reads import StoreReads
from tracefix.collector.store.sql import records

MAX_POINTS = 10_000  # one read of points at most (the API's limit)


def insert_signals(con, batch: Batch) -> None:
    """Store the batch's log records and metric points, each once: a retried export (or a
    spooled request drained twice) sends records stored already, known by their key."""
    if batch.log_records:
        _insert_new(con, "log_records", LOG_COLUMNS, "record_key", logs_table(batch.log_records))
    if batch.metric_points:
        _insert_new(con, "metric_points", POINT_COLUMNS, "point_key", points_table(batch.metric_points))


def _insert_new(con, table: str, columns: list[str], key: str, rows: pa.Table) -> None:
    lo, hi = (int(x.as_py()) for x in pc.min_max(pc.fill_null(rows["time_ns"], 0)).values())
    cols = ", ".join(columns)
    _signal_batch = rows  # noqa: F841 (scanned by name, see Ingest._ingest)
    # the same record has the same time: only row groups overlapping the batch's times are read
    con.execute(f"""INSERT INTO {table} ({cols}) SELECT {cols} FROM (SELECT DISTINCT ON ({key}) * FROM _signal_batch) b
                    WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE coalesce(t.time_ns, 0) BETWEEN {lo} AND {hi}
                                      AND t.{key} = b.{key})""")


class MetricPoints(StoreReads):
    """The stored GenAI metric points."""

    def metric_points(self, name: str | None = None, since_ns: int | None = None, until_ns: int | None = None,
                      service: str | None = None, model: str | None = None, limit: int = 1000) -> dict[str, Any]:
        """Points oldest first (of `name`, in [since, until), of `service` / `model` when
        given), at most `limit` (`truncated` says whether more were there)."""
        given = [(clause, value) for clause, value in (
            ("name = ?", name), ("service = ?", service), ("model = ?", model), ("time_ns >= ?", since_ns),
            ("time_ns < ?", until_ns)) if value is not None]
        where = " AND ".join(["true", *(clause for clause, _ in given)])
        params: list[Any] = [value for _, value in given]
        limit = max(1, min(int(limit), MAX_POINTS))
        rows = records(self._read().execute(
            f"""SELECT name, unit, kind, service, scope, attributes, model, operation, token_type, provider,
                       start_ns, time_ns, temporality, value, count, sum, min, max, bounds, bucket_counts
                FROM metric_points WHERE {where} ORDER BY time_ns, point_key LIMIT ?""",
            [*params, limit + 1]))
        more = len(rows) > limit
        rows = rows[:limit]
        points = [{**{k: v for k, v in r.items() if k not in ("start_ns", "time_ns", "attributes")},
                   "attributes": from_json_text(r["attributes"]) or {},
                   "start_time": document.iso(r["start_ns"]), "time": document.iso(r["time_ns"]),
                   "time_ns": r["time_ns"]} for r in rows]
        return {"points": points, "truncated": more}
