"""One stored span: its columns, by name (`SpanRow`) and as Arrow types (`SPAN_COLUMNS`)."""
from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa


class SpanRow(NamedTuple):
    """A row of the spans table, the fields in SPAN_COLUMNS order (a tuple: what Arrow
    converts fastest, read by name)."""
    trace_id: str
    span_id: str
    parent_span_id: str | None
    session_id: str
    service: str | None
    name: str
    span_kind: int
    kind: str
    start_ns: int
    end_ns: int
    status_code: int
    status_message: str | None
    step: int | None
    call_seq: int | None
    agent: str | None
    model: str | None
    provider: str | None
    input_tokens: int | None
    output_tokens: int | None
    finish_reason: str | None
    input_keys: list[int] | None
    output_key: int | None
    message_dialect: str | None
    tool_name: str | None
    tool_call_id: str | None
    tool_arguments: str | None
    tool_result: str | None
    error: str | None
    replay_source: str | None
    truncated: bool
    scope: str | None
    resource: str | None
    attributes: str
    events: str | None
    tools_key: int | None
    cost_usd: float | None  # the price table's cost of an LLM call (normalize.cost), None if unknown


# The spans table's columns, in order. `normalize_request` builds one SpanRow per span in this
# order and one Arrow table per request (in the decode worker, off the single writer); dict
# rows with these keys are the other way in (imports) and out (`Batch.spans`).
SPAN_COLUMNS = [
    ("trace_id", pa.string()), ("span_id", pa.string()), ("parent_span_id", pa.string()),
    ("session_id", pa.string()), ("service", pa.string()), ("name", pa.string()),
    ("span_kind", pa.int32()), ("kind", pa.string()), ("start_ns", pa.int64()), ("end_ns", pa.int64()),
    ("status_code", pa.int32()), ("status_message", pa.string()), ("step", pa.int32()),
    ("call_seq", pa.int32()), ("agent", pa.string()), ("model", pa.string()), ("provider", pa.string()),
    ("input_tokens", pa.int64()), ("output_tokens", pa.int64()), ("finish_reason", pa.string()),
    ("input_keys", pa.list_(pa.int64())), ("output_key", pa.int64()), ("message_dialect", pa.string()),
    ("tool_name", pa.string()), ("tool_call_id", pa.string()), ("tool_arguments", pa.string()),
    ("tool_result", pa.string()), ("error", pa.string()), ("replay_source", pa.string()),
    ("truncated", pa.bool_()), ("scope", pa.string()), ("resource", pa.string()),
    ("attributes", pa.string()), ("events", pa.string()), ("tools_key", pa.int64()),
    ("cost_usd", pa.float64()),
]
SPAN_SCHEMA = pa.schema(SPAN_COLUMNS)


def spans_table(rows: list[dict]) -> pa.Table:
    """The Arrow table of dict rows."""
    return pa.Table.from_arrays([pa.array([r[name] for r in rows], type=typ) for name, typ in SPAN_COLUMNS],
                                schema=SPAN_SCHEMA)


SPAN_STRUCT = pa.struct(SPAN_COLUMNS)


def tuples_table(rows: list[SpanRow] | list[tuple]) -> pa.Table:
    """The Arrow table of SpanRows (or plain tuples in SPAN_COLUMNS order)."""
    return pa.Table.from_struct_array(pa.array(rows, type=SPAN_STRUCT))


assert SpanRow._fields == tuple(name for name, _ in SPAN_COLUMNS), "SpanRow and SPAN_COLUMNS must name the same columns"
