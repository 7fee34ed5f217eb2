"""`Ingest`: where the receivers hand every decoded export, the writer's queue or the spool."""
from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING, Callable

from tracefix.collector.spool.disk import Spool
from tracefix.collector.spool.drain import DRAIN_ON_STOP_S, Drain
from tracefix.collector.spool.record import SpooledRequest
from tracefix.collector.writer import QueueFull, retry_delay_s

if TYPE_CHECKING:
    from tracefix.collector.decoding import Decoder
    from tracefix.collector.normalize import Batch
    from tracefix.collector.writer import Writer


class Ingest:
    """The receivers' way to the writer: the in-memory queue while it has room and nothing is
    spooled (so spooled requests keep their order), the spool otherwise; a drain thread moves
    spooled requests into the writer as it makes room. Without a spool (`--spool-max-mb 0`,
    or an in-memory store) a full queue is refused at once."""

    def __init__(self, writer: "Writer", decoder: "Decoder", spool: Spool | None, *,
                 on_spooled: Callable[[str, int], None] | None = None):
        self.writer = writer
        self.decoder = decoder
        self.spool = spool
        self.on_spooled = on_spooled  # told (protocol, spans) of every request spooled
        self.drain = Drain(writer, decoder, spool) if spool is not None else None

    def start(self) -> "Ingest":
        if self.drain is not None:
            self.drain.start()
        return self

    def submit(self, batch: "Batch", request: SpooledRequest) -> Future:
        """Take one decoded export; the future resolves to the spans the store refused
        ([] for a spooled request, acknowledged once durable). Raises QueueFull (SpoolFull
        when the spool's budget is spent) or WriterClosed."""
        if self.spool is None:
            return self.writer.submit_batch(batch)
        if not self.spool.unread:
            try:
                return self.writer.submit_batch(batch)
            except QueueFull:
                pass
        request.spans, request.batch = batch.records, batch
        fut = self.spool.append(request)
        if self.on_spooled:
            self.on_spooled(request.protocol, batch.records)
        return fut

    @property
    def pending_spans(self) -> int:
        return self.writer.pending_spans + (self.spool.pending_spans if self.spool else 0)

    def retry_delay_s(self) -> float:
        """How long a refused exporter should wait: what the writer and the spool hold, at the
        writer's rate (`writer.retry_delay_s`)."""
        return retry_delay_s(self.pending_spans, self.writer.drain_spans_per_s)

    def close(self, drain_s: float = DRAIN_ON_STOP_S) -> None:
        """Once the receivers stopped: drain for up to `drain_s`, then leave the rest on disk."""
        if self.spool is None or self.drain is None:
            return
        self.drain.stop(drain_s)
        self.spool.close()
