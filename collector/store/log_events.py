"""GenAI events received as OTLP logs: written beside the spans, joined to them when read.

The official OpenTelemetry GenAI instrumentations put message content on log events, not on
their spans, and an exporter sends the events in other requests than the spans (each signal
has its own batch processor), so no one request holds both: the join happens when a session
is read. An LLM span that recorded no answer (`output_key` null) takes the messages of the
events that name its trace and span id: their inputs in the order the events were emitted,
and the first choice as its answer. Both reads of a session (the whole document,
`Queries.get_session`, and its pages, `Pages`) call `join_log_events` on the span rows they
read, before the document is built from them.
"""
from __future__ import annotations

from tracefix.collector.store.sql import in_strings


def join_log_events(cur, spans: list[dict], inputs_for: set[str] | None = None) -> None:
    """Give the LLM spans among `spans` (rows with span_id, trace_id, kind, input_keys,
    output_key) that recorded no answer the messages their GenAI events carried, in place.
    `inputs_for`: the span ids whose input messages are wanted (None: all), the others get
    their answer only (a page's steps outside the page)."""
    bare = {s["span_id"]: s for s in spans if s["kind"] == "llm" and s["output_key"] is None}
    if not bare:
        return
    in_spans, params = in_strings(list(bare))
    found: dict[str, tuple[list[int], int | None]] = {}
    for trace_id, span_id, input_keys, output_key in cur.execute(
            f"""SELECT trace_id, span_id, input_keys, output_key FROM log_records WHERE span_id {in_spans}
                AND (len(input_keys) > 0 OR output_key IS NOT NULL) ORDER BY time_ns, seq""", params).fetchall():
        span = bare.get(span_id)
        if span is None or span["trace_id"] != trace_id:
            continue
        inputs, output = found.get(span_id, ([], None))
        found[span_id] = ([*inputs, *(input_keys or [])], output if output is not None else output_key)
    for span_id, (inputs, output) in found.items():
        span = bare[span_id]
        span["output_key"] = output
        if not span["input_keys"] and (inputs_for is None or span_id in inputs_for):
            span["input_keys"] = inputs


def session_event_keys(cur, session_id: str, lo: int, hi: int) -> set[int]:
    """The keys of the messages the GenAI events of the session's LLM spans carry (what
    `GET .../messages` lists beside the spans' own, and `GET .../messages/{key}` serves)."""
    if cur.execute("SELECT 1 FROM log_records LIMIT 1").fetchone() is None:  # no app sends them: no scan of spans
        return set()
    return {k for (k,) in cur.execute(
        """WITH s AS (SELECT trace_id, span_id FROM spans WHERE start_ns BETWEEN ? AND ? AND session_id = ?
                      AND kind = 'llm'),
                l AS (SELECT input_keys, output_key FROM log_records WHERE span_id IN (SELECT span_id FROM s)
                      AND trace_id IN (SELECT trace_id FROM s))
           SELECT DISTINCT k FROM (SELECT unnest(input_keys) AS k FROM l UNION ALL SELECT output_key FROM l)
           WHERE k IS NOT NULL""", [lo, hi, session_id]).fetchall()}
