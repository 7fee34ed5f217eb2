"""The spool's segment files: `<sequence>.seg`, a magic header then records (`record.py`);
what a record's place is; counting what a segment left by the last process holds; the
directory's lock (one process per spool) and the writes and fsyncs a durable append needs.
"""
from __future__ import annotations

import fcntl
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from tracefix.collector.spool.record import read_record

log = logging.getLogger("tracefix.collector.spool")

MAGIC = b"TFSPOOL\x01"
# A new segment starts past this size, so drained requests free their disk soon after a burst
# (a segment is deleted whole); one request larger than this has a segment of its own.
SEGMENT_BYTES = 16 << 20


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


def lock_directory(directory: Path) -> int:
    """Hold the spool directory's LOCK file (released when the returned descriptor closes):
    two processes appending to one spool would interleave their records."""
    fd = os.open(directory / "LOCK", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise OSError(f"another tracefix serve uses the spool {directory}") from None
    return fd


def write_all(fd: int, parts: list[bytes]) -> None:
    for part in parts:
        view = memoryview(part)
        while view:
            view = view[os.write(fd, view):]


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
