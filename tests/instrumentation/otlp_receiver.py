"""A tiny real OTLP/HTTP trace receiver for tests: stdlib http.server + opentelemetry-proto.

Accepts ``POST /v1/traces`` (protobuf, optionally gzip), decodes every span into a dict
(name, kind, ids, attributes with their values decoded, events) and keeps them in memory.
"""
from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                      ExportTraceServiceResponse)


def any_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(any_value(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def attributes(kvs) -> dict:
    return {kv.key: any_value(kv.value) for kv in kvs}


class OTLPReceiver:
    def __init__(self) -> None:
        self.spans: list[dict] = []
        self.requests = 0
        self.headers: list[dict] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._store(request, dict(self.headers.items()))
                payload = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> "OTLPReceiver":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _store(self, request: ExportTraceServiceRequest, headers: dict) -> None:
        decoded = []
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    decoded.append({
                        "name": span.name, "kind": span.kind, "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(), "parent_span_id": span.parent_span_id.hex(),
                        "attributes": attributes(span.attributes), "resource": resource,
                        "scope": scope_spans.scope.name, "status_code": span.status.code,
                        "events": [{"name": e.name, "attributes": attributes(e.attributes)} for e in span.events],
                    })
        with self._lock:
            self.requests += 1
            self.headers.append(headers)
            self.spans.extend(decoded)

    def session_spans(self, session_id: str) -> list[dict]:
        with self._lock:
            return [s for s in self.spans if s["attributes"].get("tracefix.session.id") == session_id]
