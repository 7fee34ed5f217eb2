"""OTLP/gRPC receiver: `opentelemetry.proto.collector.trace.v1.TraceService/Export`.

Same path as OTLP/HTTP: the request arrives as raw bytes (no deserializer), decodes in the
decode worker process (`Decoder`), goes to the single writer, and is answered after the
commit (or, when the writer's queue is full, after it is fsynced to the spool:
tracefix.collector.spool). Decoding on gRPC's own threads would fight the writer for this
process's GIL. A spent spool budget (no spool: a full writer queue), or more than
MAX_CONCURRENT_EXPORTS exports at once, answers RESOURCE_EXHAUSTED carrying
`google.rpc.RetryInfo` (the delay the writer and the spool need to drain,
`Ingest.retry_delay_s`): the OTLP specification lets an exporter retry RESOURCE_EXHAUSTED only
when RetryInfo is there, so without it the spans would be dropped.
"""
from __future__ import annotations

import logging
import threading
from concurrent import futures
from typing import TYPE_CHECKING

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracefix.collector import otlp
from tracefix.collector.auth import INGEST
from tracefix.collector.decoding import DecodeFailed
from tracefix.collector.spool import SpooledRequest
from tracefix.collector.writer import QueueFull, WriterClosed

if TYPE_CHECKING:
    from tracefix.collector.server import Collector

log = logging.getLogger("tracefix.collector")


SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"

# Exports handled at once; each holds its request (up to max_body_bytes) and a decode, so this
# bounds the receiver's memory. Beyond it the handler answers RESOURCE_EXHAUSTED with RetryInfo.
MAX_CONCURRENT_EXPORTS = 32
# How long an export over the cap waits for a slot when a spool takes what the writer cannot
# (well inside the exporters' own 10 s timeout); without a spool it is refused at once.
SLOT_WAIT_S = 5.0
# Threads beyond the cap, so an export over the cap reaches the handler and is refused at once
# instead of waiting in the executor's queue behind exports that wait for the writer.
REFUSING_THREADS = 8


def abort_busy(context, message: str, delay_s: float) -> None:
    """Answer RESOURCE_EXHAUSTED with `google.rpc.RetryInfo` (sent as grpc-status-details-bin),
    which makes OTLP exporters retry after `delay_s` instead of dropping the spans. Raises."""
    seconds = int(delay_s)
    retry_info = error_details_pb2.RetryInfo(
        retry_delay=duration_pb2.Duration(seconds=seconds, nanos=int((delay_s - seconds) * 1e9)))
    detail = any_pb2.Any()
    detail.Pack(retry_info)
    status = rpc_status.to_status(status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message=message,
                                                     details=[detail]))
    # the Python OTLP exporter reads RetryInfo from this trailer, not from the status details
    context.abort_with_status(status._replace(trailing_metadata=(
        *status.trailing_metadata, ("google.rpc.retryinfo-bin", retry_info.SerializeToString()))))


class TraceService:
    def __init__(self, collector: "Collector"):
        self.collector = collector
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT_EXPORTS)

    def export(self, body: bytes, context) -> ExportTraceServiceResponse:
        # with a spool an export holds its slot only to decode and fsync, so one over the cap
        # waits for a slot: exporters that never retry (the JS one) would lose a refused export
        if self.collector.spool is not None:
            admitted = self._slots.acquire(timeout=SLOT_WAIT_S)
        else:
            admitted = self._slots.acquire(blocking=False)
        if not admitted:
            abort_busy(context, f"collector busy: {MAX_CONCURRENT_EXPORTS} exports in progress; retry later",
                       self.collector.ingest.retry_delay_s())
        try:
            return self._export(body, context)
        finally:
            self._slots.release()

    def _export(self, body: bytes, context) -> ExportTraceServiceResponse:
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
                fut = self.collector.ingest.submit(batch, SpooledRequest("grpc", otlp.PROTOBUF, None, body))
            except QueueFull as exc:  # SpoolFull too: the spool's budget is spent
                abort_busy(context, f"collector busy: {exc}; retry later", self.collector.ingest.retry_delay_s())
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
    # TraceService.export's cap bounds memory and answers RESOURCE_EXHAUSTED with RetryInfo; a
    # thread for every export it admits plus REFUSING_THREADS keeps the executor's queue short.
    # gRPC's own maximum_concurrent_rpcs answers without RetryInfo (exporters then drop the
    # spans), so it sits far above the cap: a backstop only for a flood faster than the refusals.
    workers = MAX_CONCURRENT_EXPORTS + REFUSING_THREADS
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="otlp-grpc"),
                         options=[("grpc.max_receive_message_length", limit),
                                  ("grpc.so_reuseport", 0)],
                         maximum_concurrent_rpcs=4 * workers)
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
