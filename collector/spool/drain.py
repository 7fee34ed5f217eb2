"""The drain: the thread that moves spooled requests into the writer, oldest first, as the
writer makes room, and marks each committed once the store holds it. A request drained twice
(the process died after a commit but before its segment was deleted) is stored once: the
store ignores spans it holds already (exporters retry the same way).
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import TYPE_CHECKING

from tracefix.collector import otlp
from tracefix.collector.decoding import DecodeFailed
from tracefix.collector.spool.disk import Spool
from tracefix.collector.spool.record import SpooledRequest
from tracefix.collector.spool.segments import Position
from tracefix.collector.threadnames import name_os_thread
from tracefix.collector.writer import QueueFull, WriterClosed

if TYPE_CHECKING:
    from tracefix.collector.decoding import Decoder
    from tracefix.collector.normalize import Batch
    from tracefix.collector.writer import Refused, Writer

log = logging.getLogger("tracefix.collector.spool")

# How long the drain keeps going at shutdown before it leaves the rest for the next start.
DRAIN_ON_STOP_S = 5.0


class Drain:
    """Feeds `spool` to `writer` on a thread of its own (`start`) until `stop`."""

    def __init__(self, writer: "Writer", decoder: "Decoder", spool: Spool):
        self.writer = writer
        self.decoder = decoder
        self.spool = spool
        self._stop = threading.Event()
        self._deadline = float("inf")
        self._thread = threading.Thread(target=self._run, name="tracefix-spool-drain", daemon=True)
        self.drained_requests = 0

    def start(self) -> None:
        if self.spool.unread:
            log.warning("replaying %d requests (%d spans) spooled by the last process", self.spool.unread,
                        self.spool.pending_spans)
        self._thread.start()

    def _run(self) -> None:
        name_os_thread("tf-spool-drain")
        spool = self.spool
        inflight: deque[tuple[Position, "Batch", Future]] = deque()
        while not (self._stop.is_set() and time.monotonic() > self._deadline):
            self._settle(inflight, wait=False)
            found = spool.next(timeout=0.05 if inflight else 0.5)
            if found is None:
                if self._stop.is_set() and not spool.unread:
                    break
                continue
            position, request = found
            batch, request.batch = request.batch or self._decode(request), None
            if batch is None:  # it cannot be stored, ever: logged, dropped
                spool.taken()
                spool.committed(position)
                continue
            fut = self._hand_over(batch, inflight)
            spool.taken()
            if fut is None:  # the writer closed under us: the record stays for the next start
                break
            inflight.append((position, batch, fut))
        self._settle(inflight, wait=True)
        if spool.pending_requests:
            log.warning("%d spooled requests (%d spans) left in %s for the next start", spool.pending_requests,
                        spool.pending_spans, spool.directory)

    def _decode(self, request: SpooledRequest) -> "Batch | None":
        while True:
            try:
                return self.decoder.decode_blocking(request.body, request.content_type, request.content_encoding,
                                                    request.signal)
            except otlp.OtlpError as exc:  # it decoded when it was accepted: limits changed since
                log.error("a spooled %s request no longer decodes (%s): dropped", request.protocol, exc.message)
                return None
            except DecodeFailed:
                time.sleep(0.2)  # the decode worker died and is being replaced

    def _hand_over(self, batch: "Batch", inflight: deque) -> Future | None:
        """Submit to the writer as soon as it has room (settling finished writes meanwhile)."""
        while True:
            try:
                return self.writer.submit_batch(batch)
            except QueueFull:
                self._settle(inflight, wait=False)
                self.writer.wait_for_room(batch.records, timeout=0.05)
            except WriterClosed:
                return None

    def _settle(self, inflight: deque, *, wait: bool) -> None:
        """Mark the finished writes at the head as committed, in order; a write that failed
        (not for its content: those are refused spans) is submitted again after a pause."""
        while inflight and (wait or inflight[0][2].done()):
            position, batch, fut = inflight[0]
            try:
                refused: list[Refused] = fut.result()
            except WriterClosed:
                return
            except Exception as exc:
                log.warning("writing %d spooled spans failed (%s); retrying", batch.span_count, exc)
                time.sleep(0.5)
                again = self._hand_over(batch, deque())
                if again is None:
                    return
                inflight[0] = (position, batch, again)
                continue
            for n, reason in refused:
                log.warning("%d spooled spans refused by the database: %s", n, reason)
            inflight.popleft()
            self.spool.committed(position)
            self.drained_requests += 1

    def stop(self, drain_s: float = DRAIN_ON_STOP_S) -> None:
        """Once the receivers stopped: drain for up to `drain_s`, then leave the rest on disk."""
        self._deadline = time.monotonic() + drain_s
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(drain_s + 60)
