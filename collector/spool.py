"""The durable ingest spool: bursts the writer cannot take yet wait on disk, not in memory.

Receivers hand every decoded export to `Ingest.submit`. While the writer's in-memory queue
(`--max-queue-spans`) has room and nothing is spooled, the export goes straight to the writer
and is acknowledged after its commit, as before. Otherwise the raw request (its bytes as
received, protocol, Content-Type and Content-Encoding) is appended to the spool and
acknowledged once the append is fsynced, so an acknowledged span survives `kill -9` and a power
cut. A drain thread reads the spool in order, decodes each request again and feeds the writer
as it makes room; a segment file is deleted only once every request in it is committed. At
start-up whatever the last process left is replayed first. Only when the spool's disk budget
(`--spool-max-mb`) is spent is an export refused (429 / RESOURCE_EXHAUSTED with RetryInfo).
Exporters that never retry (the OpenTelemetry JS gRPC exporter) lose nothing short of that.

On disk (the OTel Collector's file_storage queue and Kafka's log have the same shape): a
directory of segment files `<sequence>.seg`, each a magic header then records

    u32 payload length | u32 CRC-32 of the payload | payload
    payload: u8 format | u8 protocol | u32 spans | u16 len(content type) | u16 len(encoding)
             | content type | encoding | body

appended by one thread that writes every waiting record and then fsyncs once (group commit).
A record whose length runs past the end of its file or whose checksum fails is a torn tail
(the process died mid-append, before the acknowledgement): it and whatever follows in that
segment are ignored. A process that finds segments at start-up never appends to them again.

A request drained twice (the process died after a commit but before its segment was deleted)
is stored once: the store ignores spans it holds already (exporters retry the same way).
"""
from __future__ import annotations

import fcntl
import logging
import os
import struct
import threading
import time
import zlib
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from tracefix.collector import otlp
from tracefix.collector.decoding import DecodeFailed
from tracefix.collector.threadnames import name_os_thread
from tracefix.collector.writer import QueueFull, WriterClosed, retry_delay_s

if TYPE_CHECKING:
    from tracefix.collector.decoding import Decoder
    from tracefix.collector.normalize import Batch
    from tracefix.collector.writer import Refused, Writer

log = logging.getLogger("tracefix.collector.spool")

MAGIC = b"TFSPOOL\x01"
RECORD_HEADER = struct.Struct("<II")  # payload length, CRC-32 of the payload
RECORD_META = struct.Struct("<BBIHH")  # format, protocol, spans, len(content type), len(encoding)
FORMAT = 1
PROTOCOLS = ("http", "grpc")
# A new segment starts past this size, so drained requests free their disk soon after a burst
# (a segment is deleted whole); one request larger than this has a segment of its own.
SEGMENT_BYTES = 16 << 20
# How long the drain keeps going at shutdown before it leaves the rest for the next start.
DRAIN_ON_STOP_S = 5.0
# Request bodies whose decoded batches stay in memory until the drain takes them, so a request
# is decoded once, not again when it leaves the spool (beyond this, the drain decodes from disk).
MEMO_BYTES = 64 << 20


class SpoolFull(QueueFull):
    """The spool's disk budget is spent: the receiver answers 429 / RESOURCE_EXHAUSTED."""


@dataclass
class SpooledRequest:
    """One export as it arrived: enough to decode it again (`decoding.decode_body`)."""
    protocol: str  # "http" or "grpc": which receiver took it
    content_type: str
    content_encoding: str | None
    body: bytes
    spans: int = 0  # spans it holds (normalized), for the retry delay and the gauges
    # what the receiver decoded it to; never written: the drain uses it while it is in memory
    batch: "Batch | None" = field(default=None, repr=False, compare=False)

    def encode(self) -> list[bytes]:
        """The record: header, then payload in pieces (the body is not copied)."""
        ctype = self.content_type.encode("latin-1", "replace")[:0xFFFF]
        encoding = (self.content_encoding or "").encode("latin-1", "replace")[:0xFFFF]
        meta = RECORD_META.pack(FORMAT, PROTOCOLS.index(self.protocol), self.spans, len(ctype), len(encoding))
        prefix = meta + ctype + encoding
        crc = zlib.crc32(self.body, zlib.crc32(prefix))
        return [RECORD_HEADER.pack(len(prefix) + len(self.body), crc), prefix, self.body]

    @classmethod
    def decode(cls, payload: bytes) -> "SpooledRequest":
        fmt, protocol, spans, n_ctype, n_encoding = RECORD_META.unpack_from(payload)
        if fmt != FORMAT or protocol >= len(PROTOCOLS):
            raise ValueError(f"unknown spool record format {fmt}/{protocol}")
        at = RECORD_META.size
        ctype = payload[at:at + n_ctype].decode("latin-1")
        at += n_ctype
        encoding = payload[at:at + n_encoding].decode("latin-1") or None
        return cls(PROTOCOLS[protocol], ctype, encoding, payload[at + n_encoding:], spans)


