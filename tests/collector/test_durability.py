"""An acknowledged export survives kill -9, also one the spool took; back-pressure answers 429
instead of growing memory once the spool is off or spent."""
from __future__ import annotations

import json
import signal
import threading
import time
import urllib.request
import uuid

import procs
import pytest
from test_ingest import _otlp_request, post


def _flood(url: str, acked: list[str], stop: threading.Event, statuses: list[int], spans: int = 20) -> None:
    while not stop.is_set():
        sid = f"k9-{uuid.uuid4().hex[:12]}"
        try:
            status, _, _ = post(url, _otlp_request(sid, spans), token=None)
        except OSError:
            return  # the server died under us: this request was never acknowledged
        statuses.append(status)
        if status == 200:
            acked.append(sid)


def _checkpoints(serve) -> int:
    with urllib.request.urlopen(serve.match["http"] + "/healthz", timeout=10) as resp:
        return json.loads(resp.read())["checkpoints"]


@pytest.mark.parametrize("checkpoints", ["default", "constant"])
def test_kill_9_under_load_keeps_every_acknowledged_span(tmp_path, checkpoints):
    db = tmp_path / "k9.duckdb"
    # "constant": a 256 KB threshold keeps the background checkpointer busy during the flood
    env = {"TRACEFIX_CHECKPOINT_THRESHOLD": "256KB"} if checkpoints == "constant" else {}
    serve = procs.start_serve(db, "--diagnose", "off", env=env)
    acked: list[str] = []
    statuses: list[int] = []
    stop = threading.Event()
    threads = [threading.Thread(target=_flood, args=(serve.match["http"] + "/v1/traces", acked, stop, statuses))
               for _ in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while (len(acked) < 40 or (checkpoints == "constant" and _checkpoints(serve) == 0)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if checkpoints == "constant":  # the kill lands among background checkpoints
        assert _checkpoints(serve) > 0
    serve.popen.send_signal(signal.SIGKILL)
    serve.popen.wait()
    stop.set()
    for t in threads:
        t.join()
    assert len(acked) >= 40, statuses[:20]

    serve = procs.start_serve(db, "--diagnose", "off")  # the file opens: the WAL replays
    try:
        from tracefix.collector.access import HttpAccess

        api = HttpAccess(serve.match["http"])
        missing = [sid for sid in acked if len(api.get_spans(sid)) != 20]
        assert missing == [], f"{len(missing)} of {len(acked)} acknowledged requests lost"
        assert [s["index"] for s in api.get_session(acked[-1])["steps"]] == list(range(20))
    finally:
        assert serve.stop() == 0, serve.output()


def _health(serve) -> dict:
    with urllib.request.urlopen(serve.match["http"] + "/healthz", timeout=10) as resp:
        return json.loads(resp.read())


def _spool_records(spool_dir) -> int:
    """Requests in the spool's segment files, read as the next start will read them."""
    from tracefix.collector.spool.segments import Segment, scan_segment

    return sum(scan_segment(Segment(int(p.stem), p, sealed=True)).records for p in spool_dir.glob("*.seg"))


SPOOL_BACKLOG = 10


def test_kill_9_while_spilling_to_the_spool_keeps_every_acknowledged_span_exactly_once(tmp_path):
    """A queue of one span: exports that meet another waiting go to the spool and are acknowledged
    once fsynced. Killed while the spool holds some, the next start replays them: every
    acknowledged span is stored, none twice (a request committed before the kill but still in
    its segment is replayed too)."""
    db = tmp_path / "spill.duckdb"
    serve = procs.start_serve(db, "--diagnose", "off", "--max-queue-spans", "1")
    acked: list[str] = []
    statuses: list[int] = []
    stop = threading.Event()
    threads = [threading.Thread(target=_flood, args=(serve.match["http"] + "/v1/traces", acked, stop, statuses))
               for _ in range(4)]
    for t in threads:
        t.start()
    # Kill with a backlog in the spool, not one request the writer may take in the moment
    # between this check and the kill (on a loaded machine it sometimes did).
    deadline = time.monotonic() + 30
    while (len(acked) < 60 or _health(serve)["spooled_requests"] < SPOOL_BACKLOG) and time.monotonic() < deadline:
        time.sleep(0.02)
    serve.popen.send_signal(signal.SIGKILL)
    serve.popen.wait()
    stop.set()
    for t in threads:
        t.join()
    assert len(acked) >= 60 and set(statuses) == {200}, statuses[:20]
    left = _spool_records(tmp_path / "spill.duckdb.spool")
    assert left > 0, "the kill found the spool empty: the test proves nothing"

    serve = procs.start_serve(db, "--diagnose", "off")  # the spool replays into the store
    try:
        from tracefix.collector.access import HttpAccess

        deadline = time.monotonic() + 60
        while _health(serve)["spooled_requests"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _health(serve)["spooled_requests"] == 0
        assert "replaying" in serve.output()
        api = HttpAccess(serve.match["http"])
        counts = {sid: len(api.get_spans(sid)) for sid in acked}
        wrong = {sid: n for sid, n in counts.items() if n != 20}
        assert wrong == {}, f"{len(wrong)} of {len(acked)} acknowledged requests lost or stored twice"
        assert [s["index"] for s in api.get_session(acked[-1])["steps"]] == list(range(20))
    finally:
        assert serve.stop() == 0, serve.output()
    assert not list((tmp_path / "spill.duckdb.spool").glob("*.seg"))  # drained: segments deleted


def test_sigterm_drains_and_exits_zero_and_history_is_stored_once(tmp_path):
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from test_ingest import record_agent_session

    db = tmp_path / "term.duckdb"
    serve = procs.start_serve(db, "--diagnose", "off")
    sid = "term-1"
    assert post(serve.match["http"] + "/v1/traces", _otlp_request(sid, 5), token=None)[0] == 200
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    record_agent_session(provider.get_tracer("t"), "growing", steps=6)
    body = encode_spans(exporter.get_finished_spans()).SerializeToString()
    for _ in range(2):  # the second time is an exporter retry: nothing may be stored twice
        assert post(serve.match["http"] + "/v1/traces", body, token=None)[0] == 200
    assert serve.stop() == 0
    assert "stopped" in serve.output()
    from tracefix.collector.access import connect

    with connect(db=str(db)) as store:  # no server: the file itself
        assert store.kind == "file"
        assert len(store.get_spans(sid)) == 5
        doc = store.get_session("growing")
        sent = sum(len(s["input_messages"]) + 1 for s in doc["steps"])
        distinct = {json.dumps(m, sort_keys=True) for s in doc["steps"]
                    for m in [*s["input_messages"], s["output_message"]]}
        assert sent == 2 * 6 + 2 * (0 + 1 + 2 + 3 + 4 + 5) + 6  # what the six LLM calls carried
        # content addressing: each distinct message once; 'term-1' adds its 5 questions and 5
        # answers (its system prompt is the same message as the growing session's)
        assert store.store.stats()["messages"] == len(distinct) + 5 + 5
        assert len(store.get_spans("growing")) == 1 + 6 * 3
        assert store.store.stats()["snapshots"] == 6


def test_without_a_spool_a_full_queue_answers_429_and_resource_exhausted(tmp_path):
    db = tmp_path / "bp.duckdb"
    serve = procs.start_serve(db, "--diagnose", "off", "--max-queue-spans", "50", "--spool-max-mb", "0")
    try:
        statuses: list[int] = []
        retry_after: list[str] = []
        lock = threading.Lock()

        def blast():
            for _ in range(15):
                status, _, headers = post(serve.match["http"] + "/v1/traces",
                                          _otlp_request(f"bp-{uuid.uuid4().hex[:10]}", 40), token=None)
                with lock:
                    statuses.append(status)
                    if status == 429:
                        retry_after.append(headers.get("retry-after"))

        threads = [threading.Thread(target=blast) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert set(statuses) <= {200, 429}
        assert 200 in statuses
        assert 429 in statuses, "six concurrent exporters against a 50-span queue must meet back-pressure"
        assert set(retry_after) == {"1"}

        import grpc
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

        codes: list = []
        channel = grpc.insecure_channel(serve.match["grpc"])
        stub = TraceServiceStub(channel)

        def blast_grpc():
            for _ in range(10):
                req = ExportTraceServiceRequest.FromString(_otlp_request(f"bpg-{uuid.uuid4().hex[:10]}", 40))
                try:
                    stub.Export(req, timeout=30)
                    code = grpc.StatusCode.OK
                except grpc.RpcError as exc:
                    code = exc.code()
                with lock:
                    codes.append(code)

        threads = [threading.Thread(target=blast_grpc) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        channel.close()
        assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED}
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes and grpc.StatusCode.OK in codes
    finally:
        serve.stop()
