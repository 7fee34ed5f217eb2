"""What becomes of a span that cannot be stored: `SpanRejected`, the reason and the label an
error message gives it, and the bounded notes (errors, warnings) a `Batch` carries back to
the exporter as OTLP partial success.
"""
from __future__ import annotations

import pyarrow as pa

from tracefix.collector.normalize.batch import Batch
from tracefix.collector.normalize.span_row import SpanRow, tuples_table
from tracefix.errors import TracefixError


class SpanRejected(TracefixError, ValueError):
    """One span cannot be stored (reported through OTLP partial success)."""


MAX_NOTES = 5  # reasons and warnings kept per request: enough to act on, bounded in size
TOO_DEEP = "a value is nested too deeply"


def span_label(name: str, span_id: str | None = None, trace_id: str | None = None) -> str:
    """How an error message names a span: its name (cut short) and its hex ids when known."""
    name = name if len(name) <= 100 else name[:100] + "..."
    return f"span {name!r} ({span_id} in trace {trace_id})" if span_id else f"span {name!r}"


def span_label_of(span) -> str:
    """`span_label` of a protobuf span."""
    if len(span.trace_id) == 16 and len(span.span_id) == 8:
        return span_label(span.name, span.span_id.hex(), span.trace_id.hex())
    return span_label(span.name)  # its ids are what is wrong with it


def reason_of(exc: BaseException) -> str:
    """Why a span was rejected, from what reading or storing it raised."""
    if isinstance(exc, SpanRejected):
        return str(exc)
    if isinstance(exc, RecursionError):
        return TOO_DEEP
    text = str(exc)
    return f"cannot be read ({type(exc).__name__}: {text[:200]}{'...' if len(text) > 200 else ''})"


def reject(batch: Batch, label: str, reason: str) -> None:
    batch.rejected += 1
    if len(batch.errors) < MAX_NOTES:
        batch.errors.append(f"{label}: {reason}")


def warn(batch: Batch, text: str) -> None:
    if len(batch.warnings) < MAX_NOTES:
        batch.warnings.append(text)


def table_of_storable(batch: Batch, rows: list[SpanRow]) -> pa.Table:
    """The Arrow table of the rows that convert, the others rejected (what they added to
    the batch's sessions and messages stays: harmless without the span)."""
    kept = []
    for row in rows:
        try:
            tuples_table([row])
        except Exception as exc:
            reject(batch, span_label(row.name, row.span_id, row.trace_id), reason_of(exc))
        else:
            kept.append(row)
    return tuples_table(kept)
