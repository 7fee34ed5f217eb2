"""`Spool`: the durable queue of requests on disk, an append-only log in segment files.

One thread appends every waiting record and then fsyncs once (group commit); an append is
acknowledged once fsynced. One reader, the drain, takes the records in order; a segment file
is deleted once every request in it is committed to the store. At start-up the segments the
last process left are read first and never appended to again.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from concurrent.futures import Future
from pathlib import Path

from tracefix.collector.spool.record import SpooledRequest, read_record, record_size
from tracefix.collector.spool.segments import (
    MAGIC, SEGMENT_BYTES, Position, Segment, fsync_directory, lock_directory, scan_segment, write_all)
from tracefix.collector.threadnames import name_os_thread
from tracefix.collector.writer import QueueFull, WriterClosed

log = logging.getLogger("tracefix.collector.spool")

# Request bodies whose decoded batches stay in memory until the drain takes them, so a request
# is decoded once, not again when it leaves the spool (beyond this, the drain decodes from disk).
MEMO_BYTES = 64 << 20


class SpoolFull(QueueFull):
    """The spool's disk budget is spent: the receiver answers 429 / RESOURCE_EXHAUSTED."""


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
        self._lock_fd = lock_directory(self.directory)
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
                write_all(self._active_fd, parts)
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
            write_all(fd, [MAGIC])
            os.fdatasync(fd)
            fsync_directory(self.directory)  # the new file's name survives a power cut too
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
