"""A session's spans as a waterfall (the web UI's session page): every span as one compact
row, nested under its parent, on the session's time axis; and one span whole, for the panel
beside it."""
from __future__ import annotations

from typing import Any

from tracefix.collector import assemble
from tracefix.collector.store.reads import StoreReads
from tracefix.collector.store.schema import SPAN_DICT_COLUMNS
from tracefix.collector.store.sql import first_row, scalar

# What each waterfall row holds, in this order (rows are lists: 10,000 steps are ~30,000 spans)
WATERFALL_COLUMNS = ("span_id", "parent", "depth", "kind", "name", "start_ms", "duration_ms", "error", "step",
                     "agent")
# The columns of a span the panel shows beside its attributes (its input and output)
PANEL_COLUMNS = ("step", "agent", "model", "input_keys", "output_key", "tool_name", "tool_arguments", "tool_result",
                 "error", "input_tokens", "output_tokens", "cost_usd")


# The spans nested by parent, in tree order: each span followed by its children by start
# time (a path of (start, id) pairs sorts so). A root is a span without a parent among the
# session's spans; the depth bound stops a parent loop (malformed spans: such a loop has no
# root and is not drawn).
TREE_SQL = """
WITH RECURSIVE s AS (
    SELECT span_id, parent_span_id, start_ns, end_ns, coalesce(kind, 'other') AS kind, name,
           error IS NOT NULL OR status_code = 2 AS failed, step, agent
    FROM spans WHERE start_ns BETWEEN ? AND ? AND session_id = ?),
tree AS (
    SELECT span_id, NULL::VARCHAR AS parent_id, 0 AS depth, [{'t': start_ns, 'id': span_id}] AS path
    FROM s WHERE parent_span_id IS NULL OR parent_span_id = span_id
                 OR parent_span_id NOT IN (SELECT span_id FROM s)
    UNION ALL
    SELECT c.span_id, t.span_id, t.depth + 1, list_append(t.path, {'t': c.start_ns, 'id': c.span_id})
    FROM tree t JOIN s c ON c.parent_span_id = t.span_id AND c.span_id <> c.parent_span_id
    WHERE t.depth < 256),
ordered AS (SELECT tree.*, row_number() OVER (ORDER BY path) - 1 AS row FROM tree)
SELECT o.span_id, p.row AS parent, o.depth, s.kind, s.name, s.start_ns, s.end_ns, s.failed, s.step, s.agent,
       count(*) OVER () AS total, (SELECT min(start_ns) FROM s) AS t0,
       (SELECT greatest(max(end_ns), max(start_ns)) FROM s) AS t1
FROM ordered o JOIN s USING (span_id) LEFT JOIN ordered p ON p.span_id = o.parent_id
ORDER BY o.row LIMIT ? OFFSET ?"""


class Waterfall(StoreReads):
    """Spans on a time axis, a row each, and one span in full."""

    def session_waterfall(self, session_id: str, offset: int = 0, limit: int = 5000) -> dict | None:
        """Rows `[offset, offset + limit)` of a session's waterfall (None if the session is
        unknown): `{"start_ns", "end_ns", "rows", "page": {"offset", "limit", "returned",
        "total", "next_offset"}}`. `rows` are in tree order (TREE_SQL), each a list of
        WATERFALL_COLUMNS: `parent` is the parent's row number (null for a root), `start_ms`
        counts from `start_ns` (the session's first span). Only narrow columns are read, never
        an attribute or a message, and one page is fetched: 10,000 steps are ~30,000 spans."""
        cur = self._read()
        if first_row(cur.execute("SELECT 1 FROM sessions WHERE session_id = ?", [session_id])) is None:
            return None
        lo, hi = self._time_range(cur, session_id)
        found = cur.execute(TREE_SQL, [lo, hi, session_id, int(limit), int(offset)]).fetchall()
        total, t0, t1 = (found[0][10], found[0][11], found[0][12]) if found else (
            scalar(cur.execute("SELECT count(*) FROM spans WHERE start_ns BETWEEN ? AND ? AND session_id = ?",
                               [lo, hi, session_id])), None, None)
        rows: list[list[Any]] = []
        for span_id, parent, depth, kind, name, start, end, failed, step, agent, *_ in found:
            start_ms = round((start - t0) / 1e6, 3) if start is not None else 0.0
            duration = round(max(0, end - start) / 1e6, 3) if start is not None and end is not None else 0.0
            rows.append([span_id, parent, depth, kind, name, start_ms, duration, bool(failed), step, agent])
        end_at = offset + len(rows)
        return {"start_ns": t0, "end_ns": t1, "rows": rows,
                "page": {"offset": offset, "limit": limit, "returned": len(rows), "total": total,
                         "next_offset": end_at if end_at < total else None}}

    def session_span(self, session_id: str, span_id: str) -> dict | None:
        """One span of a session as a span dict (contracts §2: attributes whole, messages named
        by key in `message_keys`) plus PANEL_COLUMNS under `"panel"`; None if the session has
        no such span."""
        cur = self._read()
        lo, hi = self._time_range(cur, session_id)
        columns = [*SPAN_DICT_COLUMNS, *(c for c in PANEL_COLUMNS if c not in SPAN_DICT_COLUMNS)]
        row = first_row(cur.execute(
            f"SELECT {', '.join(columns)} FROM spans WHERE start_ns BETWEEN ? AND ? AND session_id = ? "
            "AND span_id = ? LIMIT 1", [lo, hi, session_id, span_id]))
        if row is None:
            return None
        values = dict(zip(columns, row))
        return {**assemble.span_dict(values, None), "panel": {c: values[c] for c in PANEL_COLUMNS}}
