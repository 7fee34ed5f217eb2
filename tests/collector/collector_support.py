"""Helpers of the collector tests: a real webhook receiver, free ports, SDK exporters.

A uniquely named module (not conftest) so `from collector_support import ...` resolves to
this file whatever other test folders are collected in the same run."""
from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

TOKEN = "test-token"


class WebhookReceiver:
    """A stdlib HTTP server recording every JSON POST (the alert target) with its path and arrival time.

    It answers `status`, or what `respond(path, tries_so_far)` returns: (status, extra headers)."""

    def __init__(self, port: int = 0, status: int = 200,
                 respond: Callable[[str, int], tuple[int, dict]] | None = None):
        received = self.received = []
        self.event = threading.Event()
        event = self.event
        answer = respond or (lambda path, tries: (status, {}))

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                code, headers = answer(self.path, len(received))
                received.append({"headers": dict(self.headers), "json": json.loads(body), "body": body,
                                 "path": self.path, "at": time.monotonic()})
                event.set()
                self.send_response(code)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = f"{self.base_url}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, predicate, timeout: float = 20.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hits = [r for r in self.received if predicate(r["json"])]
            if hits:
                return hits
            time.sleep(0.05)
        return [r for r in self.received if predicate(r["json"])]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def strict_json(text: str | bytes):
    """Parse JSON as a strict reader would: NaN / Infinity are not JSON."""
    def refuse(token):
        raise ValueError(f"{token} is not JSON")
    return json.loads(text, parse_constant=refuse)


def http(method: str, url: str, body: bytes | None = None, token: str | None = TOKEN,
         content_type: str = "application/json") -> tuple[int, bytes, Any]:
    """One real HTTP request: (status, body, headers (case-insensitive)), error statuses included."""
    import urllib.error
    import urllib.request

    headers = {"Content-Type": content_type} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tracer_provider(collector_proc, protocol: str = "http", token: str | None = TOKEN, service: str = "test-agent"):
    """A real SDK TracerProvider exporting OTLP to the collector (flush with force_flush)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    headers = {"authorization": f"Bearer {token}"} if token else None
    if protocol == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=collector_proc.match["http"] + "/v1/traces", headers=headers, timeout=10)
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=collector_proc.match["grpc"], insecure=True,
                                    headers=tuple(headers.items()) if headers else None, timeout=10)
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=50))
    return provider


def otlp_error(body: bytes, content_type: str) -> tuple[str, float | None]:
    """An OTLP/HTTP error answer's text and retry delay, read as the client reads it: a
    protobuf `google.rpc.Status` (message, RetryInfo in its details) when the answer is
    protobuf, as it is to a protobuf request, else the ErrorBody's `error` and `retry_after_s`."""
    if content_type.split(";")[0].strip() != "application/x-protobuf":
        answer = strict_json(body)
        return answer["error"], answer.get("retry_after_s")
    from google.rpc import error_details_pb2, status_pb2

    status = status_pb2.Status.FromString(body)
    delays = []
    for detail in status.details:
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            delays.append(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)
    assert len(delays) <= 1, status
    return status.message, delays[0] if delays else None
