"""The dashboards' charts: one aggregate over time per chart, per service, model, agent or
tool, computed in DuckDB in one query (the web UI draws them, `GET /api/v1/dashboard/{chart}`
answers them).

They read the spans and sessions the store already holds (no OTLP metric points): a
session's outcome, its feedback and marks, each LLM call's tokens, cost and latency and each
tool call's error are there for every instrumented app, and they group by agent and tool,
which the GenAI client metrics do not carry. The sessions replays ran are left out (a
diagnosis makes several per session).
"""
from __future__ import annotations

import time

from tracefix.collector import document
from tracefix.collector.charts import CHARTS, GROUPINGS, MAX_BUCKETS, MAX_GROUPS, OTHER, RANGES, Chart
from tracefix.collector.marks import negative_sql
from tracefix.collector.store.reads import StoreReads
from tracefix.collector.store.sql import first_row

# A group a kind of span does not have: an LLM call runs no tool, a tool call names no model
NOT_PER = {("llm", "tool"): "(all calls: not per tool)", ("tool", "model"): "(all tool calls: not per model)"}
_SPAN_GROUP = {"service": "service", "model": "model", "agent": "agent", "tool": "tool_name"}
# the sessions that involve a model, an agent or a tool: a session counts in each of its groups
_SESSION_GROUP = {"model": ("model", "kind = 'llm'"), "agent": ("agent", "kind IN ('agent', 'llm', 'tool')"),
                  "tool": ("tool_name", "kind = 'tool'")}