def record_size(request: SpooledRequest) -> int:
    """Bytes `request` takes in a segment (what `encode` writes, without computing it)."""
    ctype = len(request.content_type.encode("latin-1", "replace")[:0xFFFF])
    encoding = len((request.content_encoding or "").encode("latin-1", "replace")[:0xFFFF])
    return RECORD_HEADER.size + RECORD_META.size + ctype + encoding + len(request.body)


def read_record(fd: int, offset: int, end: int) -> tuple[SpooledRequest, int] | None:
    """The record at `offset` of an open segment and the offset after it; None when none
    complete and intact starts there before `end` (a torn tail)."""
    if offset + RECORD_HEADER.size > end:
        return None
    length, crc = RECORD_HEADER.unpack(os.pread(fd, RECORD_HEADER.size, offset))
    start = offset + RECORD_HEADER.size
    if length < RECORD_META.size or start + length > end:
        return None
    payload = os.pread(fd, length, start)
    if len(payload) != length or zlib.crc32(payload) != crc:
        return None
    try:
        return SpooledRequest.decode(payload), start + length
    except (ValueError, struct.error, UnicodeDecodeError):
        return None


@dataclass
class Segment:
    seq: int
    path: Path
    size: int = len(MAGIC)  # bytes durable on disk (written and fsynced): readers stop here
    records: int = 0  # durable records
    spans: int = 0
    committed: int = 0  # records drained into the store
    committed_spans: int = 0
    sealed: bool = False  # no record will be appended any more


@dataclass(frozen=True)
class Position:
    """Where a record sits: its segment and offset."""
    seq: int
    offset: int
    spans: int


