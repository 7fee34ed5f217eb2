"""OTLP logs to rows: `normalize_logs` maps an `ExportLogsServiceRequest` to a `Batch` whose
`log_records` the writer inserts into the log_records table.

What is kept: GenAI events (an event name, the record's own or its `event.name` attribute,
starting `gen_ai.`): the official OpenTelemetry GenAI instrumentations record message
content there, not on their spans. Other log records are acknowledged and not stored
(tracefix is no log store). The messages an event carries are content-addressed, as an LLM
span's are (`Batch.messages`), and named by key on its row (`input_keys`, `output_key`);
the store joins them to the event's span by trace and span id when a session is read
(`tracefix.collector.store.log_events`). Secrets are redacted, values held to the span
bounds; a record that cannot be stored is rejected alone (partial success).
"""
from __future__ import annotations

import hashlib
from typing import Any

import pyarrow as pa

from tracefix.collector.normalize.batch import Batch, add_messages
from tracefix.collector.normalize.dialects import CONTENT_ADDRESSED_KEYS, INT64_MAX, text_or_none
from tracefix.collector.normalize.genai_events import event_messages, is_genai_event
from tracefix.collector.normalize.json_text import dumps_compact
from tracefix.collector.normalize.otlp_values import NO_LIMIT, attributes, bounded_value
from tracefix.collector.normalize.rejections import SpanRejected, reason_of, reject
from tracefix.collector.redact import redact_label, redact_span

LOG_SCHEMA = pa.schema([
    ("record_key", pa.int64()), ("trace_id", pa.string()), ("span_id", pa.string()), ("time_ns", pa.int64()),
    ("observed_ns", pa.int64()), ("seq", pa.int32()), ("event_name", pa.string()), ("service", pa.string()),
    ("scope", pa.string()), ("severity_number", pa.int32()), ("severity_text", pa.string()), ("body", pa.string()),
    ("attributes", pa.string()), ("resource", pa.string()), ("input_keys", pa.list_(pa.int64())),
    ("output_key", pa.int64())])
LOG_COLUMNS = LOG_SCHEMA.names


def logs_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=LOG_SCHEMA)


def _reject(batch: Batch, record, reason: str) -> None:
    ids = f" (span {record.span_id.hex()} in trace {record.trace_id.hex()})" if record.span_id else ""
    reject(batch, f"log record {record.event_name[:100]!r}{ids}", reason)


def normalize_logs(request, *, max_attribute_chars: int = NO_LIMIT, wire_bytes: int | None = None) -> Batch:
    """The GenAI events of an ExportLogsServiceRequest as log_records rows (see the module)."""
    batch = Batch(wire_bytes=wire_bytes or 0)
    seq = 0
    for rl in request.resource_logs:
        try:
            resource = attributes(rl.resource.attributes, max_attribute_chars)
            redact_span(resource, [])
            resource_json = dumps_compact(resource, sort_keys=True)
        except Exception as exc:
            for sl in rl.scope_logs:
                for record in sl.log_records:
                    _reject(batch, record, f"its resource: {reason_of(exc)}")
            continue
        service = text_or_none(resource.get("service.name"))
        for sl in rl.scope_logs:
            scope = redact_label(sl.scope.name) or None
            for record in sl.log_records:
                seq += 1
                try:
                    row = _log_row(batch, record, max_attribute_chars)
                except Exception as exc:
                    _reject(batch, record, reason_of(exc))
                    continue
                if row is None:
                    continue
                row.update(seq=seq, service=service, scope=scope, resource=resource_json,
                           record_key=_record_key(resource_json, scope, record))
                batch.log_records.append(row)
    return batch


def _record_key(resource_json: str, scope: str | None, record) -> int:
    """What tells one record from another (a retried export sends the same again): its bytes,
    with where it came from."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(resource_json.encode())
    digest.update(b"\0" + (scope or "").encode() + b"\0")
    digest.update(record.SerializeToString(deterministic=True))
    return int.from_bytes(digest.digest(), "big", signed=True)


def _log_row(batch: Batch, record, max_chars: int) -> dict | None:
    """The row of one GenAI event (its messages go into `batch`), None for other records."""
    attrs = attributes(record.attributes, max_chars)
    name = record.event_name or attrs.get("event.name")
    if not isinstance(name, str) or not is_genai_event(name):
        return None
    trace_id, span_id = record.trace_id, record.span_id
    if len(trace_id) not in (0, 16) or len(span_id) not in (0, 8):
        raise SpanRejected("trace_id must be 16 bytes and span_id 8 bytes")
    if record.time_unix_nano > INT64_MAX or record.observed_time_unix_nano > INT64_MAX:
        raise SpanRejected("timestamps beyond the year 2262")
    body: Any = bounded_value("body", record.body, max_chars) if record.HasField("body") else None
    holder = {"body": body}
    redact_span(attrs, [])
    redact_span(holder, [])
    body = holder["body"]
    found = event_messages(name, body, attrs)
    inputs: list[dict] = []
    output = None
    if found is not None:
        inputs, output = found
        attrs = {k: v for k, v in attrs.items() if k not in CONTENT_ADDRESSED_KEYS}
    body_json = dumps_compact(body) if body is not None and found is None else None
    attrs_json = dumps_compact(attrs)
    # from here on nothing fails: the record's share of the batch
    input_keys = add_messages(batch, inputs)
    output_key = add_messages(batch, [output])[0] if output is not None else None
    return {"trace_id": trace_id.hex() or None, "span_id": span_id.hex() or None,
            "time_ns": record.time_unix_nano or record.observed_time_unix_nano or None,
            "observed_ns": record.observed_time_unix_nano or None, "event_name": redact_label(name),
            "severity_number": record.severity_number or None, "severity_text": record.severity_text or None,
            "body": body_json, "attributes": attrs_json, "input_keys": input_keys, "output_key": output_key}
