"""OTLP/gRPC receiver: the Export methods of `opentelemetry.proto.collector.trace.v1.TraceService`,
`...logs.v1.LogsService` and `...metrics.v1.MetricsService` (tracefix.collector.otlp_signals).

Same path as OTLP/HTTP: the request arrives as raw bytes (no deserializer), decodes in the
decode worker process (`Decoder`), goes to the single writer, and is answered after the
commit (or, when the writer's queue is full, after it is fsynced to the spool:
tracefix.collector.spool). Decoding on gRPC's own threads would fight the writer for this
process's GIL. A spent spool budget (no spool: a full writer queue), or more than
MAX_CONCURRENT_EXPORTS exports at once, answers RESOURCE_EXHAUSTED carrying
`google.rpc.RetryInfo` (the delay the writer and the spool need to drain,
`Ingest.retry_delay_s`): the OTLP specification lets an exporter retry RESOURCE_EXHAUSTED only
when RetryInfo is there, so without it the spans would be dropped. For the same reason gRPC's
own `maximum_concurrent_rpcs` is not used: it refuses without RetryInfo.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent import futures
from typing import TYPE_CHECKING

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from grpc_status import rpc_status
from tracefix.collector import otlp
from tracefix.collector.auth import INGEST
from tracefix.collector.decoding import DecodeFailed
from tracefix.collector.otlp_signals import BY_GRPC_METHOD, TRACES, Signal
from tracefix.collector.spool import SpooledRequest
from tracefix.collector.writer import QueueFull, WriterClosed

if TYPE_CHECKING:
    from tracefix.collector.server import Collector

log = logging.getLogger("tracefix.collector")


# Exports handled at once; each holds its request (up to max_body_bytes) and a decode, so this
# bounds the receiver's memory. Beyond it the handler answers RESOURCE_EXHAUSTED with RetryInfo.
MAX_CONCURRENT_EXPORTS = 32
# How long an export over the cap waits for a slot, from its arrival, when a spool takes what
# the writer cannot (well inside the exporters' own 10 s timeout); without a spool it is
# refused at once.
SLOT_WAIT_S = 5.0
# Threads beyond the cap, for exports that wait for a slot: one waits before its request is read,
# so it holds a thread, not its body. Exports past these wait in the executor's queue, and on
# reaching a thread after their SLOT_WAIT_S are refused at once.
WAITING_THREADS = 256


def abort_busy(context, message: str, delay_s: float) -> None:
    """Answer RESOURCE_EXHAUSTED with `google.rpc.RetryInfo` (sent as grpc-status-details-bin),
    which makes OTLP exporters retry after `delay_s` instead of dropping the spans. Raises."""
    retry_info = otlp.retry_info(delay_s)
    detail = any_pb2.Any()
    detail.Pack(retry_info)
    status = rpc_status.to_status(status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message=message,
                                                     details=[detail]))
    # the Python OTLP exporter reads RetryInfo from this trailer, not from the status details
    context.abort_with_status(status._replace(trailing_metadata=(
        *status.trailing_metadata, ("google.rpc.retryinfo-bin", retry_info.SerializeToString()))))


class ExportServices(grpc.GenericRpcHandler):
    """The Export method of each signal, capped together at MAX_CONCURRENT_EXPORTS in the
    handler so that every refusal carries RetryInfo."""

    def __init__(self, collector: "Collector"):
        self.collector = collector
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT_EXPORTS)

    def service(self, handler_call_details) -> grpc.RpcMethodHandler | None:
        # gRPC asks on its polling thread as the call arrives: the wait for a slot counts from here,
        # time spent queued for an executor thread included
        signal = BY_GRPC_METHOD.get(handler_call_details.method)
        if signal is None:
            return None
        arrived = time.monotonic()
        # registered as client-streaming (the same bytes on the wire as a unary call) so the
        # request is read only once the export has its slot: exports waiting hold no body
        return grpc.stream_unary_rpc_method_handler(
            self.collector.metrics.count_grpc_exports(
                lambda requests, context: self.export(requests, context, arrived, signal)),
            request_deserializer=None, response_serializer=signal.response.SerializeToString)

    def export(self, requests, context, arrived: float, signal: Signal = TRACES):
        if not self.collector.tokens.allows(dict(context.invocation_metadata()).get("authorization"), INGEST):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        # with a spool an export holds its slot only to decode and fsync, so one over the cap
        # waits for a slot: exporters that never retry (the JS one) would lose a refused export
        wait_s = arrived + SLOT_WAIT_S - time.monotonic() if self.collector.spool is not None else 0.0
        admitted = self._slots.acquire(timeout=wait_s) if wait_s > 0 else self._slots.acquire(blocking=False)
        if not admitted:
            self.collector.writer.arrivals.refused()  # acknowledgements free the slots it needs: no linger
            abort_busy(context, f"collector busy: {MAX_CONCURRENT_EXPORTS} exports in progress; retry later",
                       self.collector.ingest.retry_delay_s())
        try:
            try:
                body = next(requests)
            except StopIteration:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"no {signal.request.DESCRIPTOR.name} was sent")
            except grpc.RpcError:  # the client went away while the export waited
                context.abort(grpc.StatusCode.CANCELLED, "the client cancelled the export")
            return self._export(body, context, signal)
        finally:
            self._slots.release()

    def _export(self, body: bytes, context, signal: Signal):
        with self.collector.writer.expecting():  # the writer waits for this batch rather than commit without it
            batch, fut = self._submit(body, context, signal)
        refused = []
        if fut is not None:
            try:
                refused = fut.result(timeout=120)
            except Exception as exc:  # records it refuses for their content are in `refused`
                log.warning("gRPC export failed to commit: %s", exc)
                context.abort(grpc.StatusCode.UNAVAILABLE, f"could not store the {signal.noun}: {exc}")
        if signal is TRACES:
            self.collector.metrics.exported("grpc", batch, refused)
        try:
            return otlp.export_response(batch, refused, signal)
        except otlp.OtlpError as exc:  # no record could be stored
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, exc.message)

    def _submit(self, body: bytes, context, signal: Signal):
        """The export decoded and handed to the writer or the spool: (its batch, the future of its
        commit, None when it holds no record)."""
        try:
            batch = self.collector.decoder.decode_blocking(body, otlp.PROTOBUF, None, signal.name)
        except otlp.OtlpError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, exc.message)
        except DecodeFailed as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        if not batch.records:
            return batch, None
        try:
            return batch, self.collector.ingest.submit(batch, SpooledRequest("grpc", otlp.PROTOBUF, None, body,
                                                                             signal=signal.name))
        except QueueFull as exc:  # SpoolFull too: the spool's budget is spent
            abort_busy(context, f"collector busy: {exc}; retry later", self.collector.ingest.retry_delay_s())
        except WriterClosed as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))


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
    # ExportServices caps the exports handled at once and answers what is past the cap with
    # RetryInfo; a thread for every export it admits, and for WAITING_THREADS more waiting for a
    # slot. No maximum_concurrent_rpcs: gRPC would answer past it without RetryInfo (exporters
    # then drop the spans), before the handler could.
    workers = MAX_CONCURRENT_EXPORTS + WAITING_THREADS
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="otlp-grpc"),
                         options=[("grpc.max_receive_message_length", limit),
                                  ("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((ExportServices(collector),))
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
