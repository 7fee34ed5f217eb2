"""The store on a DuckDB file in-process: what the single writer does when it merges requests."""
from __future__ import annotations

import uuid

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
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
