"""200 OTLP/gRPC exports at once against a real `tracefix serve` (the generated TraceService stub,
200 client threads): each is stored, or refused RESOURCE_EXHAUSTED *with* `google.rpc.RetryInfo`
and stored when sent again after that delay. gRPC's own `maximum_concurrent_rpcs` used to refuse
what was past ~160 at once without RetryInfo, so exporters that follow the OTLP specification
dropped those spans. With the spool on (the default), an export past the handler's cap waits for
its turn; with it off, it is refused at once, with the delay."""
from __future__ import annotations

import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from collector_support import TOKEN
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from test_backpressure import retry_delay_of
from test_partial_success import make_request, make_span

import procs

from tracefix.collector.access import HttpAccess

EXPORTS = 200
SPANS = 30
MESSAGE_CHARS = 10_000  # ~300 KB an export, as long prompts make them: 200 of them are in flight together
ATTEMPTS = 6
AUTH = (("authorization", f"Bearer {TOKEN}"),)


@pytest.fixture(scope="module", params=["spool", "no-spool"])
def serve(request, tmp_path_factory):
    extra = ("--spool-max-mb", "0") if request.param == "no-spool" else ()
    p = procs.start_serve(tmp_path_factory.mktemp("grpc-concurrency") / "c.duckdb", "--token", TOKEN,
                          "--diagnose", "off", *extra, env={"TRACEFIX_TOKEN": ""})
    p.config = request.param
    yield p
    p.stop()


def export_request(service: str, sid: str):
    trace = uuid.uuid4().bytes
    padding = "x" * MESSAGE_CHARS
    spans: list[Span] = [make_span(trace, n, f"chat {n}", {
        "gen_ai.operation.name": "chat", "tracefix.session.id": sid, "tracefix.step": n,
        "gen_ai.input.messages": json.dumps([{"role": "user", "content": f"question {n} {padding}"}])})
        for n in range(SPANS)]
    return make_request(spans, service=service)


def send_until_stored(stub: TraceServiceStub, request, start: threading.Barrier) -> list[float] | str:
    """Export `request` once every thread is ready, and again after the delay each
    RESOURCE_EXHAUSTED tells (as the OTLP exporters do). The delays told, one per refusal, or
    why the spans would be lost."""
    delays = []
    start.wait(timeout=30)
    for _ in range(ATTEMPTS):
        try:
            answer = stub.Export(request, timeout=30, metadata=AUTH)
        except grpc.RpcError as exc:
            delay = retry_delay_of(exc)
            if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or delay is None:
                return f"{exc.code().name} without RetryInfo: {exc.details()}"
            delays.append(delay)
            time.sleep(delay)
            continue
        if answer.partial_success.rejected_spans:
            return f"rejected: {answer.partial_success}"
        return delays
    return f"still refused after {ATTEMPTS} attempts: {delays}"


def test_200_concurrent_grpc_exports_are_stored_or_refused_with_retry_info(serve):
    service = f"grpc-200-{uuid.uuid4().hex[:8]}"
    requests = [export_request(service, f"{service}-{i}") for i in range(EXPORTS)]
    channel = grpc.insecure_channel(serve.match["grpc"])
    try:
        stub = TraceServiceStub(channel)
        started = time.monotonic()
        with ThreadPoolExecutor(EXPORTS) as pool:
            start = threading.Barrier(EXPORTS)  # all at once: a thread pool starts its threads one by one
            outcomes = list(pool.map(lambda r: send_until_stored(stub, r, start), requests))
        took = time.monotonic() - started
    finally:
        channel.close()
    lost = [o for o in outcomes if isinstance(o, str)]
    assert not lost, f"{len(lost)} of {EXPORTS} exports would be dropped, e.g. {sorted(set(lost))[:3]}"
    refused = [d for d in outcomes if d]
    print(f"{serve.config}: {EXPORTS} concurrent gRPC exports: {EXPORTS - len(refused)} stored at once, "
          f"{len(refused)} refused with RetryInfo then stored ({sum(map(len, refused))} refusals), {took:.1f} s")
    if serve.config == "no-spool":
        assert refused, "no export met the cap: the burst proves nothing"
    # every span of every export, whether it went through the queue, the spool or a retry
    api = HttpAccess(serve.match["http"], TOKEN)
    deadline = time.monotonic() + 30
    while True:
        stored = {s["session_id"]: s["spans"] for s in api.list_sessions(service=service, limit=1000)}
        if len(stored) == EXPORTS and set(stored.values()) == {SPANS} or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # spooled exports are acknowledged before the drain commits them
    assert len(stored) == EXPORTS and set(stored.values()) == {SPANS}, (len(stored), set(stored.values()))


def test_an_export_call_without_a_request_is_invalid_argument(serve):
    """The handler reads the request only once admitted (a client-streaming handler, the same
    bytes on the wire as a unary call): a client stream that sends none is refused, not hung."""
    channel = grpc.insecure_channel(serve.match["grpc"])
    try:
        call = channel.stream_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                    request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as err:
            call(iter([]), timeout=10, metadata=AUTH)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    finally:
        channel.close()
