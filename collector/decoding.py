"""OTLP request bodies (HTTP and gRPC) turned into `Batch`es, off the process that writes.

Decoding and normalizing is pure Python: in the writer's process it competes with the
writer for the GIL (each DuckDB call the writer makes releases the GIL and must then win it
back). `Decoder` runs it in worker processes instead (`--decode-workers`, default 1), so on
two cores decoding and writing overlap; batches come back pickled, their span tables as
Arrow IPC streams (`Batch.__getstate__`). With 0 workers, or for small bodies, it runs on one
thread of this process. A protobuf body is scanned once for secret hints: without one, no
span's strings are scanned again (`normalize_request`'s wire_may_hold_secret).

A worker that dies (a crash on a hostile body) fails only the requests it held: the pool is
rebuilt and the exporter gets a retryable 503 (gRPC: UNAVAILABLE).
"""
from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from tracefix.collector import otlp
from tracefix.collector.normalize import Batch, normalize_logs, normalize_metrics, normalize_request
from tracefix.collector.otlp_signals import BY_NAME
from tracefix.collector.threadnames import name_os_thread
from tracefix.errors import TracefixError
from tracefix.secret_rules import utf8_may_hold_secret

log = logging.getLogger("tracefix.collector")

INLINE_BYTES = 64 * 1024  # smaller uncompressed bodies decode in the receiver: a round trip costs more


# how each signal's request becomes a Batch (otlp_signals)
NORMALIZERS = {"traces": normalize_request, "logs": normalize_logs, "metrics": normalize_metrics}


def decode_body(body: bytes, content_type: str | None, encoding: str | None, max_body_bytes: int,
                max_attribute_chars: int, signal: str = "traces") -> Batch:
    """Decompress, decode and normalize one request body of `signal` (raises otlp.OtlpError)."""
    body = otlp.decompress(body, encoding, max_body_bytes)
    request = otlp.decode(body, content_type, BY_NAME[signal])
    if signal == "traces" and otlp.media_type(content_type) == otlp.PROTOBUF:
        # protobuf strings are their UTF-8 bytes in the body: one scan of it for secret hints
        # (0.6 us a span) spares most requests a scan of every span's strings (3.5 us)
        batch = normalize_request(request, max_attribute_chars=max_attribute_chars, wire_bytes=len(body),
                                  wire_may_hold_secret=utf8_may_hold_secret(body))
    else:
        batch = NORMALIZERS[signal](request, max_attribute_chars=max_attribute_chars, wire_bytes=len(body))
    batch.wire_bytes = len(body)
    return batch


def _warm() -> None:
    """First task of a worker: its imports are done by the time a request comes."""


def _worker_started(server_pid: int) -> None:
    name_os_thread("tf-decode-proc")
    _die_with(server_pid)


def _die_with(server_pid: int) -> None:
    """Exit when the server is gone, even after a kill -9 that let it close nothing."""
    import ctypes
    import signal

    try:  # Linux: the kernel kills us when the thread that started us ends
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while os.getppid() == server_pid:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="tracefix-parent-watch", daemon=True).start()
    if os.getppid() != server_pid:
        os._exit(0)


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
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def start(self) -> "Decoder":
        if self.workers > 0:
            self._pool = self._new_pool()
        return self

    def _new_pool(self) -> ProcessPoolExecutor:
        # spawn: never fork this process, whose threads hold DuckDB and socket state; the
        # workers are our children and watch that we live
        pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_worker_started, initargs=(os.getpid(),))
        for _ in range(self.workers):
            pool.submit(_warm)
        return pool

    def _submit(self, body: bytes, content_type: str | None, encoding: str | None, signal: str):
        """(the pool it went to or None, a concurrent Future of the Batch)."""
        args = (body, content_type, encoding, *self.limits, signal)
        pool = self._pool
        # a small gzip body may inflate to --max-body-mb: only small plain bodies decode inline
        if len(body) <= INLINE_BYTES and (encoding or "identity").strip().lower() == "identity":
            fut: Future = Future()
            try:
                fut.set_result(decode_body(*args))
            except Exception as exc:
                fut.set_exception(exc)
            return None, fut
        if pool is None:
            return None, self._thread.submit(decode_body, *args)
        try:
            return pool, pool.submit(decode_body, *args)
        except BrokenProcessPool as exc:  # broke since the last request: fail this one, heal
            fut = Future()
            fut.set_exception(exc)
            return pool, fut

    def _worker_died(self, pool: ProcessPoolExecutor | None, exc: BaseException) -> DecodeFailed:
        with self._lock:
            if pool is not None and self._pool is pool:
                log.warning("a decode worker died; starting a new one")
                pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()
        return DecodeFailed("the decode worker died; retry")

    async def decode(self, body: bytes, content_type: str | None, encoding: str | None,
                     signal: str = "traces") -> Batch:
        """The OTLP/HTTP receiver's way in: awaits the Batch (raises otlp.OtlpError, DecodeFailed)."""
        pool, fut = self._submit(body, content_type, encoding, signal)
        try:
            return await asyncio.wrap_future(fut)
        except BrokenProcessPool as exc:
            raise self._worker_died(pool, exc) from exc

    def decode_blocking(self, body: bytes, content_type: str | None, encoding: str | None,
                        signal: str = "traces") -> Batch:
        """The same for the gRPC receiver, whose handlers run on threads of their own."""
        pool, fut = self._submit(body, content_type, encoding, signal)
        try:
            return fut.result()
        except BrokenProcessPool as exc:
            raise self._worker_died(pool, exc) from exc

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            # waited for, and let go: the pool's queues are freed with it, their semaphores
            # unlinked; `tracefix serve` leaves with os._exit, which runs no finalizer, and the
            # resource tracker then warned of "leaked semaphore objects" at every stop
            pool.shutdown(wait=True, cancel_futures=True)
        self._thread.shutdown(wait=False)