def bucket_width(since_ns: int, until_ns: int, buckets: int) -> int:
    """The width of one of `buckets` equal buckets from since to until (at least 1 ns)."""
    return max(1, -(-(until_ns - since_ns) // buckets))


def _rows_sql(chart: Chart, by: str) -> str:
    """The rows one chart aggregates, each with its time `t` and group `g`, between $lo and $hi."""
    if chart.rows == "sessions":
        negative = (f"SELECT session_id FROM feedback WHERE score < 0 UNION "
                    f"SELECT session_id FROM step_annotations WHERE {negative_sql()}")
        base = (f"SELECT s.session_id, s.started_ns AS t, s.service, s.outcome, "
                f"s.session_id IN ({negative}) AS thumbs_down FROM sessions s "
                f"WHERE s.started_ns BETWEEN $lo AND $hi AND s.parent_session_id IS NULL")
        if by == "service":
            return f"SELECT *, service AS g FROM ({base})"
        column, kinds = _SESSION_GROUP[by]
        return (f"SELECT b.*, x.g FROM ({base}) b JOIN (SELECT DISTINCT session_id, {column} AS g FROM spans "
                f"WHERE start_ns >= $lo AND {kinds} AND {column} IS NOT NULL) x USING (session_id)")
    kinds = "c.kind = 'tool'" if chart.rows == "tool" else "c.kind IN ('llm', 'message')"
    group = f"'{NOT_PER[(chart.rows, by)]}'" if (chart.rows, by) in NOT_PER else f"c.{_SPAN_GROUP[by]}"
    parent = ""
    if by == "agent":  # a call without an agent of its own is its invoke_agent parent's (as the document reads it)
        group = "coalesce(c.agent, p.agent)"
        parent = ("LEFT JOIN spans p ON p.span_id = c.parent_span_id AND p.trace_id = c.trace_id AND p.kind = 'agent' "
                  "AND p.start_ns BETWEEN $lo AND $hi")
    return (f"SELECT c.start_ns AS t, {group} AS g, coalesce(c.input_tokens, 0) + coalesce(c.output_tokens, 0) "
            f"AS tokens, c.cost_usd, (c.end_ns - c.start_ns) / 1e6 AS ms, "
            f"(c.error IS NOT NULL OR c.status_code = 2) AS failed FROM spans c {parent} "
            f"WHERE c.start_ns BETWEEN $lo AND $hi AND {kinds} AND c.replay_source IS NULL")


class Dashboard(StoreReads):
    """The dashboards' series, one query per chart."""

    def time_span(self) -> tuple[int, int] | None:
        """From when the first stored session started to when the last one ended, an hour at
        least (None: none stored)."""
        row = first_row(self._read().execute(
            "SELECT min(started_ns), max(greatest(started_ns, ended_ns)) FROM sessions WHERE parent_session_id IS NULL"))
        return None if row is None or row[0] is None else (int(row[0]), max(int(row[1]), int(row[0]) + 3600 * 10**9))

    def time_range(self, preset: str | None = None, since_ns: int | None = None, until_ns: int | None = None,
                   now_ns: int | None = None) -> tuple[int, int]:
        """The range a chart or the session list covers: `since_ns` / `until_ns` where given,
        else `preset` (RANGES) back from now, else every stored session's (a day up to now
        when none is stored)."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        if preset not in (None, *RANGES):
            raise ValueError(f"range must be one of {', '.join(RANGES)}")
        back = RANGES.get(preset or "all")
        if back is not None:
            lo, hi = now_ns - back * 10**9, now_ns
        else:
            lo, hi = self.time_span() or (now_ns - 86_400 * 10**9, now_ns)
        lo, hi = (lo if since_ns is None else since_ns), (hi if until_ns is None else until_ns)
        return lo, max(lo, hi)

    def chart(self, name: str, *, by: str = "service", since_ns: int, until_ns: int, buckets: int = 24) -> dict:
        """Chart `name` of CHARTS from since to until (ns, both included) in `buckets` equal
        buckets: `{"chart", "title", "unit", "by", "since", "until", "bucket_s", "buckets",
        "series": [{"group", "total", "points": [{"bucket", "t", "value"}]}]}`, the groups
        with the most rows first (at most MAX_GROUPS, the rest as one OTHER series). A point
        per bucket that has rows: no point is nothing to measure there (a count of 0)."""
        return self.charts([name], by=by, since_ns=since_ns, until_ns=until_ns, buckets=buckets)[name]

    def charts(self, names: list[str], *, by: str = "service", since_ns: int, until_ns: int,
               buckets: int = 24) -> dict[str, dict]:
        """Several charts as `chart` gives each, by name: the charts that aggregate the same
        rows (CHARTS' `rows`: sessions, LLM calls, tool calls) share one query, since their
        groups are ranked by the same row counts (the dashboard page's eight charts are three
        queries: 0.37x the time of eight at 100k sessions)."""
        for name in names:
            if name not in CHARTS:
                raise ValueError(f"chart must be one of {', '.join(CHARTS)}")
        if by not in GROUPINGS:
            raise ValueError(f"by must be one of {', '.join(GROUPINGS)}")
        if not 1 <= buckets <= MAX_BUCKETS:
            raise ValueError(f"buckets must be between 1 and {MAX_BUCKETS}")
        if until_ns < since_ns:
            raise ValueError("until is before since")
        width = bucket_width(since_ns, until_ns + 1, buckets)
        by_rows: dict[str, list[str]] = {}
        for name in dict.fromkeys(names):
            by_rows.setdefault(CHARTS[name].rows, []).append(name)
        out: dict[str, dict] = {}
        for same_rows in by_rows.values():
            values = ", ".join(f"{CHARTS[name].value} AS v{i}" for i, name in enumerate(same_rows))
            sql = f"""WITH rows AS ({_rows_sql(CHARTS[same_rows[0]], by)}),
                named AS (SELECT *, coalesce(CAST(g AS VARCHAR), '(none)') AS grp FROM rows),
                ranked AS (SELECT grp, count(*) AS n FROM named GROUP BY grp),
                top AS (SELECT grp FROM ranked ORDER BY n DESC, grp LIMIT {MAX_GROUPS}),
                folded AS (SELECT *, CASE WHEN grp IN (SELECT grp FROM top) THEN grp ELSE '{OTHER}' END AS series,
                                  least((t - $lo) // $width, {buckets - 1}) AS bucket FROM named)
                SELECT series, bucket, count(*) AS n, {values} FROM folded
                GROUP BY series, bucket ORDER BY series, bucket"""
            rows = self._read().execute(sql, {"lo": since_ns, "hi": until_ns, "width": width}).fetchall()
            for i, name in enumerate(same_rows):
                # a row: series, bucket, rows aggregated, then one value per chart
                out[name] = self._drawn_series(name, by, [(r[0], r[1], r[3 + i], r[2]) for r in rows],
                                               since_ns, until_ns, width, buckets)
        return out

    @staticmethod
    def _drawn_series(name: str, by: str, rows: list[tuple], since_ns: int, until_ns: int, width: int,
                      buckets: int) -> dict:
        """One chart's answer from its (group, bucket, value, rows) tuples."""
        chart = CHARTS[name]
        series: dict[str, dict] = {}
        for group, bucket, value, n in rows:
            s = series.setdefault(group, {"group": group, "total": 0, "points": {}})
            s["total"] += n
            s["points"][int(bucket)] = None if value is None else float(value)
        out = []
        for s in sorted(series.values(), key=lambda s: (s["group"] == OTHER, -s["total"], s["group"])):
            s["points"] = [{"bucket": b, "t": document.iso(since_ns + b * width), "value": value}
                           for b, value in sorted(s["points"].items())]
            out.append(s)
        return {"chart": name, "title": chart.title, "unit": chart.unit, "by": by,
                "since": document.iso(since_ns), "until": document.iso(until_ns), "bucket_s": width / 1e9,
                "buckets": buckets, "series": out}
