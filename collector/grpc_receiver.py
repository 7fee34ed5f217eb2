"""OTLP/gRPC receiver: `opentelemetry.proto.collector.trace.v1.TraceService/Export`.

Same path as OTLP/HTTP: the request arrives as raw bytes (no deserializer), decodes in the
decode worker process (`Decoder`), goes to the single writer, and is answered after the
commit. Decoding on gRPC's own threads would fight the writer for this process's GIL.
A full writer queue answers RESOURCE_EXHAUSTED, which OTLP exporters retry with backoff.
"""
from __future__ import annotations

import logging
from concurrent import futures
from typing import TYPE_CHECKING

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracefix.collector import otlp
from tracefix.collector.auth import INGEST
from tracefix.collector.decoding import DecodeFailed
from tracefix.collector.writer import QueueFull, WriterClosed

if TYPE_CHECKING:
    from tracefix.collector.server import Collector

log = logging.getLogger("tracefix.collector")


SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"


class TraceService:
    def __init__(self, collector: "Collector"):
        self.collector = collector

    def export(self, body: bytes, context) -> ExportTraceServiceResponse:
        if not self.collector.tokens.allows(dict(context.invocation_metadata()).get("authorization"), INGEST):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        try:
            batch = self.collector.decoder.decode_blocking(body, otlp.PROTOBUF, None)
        except otlp.OtlpError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, exc.message)
        except DecodeFailed as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        refused = []
        if batch.span_count:
            try:
                fut = self.collector.writer.submit_batch(batch)
            except QueueFull as exc:
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"collector busy: {exc}; retry later")
            except WriterClosed as exc:
                context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
            try:
                refused = fut.result(timeout=120)
            except Exception as exc:  # spans it refuses for their content are in `refused`
                log.warning("gRPC export failed to commit: %s", exc)
                context.abort(grpc.StatusCode.UNAVAILABLE, f"could not store the spans: {exc}")
        self.collector.metrics.exported("grpc", batch, refused)
        try:
            return otlp.export_response(batch, refused)
        except otlp.OtlpError as exc:  # no span could be stored
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, exc.message)


def _server_credentials(cert: str, key: str, client_ca: str | None) -> grpc.ServerCredentials:
    """The same PEM files as the HTTP port's; with a client CA, clients without a certificate it
    signed fail the handshake."""
    def read(path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    return grpc.ssl_server_credentials([(read(key), read(cert))],
                                       root_certificates=read(client_ca) if client_ca else None,
                                       require_client_auth=client_ca is not None)


def start_grpc(collector: "Collector", host: str, port: int) -> tuple[grpc.Server, int]:
    limit = collector.config.max_body_bytes
    # maximum_concurrent_rpcs bounds memory (each RPC holds a decoded request): beyond it gRPC
    # answers RESOURCE_EXHAUSTED itself, which exporters retry
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="otlp-grpc"),
                         options=[("grpc.max_receive_message_length", limit),
                                  ("grpc.so_reuseport", 0)],
                         maximum_concurrent_rpcs=32)
    export = grpc.unary_unary_rpc_method_handler(collector.metrics.count_grpc_exports(TraceService(collector).export),
                                                 request_deserializer=None,
                                                 response_serializer=ExportTraceServiceResponse.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Export": export}),))
    cfg = collector.config
    try:
        if cfg.tls:
            bound = server.add_secure_port(f"{host}:{port}", _server_credentials(cfg.tls_cert, cfg.tls_key,
                                                                                cfg.tls_client_ca))
        else:
            bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as exc:  # newer grpcio raises instead of returning 0
        raise OSError(f"cannot listen for OTLP/gRPC on {host}:{port}: {exc}") from exc
    if bound == 0:
        raise OSError(f"cannot listen for OTLP/gRPC on {host}:{port}")
    server.start()
    return server, bound