def scan_segment(segment: Segment) -> Segment | None:
    """Count a segment's intact records; what follows the first torn one is ignored. None for
    a file that is no spool segment."""
    fd = os.open(segment.path, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size
        if os.pread(fd, len(MAGIC), 0) != MAGIC:
            log.warning("spool file %s is not a tracefix spool segment: left alone", segment.path)
            return None
        offset = len(MAGIC)
        while (found := read_record(fd, offset, end)) is not None:
            request, offset = found
            segment.records += 1
            segment.spans += request.spans
        segment.size = offset
        if offset < end:
            log.warning("spool segment %s: %d bytes after its last intact request ignored (a write "
                        "the last process did not finish, never acknowledged)", segment.path, end - offset)
    finally:
        os.close(fd)
    return segment


class Spool:
    """An append-only log of requests in segment files, one appending thread (group commit),
    one reader (the drain). Thread-safe; `append` never blocks on the disk."""

    def __init__(self, directory: str | os.PathLike, *, max_bytes: int, segment_bytes: int = SEGMENT_BYTES,
                 memo_bytes: int = MEMO_BYTES):
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.memo_bytes = memo_bytes
        # (seq, offset) -> request still holding its batch, for the drain (MEMO_BYTES)
        self._memo: dict[tuple[int, int], SpooledRequest] = {}
        self._memo_held = 0
        self._cond = threading.Condition(threading.RLock())
        self._file_lock = threading.Lock()  # the active segment's descriptor; taken before _cond
        self._segments: deque[Segment] = deque()  # oldest first; the last may be the active one
        self._active: Segment | None = None
        self._active_fd: int | None = None
        self._next_seq = 1
        self._queue: list[tuple[SpooledRequest, Future]] = []  # waiting for the appending thread
        self._reserved_bytes = 0  # of requests queued or being written
        self._appending = 0  # requests queued or being written
        self._unread = 0  # requests appended (or being appended) the drain has not taken yet
        self._read: tuple[int, int] | None = None  # (seq, offset) of the next record to read
        self._read_fd: tuple[int, int] | None = None  # (seq, fd) open for reading
        self._closing = False
        self._lock_fd: int | None = None
        self._thread = threading.Thread(target=self._append_loop, name="tracefix-spool", daemon=True)
        self.appended_requests = 0

    # --- opening: what the last process left ---------------------------------------------------
    def open(self) -> "Spool":
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)  # span contents: the owner's alone
        self._lock_fd = os.open(self.directory / "LOCK", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            raise OSError(f"another tracefix serve uses the spool {self.directory}") from None
        for path in sorted(self.directory.glob("*.seg")):
            try:
                seq = int(path.stem)
            except ValueError:
                continue
            self._next_seq = max(self._next_seq, seq + 1)
            segment = scan_segment(Segment(seq, path, sealed=True))
            if segment is None:
                continue
            if segment.records:
                self._segments.append(segment)
                self._unread += segment.records
            else:
                path.unlink(missing_ok=True)
        self._thread.start()
        return self

    # --- the receivers' side -----------------------------------------------------------------
    def append(self, request: SpooledRequest) -> Future:
        """Queue `request` for the disk; the future resolves (to []) once it is fsynced. Raises
        SpoolFull when it does not fit in the budget."""
        size = record_size(request)
        fut: Future = Future()
        with self._cond:
            if self._closing:
                raise WriterClosed("the collector is shutting down")
            if self.bytes + size > self.max_bytes:
                raise SpoolFull(f"the spool holds {self.bytes / 2**20:.1f} MiB of its {self.max_bytes / 2**20:.1f} "
                                f"MiB budget and {self.pending_spans} spans wait to be written")
            self._queue.append((request, fut))
            self._reserved_bytes += size
            self._appending += 1
            self._unread += 1
            self._cond.notify_all()
        return fut

    # (read from any thread: /metrics, /healthz; _cond is reentrant)
    @property
    def bytes(self) -> int:
        """Disk the spool holds or has promised (the budget's measure)."""
        with self._cond:
            return sum(s.size for s in self._segments) + self._reserved_bytes

    @property
    def pending_requests(self) -> int:
        """Requests acknowledged (or being appended) and not yet committed to the store."""
        with self._cond:
            return sum(s.records - s.committed for s in self._segments) + self._appending

    @property
    def pending_spans(self) -> int:
        with self._cond:
            return (sum(s.spans - s.committed_spans for s in self._segments)
                    + sum(r.spans for r, _ in self._queue))

    @property
    def unread(self) -> int:
        """Requests spooled that the drain has not handed to the writer yet."""
        return self._unread

    # --- the appending thread ------------------------------------------------------------------
    def _append_loop(self) -> None:
        name_os_thread("tf-spool")
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                taken, self._queue = self._queue, []
            durable: list[SpooledRequest] = []
            error = None
            try:
                with self._file_lock:
                    self._write([request for request, _ in taken], durable)
            except OSError as exc:
                log.error("cannot append %d requests to the spool %s: %s", len(taken) - len(durable),
                          self.directory, exc)
                error = exc
            with self._cond:
                self._reserved_bytes -= sum(record_size(r) for r, _ in taken)
                self._appending -= len(taken)
                self._unread -= len(taken) - len(durable)
                self.appended_requests += len(durable)
                self._cond.notify_all()
            for i, (_, fut) in enumerate(taken):
                if i < len(durable):
                    fut.set_result([])
                else:
                    fut.set_exception(error)

    def _write(self, requests: list[SpooledRequest], durable: list[SpooledRequest]) -> None:
        """Append the records, fsync once per segment, make them readable; `durable` receives
        those that are. Raises OSError: the others are not (a partly written tail is cut
        off, and its segment sealed)."""
        written: list[SpooledRequest] = []  # in the active segment, not yet fsynced
        size = 0
        try:
            for request in requests:
                parts = request.encode()
                n = sum(len(p) for p in parts)
                active = self._active
                if active is None or (active.size + size > len(MAGIC)
                                      and active.size + size + n > self.segment_bytes):
                    self._sync(written, size, durable)
                    written, size = [], 0
                    self._start_segment()
                _write_all(self._active_fd, parts)
                self._remember(request, (self._active.seq, self._active.size + size))
                written.append(request)
                size += n
            self._sync(written, size, durable)
        except OSError:
            self._abandon_active()
            raise

    def _remember(self, request: SpooledRequest, position: tuple[int, int]) -> None:
        """Keep the request's decoded batch for the drain while the memo has room."""
        if request.batch is None:
            return
        with self._cond:
            if self._memo_held + len(request.body) <= self.memo_bytes:
                self._memo[position] = request
                self._memo_held += len(request.body)
                return
        request.batch = None

    def _forget(self, position: tuple[int, int]) -> SpooledRequest | None:
        """The remembered request at `position`, no longer remembered (call with _cond held)."""
        request = self._memo.pop(position, None)
        if request is not None:
            self._memo_held -= len(request.body)
        return request

    def _sync(self, written: list[SpooledRequest], size: int, durable: list[SpooledRequest]) -> None:
        """fsync the active segment, then make what was written there readable."""
        if not written:
            return
        os.fdatasync(self._active_fd)
        with self._cond:
            self._active.size += size
            self._active.records += len(written)
            self._active.spans += sum(r.spans for r in written)
            self._cond.notify_all()
        durable.extend(written)

    def _start_segment(self) -> Segment:
        """Seal the active segment (its records are fsynced) and open the next one."""
        self._seal_active()
        segment = Segment(self._next_seq, self.directory / f"{self._next_seq:020d}.seg")
        self._next_seq += 1
        fd = os.open(segment.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        try:
            _write_all(fd, [MAGIC])
            os.fdatasync(fd)
            _fsync_directory(self.directory)  # the new file's name survives a power cut too
        except OSError:
            os.close(fd)
            segment.path.unlink(missing_ok=True)
            raise
        with self._cond:
            self._segments.append(segment)
            self._active, self._active_fd = segment, fd
        return segment

    def _seal_active(self) -> None:
        """No more appends to the active segment; deleted at once if the drain committed it all
        (call with _file_lock held)."""
        if self._active_fd is not None:
            os.close(self._active_fd)
        with self._cond:
            segment = self._active
            self._active, self._active_fd = None, None
            if segment is None:
                return
            segment.sealed = True
            done = segment.committed >= segment.records
        if done:
            self._delete(segment)

    def _abandon_active(self) -> None:
        """After a failed write: cut the segment back to its durable end, and seal it."""
        if self._active_fd is not None:
            try:
                os.ftruncate(self._active_fd, self._active.size)
            except OSError:
                pass  # readers stop at the durable end anyway; the next start ignores the torn tail
            with self._cond:
                for position in [p for p in self._memo if p[0] == self._active.seq and p[1] >= self._active.size]:
                    self._forget(position)
        self._seal_active()

    # --- the drain's side ------------------------------------------------------------------------
    def next(self, timeout: float) -> tuple[Position, SpooledRequest] | None:
        """The next durable record in order (waits up to `timeout` for one), or None."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = self._locate()
                if found is not None:
                    segment, offset = found
                    break
                left = deadline - time.monotonic()
                if left <= 0 or self._closing and not self._appending:
                    return None
                self._cond.wait(left)
            remembered = self._forget((segment.seq, offset))
            if remembered is not None:
                self._read = (segment.seq, offset + record_size(remembered))
                return Position(segment.seq, offset, remembered.spans), remembered
        fd = self._reader(segment)
        record = read_record(fd, offset, segment.size)
        if record is None:  # a record fsynced whole does not tear: the disk damaged it
            kept = self._records_before(segment, offset)
            log.error("spool segment %s is damaged at offset %d: its %d requests from there are lost",
                      segment.path, offset, segment.records - kept)
            with self._cond:
                self._unread -= segment.records - kept
                segment.records = kept
                self._read = (segment.seq, segment.size)
            return None
        request, after = record
        with self._cond:
            self._read = (segment.seq, after)
        return Position(segment.seq, offset, request.spans), request

    def _records_before(self, segment: Segment, offset: int) -> int:
        fd, n, at = self._reader(segment), 0, len(MAGIC)
        while at < offset and (found := read_record(fd, at, segment.size)) is not None:
            n, at = n + 1, found[1]
        return n

    def _locate(self) -> tuple[Segment, int] | None:
        """(segment, offset) of the next unread durable record, or None; steps past read segments."""
        for segment in self._segments:
            if self._read is not None and segment.seq < self._read[0]:
                continue
            if self._read is None or segment.seq > self._read[0]:
                self._read = (segment.seq, len(MAGIC))
            if self._read[1] < segment.size:
                return segment, self._read[1]
            if not segment.sealed:
                return None  # the active segment: more will come
        return None

    def _reader(self, segment: Segment) -> int:
        """A descriptor of `segment` for reading (the drain thread's alone)."""
        if self._read_fd is None or self._read_fd[0] != segment.seq:
            if self._read_fd is not None:
                os.close(self._read_fd[1])
            self._read_fd = (segment.seq, os.open(segment.path, os.O_RDONLY))
        return self._read_fd[1]

    def taken(self) -> None:
        """The drain handed one record to the writer (or gave up on it)."""
        with self._cond:
            self._unread -= 1

    def committed(self, position: Position) -> None:
        """The record at `position` is in the store: a segment all of whose records are is deleted."""
        with self._file_lock:
            with self._cond:
                segment = next((s for s in self._segments if s.seq == position.seq), None)
                if segment is None:
                    return
                segment.committed += 1
                segment.committed_spans += position.spans
                if segment.committed < segment.records:
                    return
                if not segment.sealed and (self._appending or self._active is not segment):
                    return  # more is coming to the active segment: sealing it deletes it once drained
            if segment.sealed:
                self._delete(segment)
            else:  # the active one, drained and idle: seal it (and so delete it) to free the disk
                self._seal_active()

    def _delete(self, segment: Segment) -> None:
        # the drain's descriptor (`_reader`) stays open on the unlinked file until it moves on:
        # only the drain thread opens and closes it
        segment.path.unlink(missing_ok=True)
        with self._cond:
            self._segments.remove(segment)

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued, stop the appending thread, release the directory."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)
        with self._file_lock:
            self._seal_active()
        if self._read_fd is not None:
            os.close(self._read_fd[1])
            self._read_fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None


def _write_all(fd: int, parts: list[bytes]) -> None:
    for part in parts:
        view = memoryview(part)
        while view:
            view = view[os.write(fd, view):]


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
        self._stop = threading.Event()
        self._drain_deadline = float("inf")
        self._thread = threading.Thread(target=self._drain, name="tracefix-spool-drain", daemon=True)
        self.drained_requests = 0

    def start(self) -> "Ingest":
        if self.spool is not None:
            if self.spool.unread:
                log.warning("replaying %d requests (%d spans) spooled by the last process", self.spool.unread,
                            self.spool.pending_spans)
            self._thread.start()
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
        request.spans, request.batch = batch.span_count, batch
        fut = self.spool.append(request)
        if self.on_spooled:
            self.on_spooled(request.protocol, batch.span_count)
        return fut

    @property
    def pending_spans(self) -> int:
        return self.writer.pending_spans + (self.spool.pending_spans if self.spool else 0)

    def retry_delay_s(self) -> float:
        """How long a refused exporter should wait: what the writer and the spool hold, at the
        writer's rate (`writer.retry_delay_s`)."""
        return retry_delay_s(self.pending_spans, self.writer.drain_spans_per_s)

    # --- the drain thread ----------------------------------------------------------------------
    def _drain(self) -> None:
        name_os_thread("tf-spool-drain")
        spool = self.spool
        inflight: deque[tuple[Position, "Batch", Future]] = deque()
        while not (self._stop.is_set() and time.monotonic() > self._drain_deadline):
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
                return self.decoder.decode_blocking(request.body, request.content_type, request.content_encoding)
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
                self.writer.wait_for_room(batch.span_count, timeout=0.05)
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

    def close(self, drain_s: float = DRAIN_ON_STOP_S) -> None:
        """Once the receivers stopped: drain for up to `drain_s`, then leave the rest on disk."""
        if self.spool is None:
            return
        self._drain_deadline = time.monotonic() + drain_s
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(drain_s + 60)
        self.spool.close()
