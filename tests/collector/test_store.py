"""The store on a DuckDB file in-process: what the single writer does when it merges requests."""
from __future__ import annotations

import uuid

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_ingest import _otlp_request

from tracefix.collector.normalize import Batch, normalize_request
from tracefix.collector.store import Store


def test_a_retry_merged_into_the_same_transaction_is_stored_once(tmp_path):
    store = Store(tmp_path / "merge.duckdb")
    sid = f"merge-{uuid.uuid4().hex[:6]}"
    body = _otlp_request(sid, 3)
    merged = Batch()
    for _ in range(2):  # the original request and its retry, both queued when the writer wakes
        merged.extend(normalize_request(ExportTraceServiceRequest.FromString(body)))
    assert merged.merged and len(merged.spans) == 6
    store.ingest(merged)
    assert len(store.get_spans(sid)) == 3
    assert [s["index"] for s in store.get_session(sid)["steps"]] == [0, 1, 2]
    store.ingest(normalize_request(ExportTraceServiceRequest.FromString(body)))  # and once more, later
    assert store.stats()["spans"] == 3
    store.close()


def test_a_retry_of_a_span_stored_before_its_session_was_known_is_stored_once(tmp_path):
    """New sessions' spans skip the duplicate check (nothing of theirs can be stored yet), but a
    span first stored under its trace id (no session attribute in sight) can come back with
    its trace's session, new in that batch: it must still be found."""
    store = Store(tmp_path / "late.duckdb")
    sid = f"late-{uuid.uuid4().hex[:6]}"
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("agent run", attributes={"session.id": sid}):
        with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
            pass
    root, child = sorted(exporter.get_finished_spans(), key=lambda s: s.parent is not None)
    store.ingest(normalize_request(encode_spans([child])))  # alone: its session is its trace id
    assert store.stats()["spans"] == 1
    store.ingest(normalize_request(encode_spans([root, child])))  # the retry, now with the session
    assert store.stats()["spans"] == 2
    assert [s["name"] for s in store.get_spans(sid)] == ["agent run"]
    store.close()


def test_steps_of_new_and_known_sessions_in_one_batch(tmp_path):
    """Steps of sessions new in a batch are numbered from the batch, those of known sessions
    from the table: both in one transaction must give each session 0..n-1."""
    store = Store(tmp_path / "steps.duckdb")
    old, new = f"old-{uuid.uuid4().hex[:6]}", f"new-{uuid.uuid4().hex[:6]}"
    store.ingest(normalize_request(ExportTraceServiceRequest.FromString(_otlp_request(old, 2))))
    merged = Batch()
    for body in (_otlp_request(old, 3), _otlp_request(new, 2)):
        merged.extend(normalize_request(ExportTraceServiceRequest.FromString(body)))
    store.ingest(merged)
    assert [s["index"] for s in store.get_session(old)["steps"]] == [0, 1, 2, 3, 4]
    assert [s["index"] for s in store.get_session(new)["steps"]] == [0, 1]
    store.close()
