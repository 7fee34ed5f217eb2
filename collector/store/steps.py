"""The steps table's rows: each session's LLM calls and messages numbered 0..n-1 from its span
rows (what a batch brings, or what the spans table holds), one LLM call two instrumentations
described counted once."""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracefix.collector.duplicates import duplicate_llm_calls


STEP_SOURCE_COLUMNS = ("session_id", "kind", "step", "start_ns", "call_seq", "span_id", "trace_id", "end_ns",
                       "output_key", "parent_span_id")


def numbered_steps(spans: pa.Table) -> pa.Table:
    """The steps table's rows for these spans: each session's LLM calls and messages numbered
    0..n-1 by `tracefix.step` (absent last), then start time, call sequence and span id. A
    span present twice (a retry merged into the batch) counts once, and so does one LLM call
    two instrumentations described (`duplicate_llm_calls`). Done in Arrow, not SQL: a DuckDB
    window over a registered Arrow table cost ~3 ms per ingest transaction; and over columns,
    not rows: a Python loop over the rows cost 1.5 us per span."""
    spans = spans.filter(pc.is_in(spans["kind"], value_set=pa.array(["llm", "message"])))
    doubled = _doubled_llm_calls(spans)
    if doubled:
        spans = spans.filter(pc.invert(pc.is_in(spans["span_id"], value_set=pa.array(doubled, pa.string()))))
    spans = spans.take(pc.sort_indices(spans, sort_keys=[
        ("session_id", "ascending"), ("step", "ascending", "at_end"), ("start_ns", "ascending"),
        ("call_seq", "ascending", "at_end"), ("span_id", "ascending"), ("trace_id", "ascending")]))
    if spans.num_rows > 1:  # a span right after its own copy (sorted together) is left out
        copies = _same_as_previous(spans, ("session_id", "trace_id", "span_id"))
        spans = spans.filter(pa.array(np.concatenate(([True], ~copies))))
    # a row's index in its session: its position less that of the session's first row
    position = np.arange(spans.num_rows)
    first = np.concatenate(([True], ~_same_as_previous(spans, ("session_id",)))) if spans.num_rows else position
    idx = position - np.maximum.accumulate(np.where(first, position, 0))
    return pa.table({"session_id": spans["session_id"], "idx": pa.array(idx, pa.int32()),
                     "trace_id": spans["trace_id"], "span_id": spans["span_id"],
                     "raw_step": spans["step"], "started_ns": spans["start_ns"]})


def _same_as_previous(table: pa.Table, columns: tuple[str, ...]) -> np.ndarray:
    """For each row but the first: whether it holds the values of the row before in `columns`
    (two nulls count as the same value)."""
    same = np.ones(table.num_rows - 1, dtype=bool)
    for name in columns:
        col = table[name].combine_chunks()
        here, before = col[1:], col[:-1]
        equal = pc.fill_null(pc.equal(here, before), False).to_numpy(zero_copy_only=False)
        both_null = pc.and_(pc.is_null(here), pc.is_null(before)).to_numpy(zero_copy_only=False)
        same &= equal | both_null
    return same


class BatchSteps:
    """The batch's spans numbered into steps once (`numbered_steps`), on first use: the tasks of
    the sessions it creates and their steps rows both read them (numbering them twice cost
    ~10% of a transaction). A session's steps are numbered from its own spans alone, so the
    steps of some sessions are those of the whole batch filtered to them."""

    def __init__(self, spans: pa.Table | None):
        self.spans = spans
        self._steps: pa.Table | None = None

    def of(self, session_ids: Iterable[str]) -> pa.Table | None:
        if self.spans is None:
            return None
        if self._steps is None:
            self._steps = numbered_steps(self.spans.select(list(STEP_SOURCE_COLUMNS)))
        return self._steps.filter(pc.is_in(self._steps["session_id"],
                                           value_set=pa.array(list(session_ids), pa.string())))


def _doubled_llm_calls(spans: pa.Table) -> list[str]:
    """Span ids of the LLM spans that describe a call another span of their session describes."""
    if not spans.num_rows:
        return []
    # only an answer stored twice in a session, or an LLM span under another, can be: no row
    # is read in Python otherwise
    answers = spans["output_key"].drop_null()
    if len(pc.unique(answers)) == len(answers):  # the common case: every answer once (cheaper than grouping)
        twice = spans.schema.empty_table().select(["output_key"])
    else:
        counts = spans.group_by(["session_id", "output_key"]).aggregate([("span_id", "count_distinct")])
        twice = counts.filter(pc.and_(pc.greater(counts["span_id_count_distinct"], 1),
                                      pc.is_valid(counts["output_key"])))
    llm = spans.filter(pc.equal(spans["kind"], "llm"))
    under_llm = pc.is_in(llm["parent_span_id"].cast(pa.string()), value_set=llm["span_id"].combine_chunks())
    nested = llm.filter(under_llm)
    if not twice.num_rows and not nested.num_rows:
        return []
    candidates = spans.filter(pc.or_(
        pc.is_in(spans["output_key"], value_set=twice["output_key"].combine_chunks()),
        pc.or_(pc.is_in(spans["span_id"], value_set=nested["span_id"].combine_chunks()),
               pc.is_in(spans["span_id"], value_set=nested["parent_span_id"].combine_chunks()))))
    by_session: dict[str, list[dict]] = {}
    for row in candidates.select(["session_id", "kind", "call_seq", "start_ns", "end_ns", "output_key",
                                  "span_id", "parent_span_id"]).to_pylist():
        by_session.setdefault(row["session_id"], []).append(row)
    return [dup for rows in by_session.values() for dup in duplicate_llm_calls(rows)]
