"""A decode worker process that dies fails only the requests it held, with a retryable
answer (HTTP 503, gRPC UNAVAILABLE); a new worker takes the next ones, and the workers leave
with the server."""
from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from pathlib import Path

import grpc
import procs
from collector_support import TOKEN
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from test_ingest import _otlp_request, post

from tracefix.collector.access import HttpAccess


def decode_workers(server_pid: int) -> list[int]:
    """Pids of the server's children that run a decode worker (it names its thread tf-decode-proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if parent == server_pid and (stat.parent / "comm").read_text().strip() == "tf-decode-proc":
                out.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def test_a_killed_decode_worker_fails_only_its_requests_and_a_new_one_takes_the_next(tmp_path):
    serve = procs.start_serve(tmp_path / "t.duckdb", "--token", TOKEN, "--decode-workers", "1")
    try:
        [worker] = procs.wait_for(lambda: decode_workers(serve.popen.pid), "the decode worker")
        channel = grpc.insecure_channel(serve.match["grpc"])
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                     request_serializer=None,
                                     response_deserializer=ExportTraceServiceResponse.FromString)
        auth = (("authorization", f"Bearer {TOKEN}"),)
        sids = {k: f"worker-{k}-{uuid.uuid4().hex[:6]}" for k in ("http", "grpc", "small")}
        bodies = {k: _otlp_request(sid, 300) for k, sid in sids.items() if k != "small"}
        assert all(len(b) > 64 * 1024 for b in bodies.values())  # over 64 KiB: decoded by the worker

        def send_http() -> int:
            return post(serve.match["http"] + "/v1/traces", bodies["http"])[0]

        def send_grpc() -> grpc.StatusCode:
            try:
                export(bodies["grpc"], timeout=60, metadata=auth)
                return grpc.StatusCode.OK
            except grpc.RpcError as err:
                return err.code()

        answers: dict[str, object] = {}
        os.kill(worker, signal.SIGSTOP)  # both requests reach it and wait there
        senders = [threading.Thread(target=lambda k=k, f=f: answers.__setitem__(k, f()))
                   for k, f in (("http", send_http), ("grpc", send_grpc))]
        for t in senders:
            t.start()
        time.sleep(3)
        assert not answers, f"answered by a stopped worker: {answers}"
        # a small body decodes on the server: it does not wait for the worker
        assert post(serve.match["http"] + "/v1/traces", _otlp_request(sids["small"], 3))[0] == 200
        os.kill(worker, signal.SIGKILL)
        for t in senders:
            t.join(60)
        assert answers == {"http": 503, "grpc": grpc.StatusCode.UNAVAILABLE}

        # the exporters' retries: a new worker decodes them, each span stored once
        assert send_http() == 200
        assert send_grpc() == grpc.StatusCode.OK
        [new_worker] = decode_workers(serve.popen.pid)
        assert new_worker != worker
        api = HttpAccess(serve.match["http"], TOKEN)
        assert {k: len(api.get_spans(sid)) for k, sid in sids.items()} == {"http": 300, "grpc": 300, "small": 3}
        channel.close()
    finally:
        assert serve.stop() == 0, serve.output()
    procs.wait_for(lambda: not Path(f"/proc/{new_worker}").exists(), "the worker to leave with the server", 15)
    assert "Traceback" not in serve.output() and "leaked" not in serve.output(), serve.output()
