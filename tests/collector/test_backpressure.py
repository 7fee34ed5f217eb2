"""Back-pressure as the OTLP specification asks: a real `tracefix serve` with a tiny writer queue
answers a burst of exports RESOURCE_EXHAUSTED carrying `google.rpc.RetryInfo` (without it an
exporter may not retry, and the spans are lost), HTTP 429 with a Retry-After from the same rule,
and a retrying OTLP exporter ends with every span stored."""
from __future__ import annotations

import logging
import math
import re
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from collector_support import TOKEN, otlp_error, tracer_provider
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from test_ingest import post
from test_metrics import burst
from test_partial_success import good_chat, make_request

import procs

from tracefix.collector.access import HttpAccess
from tracefix.collector.grpc_receiver import MAX_CONCURRENT_EXPORTS
from tracefix.collector.writer import MAX_RETRY_DELAY_S, MIN_RETRY_DELAY_S, retry_delay_s


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    # a queue of 1 span and no spool refuse any export that arrives while another waits:
    # back-pressure on demand (with a spool, refusals start once its budget is spent: test_spool.py)
    p = procs.start_serve(tmp_path_factory.mktemp("backpressure") / "b.duckdb", "--token", TOKEN,
                          "--diagnose", "off", "--max-queue-spans", "1", "--spool-max-mb", "0",
                          env={"TRACEFIX_TOKEN": ""})
    yield p
    p.stop()


def session_body(sid: str, spans: int) -> bytes:
    trace = uuid.uuid4().bytes
    return make_request([good_chat(sid, trace, n) for n in range(spans)]).SerializeToString()


def retry_delay_of(error: grpc.RpcError) -> float | None:
    """The RetryInfo delay in a gRPC error's rich status (grpc-status-details-bin), or None."""
    status = rpc_status.from_call(error)
    for detail in status.details if status else ():
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return info.retry_delay.seconds + info.retry_delay.nanos / 1e9
    return None


def test_the_delay_is_the_time_to_drain_what_is_pending_within_bounds():
    assert retry_delay_s(3000, 1000.0) == 3.0
    assert retry_delay_s(1, 1000.0) == MIN_RETRY_DELAY_S  # never a retry storm
    assert retry_delay_s(10**9, 1000.0) == MAX_RETRY_DELAY_S  # never past an exporter's timeout
    assert retry_delay_s(10, 0.0) == MAX_RETRY_DELAY_S


@pytest.fixture(scope="module")
def roomy_serve(tmp_path_factory):
    """A queue that never fills: exports wait for the writer, so a burst meets the concurrency cap.
    No spool: with one, an export over the cap waits for a slot instead (test_spool.py)."""
    p = procs.start_serve(tmp_path_factory.mktemp("roomy") / "r.duckdb", "--token", TOKEN,
                          "--diagnose", "off", "--spool-max-mb", "0", env={"TRACEFIX_TOKEN": ""})
    yield p
    p.stop()


def grpc_burst(serve, body: bytes, exports: int) -> list[grpc.RpcError]:
    """`exports` raw gRPC exports of `body` at once; the RESOURCE_EXHAUSTED errors (any other
    failure fails the test)."""
    channel = grpc.insecure_channel(serve.match["grpc"])
    raw = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                              request_serializer=None, response_deserializer=ExportTraceServiceResponse.FromString)
    try:
        # all on one channel at once: the server sees them concurrently (HTTP/2 streams)
        calls = [raw.future(body, timeout=30, metadata=(("authorization", f"Bearer {TOKEN}"),))
                 for _ in range(exports)]
        busy = []
        for call in calls:
            try:
                call.result()
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (exc.code(), exc.details())
                busy.append(exc)
        return busy
    finally:
        channel.close()


def assert_retry_info(busy: list[grpc.RpcError]) -> None:
    assert busy, "no export was refused: the burst proves nothing"
    for exc in busy:
        delay = retry_delay_of(exc)
        assert delay is not None, f"RESOURCE_EXHAUSTED without RetryInfo: {exc.details()!r}"
        assert MIN_RETRY_DELAY_S <= delay <= MAX_RETRY_DELAY_S
        # the same delay in the trailer the Python OTLP exporter reads
        info = error_details_pb2.RetryInfo.FromString(dict(exc.trailing_metadata())["google.rpc.retryinfo-bin"])
        assert info.retry_delay.ToNanoseconds() / 1e9 == pytest.approx(delay)


