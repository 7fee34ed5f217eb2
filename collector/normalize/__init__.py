"""Turn decoded OTLP spans into the store's rows, whatever instrumentation produced them.

| module | what it holds |
|---|---|
| `dialects` | how GenAI, OpenInference and OpenLLMetry attributes name a span's kind, messages, model, tokens, tool call, session |
| `batch` | `Batch` (one transaction's worth), content-addressed messages, session field merging |
| `span_row` | `SpanRow`, one stored span by column name, and the Arrow schema `SPAN_COLUMNS` |
| `rows` | `normalize_request`: an `ExportTraceServiceRequest` (or `wire_spans`' reading of one) to a `Batch` |
| `wire_spans` | an OTLP/protobuf trace body read by the C reader (`otlp_wire/`), or left to protobuf |
| `log_records` | `normalize_logs`: the GenAI events of an `ExportLogsServiceRequest` to a `Batch` |
| `genai_events` | the chat messages GenAI log events carry, in each shape the official instrumentations emit |
| `metric_points` | `normalize_metrics`: the GenAI metrics' points of an `ExportMetricsServiceRequest` to a `Batch` |
| `otlp_values` | OTLP protobuf attribute values as Python, held to their size bounds |
| `rejections` | `SpanRejected`, how an error names a span and why, the batch's bounded notes |
| `json_text` | fast compact JSON text |

Pure (no I/O, no SQL). Chat messages are content-addressed, so a growing history is stored
once per message.
"""
from __future__ import annotations

from tracefix.collector.normalize.batch import (Batch, Evaluation, Snapshot, add_blob, add_messages, add_texts,
                                                merge_session, message_key)
from tracefix.collector.normalize.dialects import canonical_message, finite_score, llm_messages, span_kind
from tracefix.collector.normalize.json_text import dumps_compact, loads_fast
from tracefix.collector.normalize.log_records import LOG_COLUMNS, logs_table, normalize_logs
from tracefix.collector.normalize.metric_points import POINT_COLUMNS, normalize_metrics, points_table
from tracefix.collector.normalize.rejections import SpanRejected, span_label
from tracefix.collector.normalize.rows import normalize_request
from tracefix.collector.normalize.span_row import SPAN_COLUMNS, SPAN_SCHEMA, SpanRow, spans_table, tuples_table

__all__ = ["LOG_COLUMNS", "POINT_COLUMNS", "SPAN_COLUMNS", "SPAN_SCHEMA", "Batch", "Evaluation", "Snapshot",
           "SpanRejected", "SpanRow", "add_blob",
           "add_messages", "add_texts", "canonical_message", "dumps_compact", "finite_score", "llm_messages",
           "loads_fast", "logs_table", "merge_session", "message_key", "normalize_logs", "normalize_metrics",
           "normalize_request", "points_table", "span_kind", "span_label",
           "spans_table", "tuples_table"]
