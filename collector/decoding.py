"""OTLP request bodies (HTTP and gRPC) turned into `Batch`es, off the process that writes.

Decoding and normalizing is pure Python: in the writer's process it competes with the
writer for the GIL (each DuckDB call the writer makes releases the GIL and must then win it
back). `Decoder` runs it in worker processes instead (`--decode-workers`, default 1), so on
two cores decoding and writing overlap (`decode_workers`: a body crosses as it is, a batch
comes back pickled with its span tables as Arrow IPC streams beside the pickle, see
`Batch.__getstate__`). With 0 workers, or for small bodies, it runs on one thread of this
process. A protobuf body is scanned once for secret hints: without one, no
span's strings are scanned again (`normalize_request`'s wire_may_hold_secret).

A worker that dies (a crash on a hostile body) fails only the requests it held: it is
replaced and the exporter gets a retryable 503 (gRPC: UNAVAILABLE).
"""
from __future__ import annotations

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor

from tracefix.collector import otlp
from tracefix.collector.decode_workers import WorkerDied, WorkerPool
from tracefix.collector.normalize import Batch, normalize_logs, normalize_metrics, normalize_request
from tracefix.collector.normalize.wire_spans import read_traces
from tracefix.collector.otlp_signals import BY_NAME
from tracefix.collector.threadnames import name_os_thread
from tracefix.errors import TracefixError
from tracefix.secret_rules import utf8_may_hold_secret

INLINE_BYTES = 64 * 1024  # smaller uncompressed bodies decode in the receiver: a round trip costs more


# how each signal's request becomes a Batch (otlp_signals)
NORMALIZERS = {"traces": normalize_request, "logs": normalize_logs, "metrics": normalize_metrics}


def decode_body(body: bytes, content_type: str | None, encoding: str | None, max_body_bytes: int,
                max_attribute_chars: int, signal: str = "traces") -> Batch:
    """Decompress, decode and normalize one request body of `signal` (raises otlp.OtlpError)."""
    body = otlp.decompress(body, encoding, max_body_bytes)
    if signal == "traces" and otlp.media_type(content_type) == otlp.PROTOBUF:
        # the C reader where the request's shape allows (wire_spans), else protobuf's
        request = read_traces(body, max_attribute_chars)
        if request is None:
            request = otlp.decode(body, content_type, BY_NAME[signal])
        # protobuf strings are their UTF-8 bytes in the body: one scan of it for secret hints
        # (0.6 us a span) spares most requests a scan of every span's strings (3.5 us)
        batch = normalize_request(request, max_attribute_chars=max_attribute_chars, wire_bytes=len(body),
                                  wire_may_hold_secret=utf8_may_hold_secret(body))
    else:
        request = otlp.decode(body, content_type, BY_NAME[signal])
        batch = NORMALIZERS[signal](request, max_attribute_chars=max_attribute_chars, wire_bytes=len(body))
    batch.wire_bytes = len(body)
    return batch


class DecodeFailed(TracefixError, RuntimeError):
    """The decode worker died: a retryable failure (503)."""

    http_status = 503


class Decoder:
    def __init__(self, *, workers: int, max_body_bytes: int, max_attribute_chars: int):
        self.workers = workers
        self.limits = (max_body_bytes, max_attribute_chars)
        # one thread: more threads only fight the writer for the GIL
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="tracefix-decode",
                                          initializer=name_os_thread, initargs=("tf-decode",))
        self._pool: WorkerPool | None = None

    def start(self) -> "Decoder":
        if self.workers > 0:
            self._pool = WorkerPool(decode_body, self.workers)
        return self

    def _submit(self, body: bytes, content_type: str | None, encoding: str | None, signal: str) -> Future:
        """A concurrent Future of the Batch."""
        args = (body, content_type, encoding, *self.limits, signal)
        # a small gzip body may inflate to --max-body-mb: only small plain bodies decode inline
        if len(body) <= INLINE_BYTES and (encoding or "identity").strip().lower() == "identity":
            fut: Future = Future()
            try:
                fut.set_result(decode_body(*args))
            except Exception as exc:
                fut.set_exception(exc)
            return fut
        if self._pool is None:
            return self._thread.submit(decode_body, *args)
        return self._pool.submit(*args)

    async def decode(self, body: bytes, content_type: str | None, encoding: str | None,
                     signal: str = "traces") -> Batch:
        """The OTLP/HTTP receiver's way in: awaits the Batch (raises otlp.OtlpError, DecodeFailed)."""
        try:
            return await asyncio.wrap_future(self._submit(body, content_type, encoding, signal))
        except WorkerDied as exc:
            raise DecodeFailed("the decode worker died; retry") from exc

    def decode_blocking(self, body: bytes, content_type: str | None, encoding: str | None,
                        signal: str = "traces") -> Batch:
        """The same for the gRPC receiver, whose handlers run on threads of their own."""
        try:
            return self._submit(body, content_type, encoding, signal).result()
        except WorkerDied as exc:
            raise DecodeFailed("the decode worker died; retry") from exc

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()  # waits for its workers to leave
        self._thread.shutdown(wait=False)