def test_a_full_queue_answers_resource_exhausted_with_retry_info(serve):
    # no more exports than the handler admits at once, so every refusal is the queue's: past
    # the cap, an export arriving while 32 others still decode is refused by the cap instead
    # (rightly, with RetryInfo too), and how many do depends on the machine's speed
    busy = grpc_burst(serve, session_body(f"bp-queue-{uuid.uuid4().hex[:8]}", 50), MAX_CONCURRENT_EXPORTS)
    assert_retry_info(busy)
    assert all("waiting to be written" in exc.details() for exc in busy), {exc.details() for exc in busy}


def test_exports_beyond_the_concurrency_cap_answer_resource_exhausted_with_retry_info(roomy_serve):
    """More exports at once than the handler admits, and more than gRPC's own limit used to be
    (32, answered without RetryInfo): every refusal comes from our cap and has a delay."""
    busy = grpc_burst(roomy_serve, session_body(f"bp-cap-{uuid.uuid4().hex[:8]}", 200), 4 * MAX_CONCURRENT_EXPORTS)
    assert_retry_info(busy)
    assert all("exports in progress" in exc.details() for exc in busy), {exc.details() for exc in busy}


def test_http_429_retry_after_follows_the_same_rule(serve):
    body = session_body(f"bp-http-{uuid.uuid4().hex[:8]}", 50)
    answers = burst(lambda: post(serve.match["http"] + "/v1/traces", body))
    assert {status for status, _, _ in answers} <= {200, 429}
    busy = [(resp, headers) for status, resp, headers in answers if status == 429]
    assert busy, "no export met a full queue: the burst proves nothing"

    for resp, headers in busy:
        _, delay = otlp_error(resp, "application/x-protobuf")  # RetryInfo in the Status's details
        assert MIN_RETRY_DELAY_S <= delay <= MAX_RETRY_DELAY_S
        retry_after = {k.lower(): v for k, v in headers.items()}["retry-after"]
        assert retry_after == str(math.ceil(delay))


def test_the_python_otlp_grpc_exporter_stores_every_span_of_a_burst_waiting_as_told(serve, caplog):
    """The exporter retries RESOURCE_EXHAUSTED even without RetryInfo, on its own backoff (about
    1 s, 2 s, 4 s): that it waited the collector's delay instead shows RetryInfo reached it. With a
    queue of 1 span at most one small export is pending, drained well under the floor, so every
    delay told is MIN_RETRY_DELAY_S."""
    caplog.set_level(logging.WARNING, logger="opentelemetry.exporter.otlp.proto.grpc.exporter")
    sid = f"bp-sdk-{uuid.uuid4().hex[:8]}"
    providers = [tracer_provider(serve, "grpc", service=f"bp-{n}") for n in range(6)]

    def emit(provider, n):
        tracer = provider.get_tracer("bp")
        for i in range(20):
            with tracer.start_as_current_span(f"step {n}.{i}") as span:
                span.set_attribute("tracefix.session.id", sid)

    together = threading.Barrier(len(providers))

    def emit_and_flush(provider, n):  # every provider exports at the same moment, not in turn
        emit(provider, n)
        together.wait(timeout=30)
        return provider.force_flush(30_000)

    with ThreadPoolExecutor(len(providers)) as pool:
        flushed = list(pool.map(emit_and_flush, providers, range(len(providers))))
    for p in providers:
        p.shutdown()
    assert all(flushed)
    assert len(HttpAccess(serve.match["http"], TOKEN).get_spans(sid)) == 6 * 20
    waits = [float(m.group(1)) for r in caplog.records
             if (m := re.search(r"RESOURCE_EXHAUSTED .* retrying in ([0-9.]+)s", r.getMessage()))]
    assert waits, "no export was refused: the burst proves nothing"
    assert set(waits) == {MIN_RETRY_DELAY_S}, waits
