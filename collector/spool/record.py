"""The spool's record: one export as received, and its bytes in a segment, checksummed.

    u32 payload length | u32 CRC-32 of the payload | payload
    payload: u8 format | u8 protocol and signal | u32 records | u16 len(content type)
             | u16 len(encoding) | content type | encoding | body

The protocol byte's low four bits say which receiver took the export (PROTOCOLS), its high
four which signal it carries (SIGNALS: traces, logs, metrics); records spooled before logs
and metrics were received have 0 there, traces.

A record whose length runs past the end of its file or whose checksum fails reads as none
(`read_record`): a torn tail, or damage.
"""
from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracefix.collector.normalize import Batch

RECORD_HEADER = struct.Struct("<II")  # payload length, CRC-32 of the payload
RECORD_META = struct.Struct("<BBIHH")  # format, protocol, spans, len(content type), len(encoding)
FORMAT = 1
PROTOCOLS = ("http", "grpc")
SIGNALS = ("traces", "logs", "metrics")  # otlp_signals' names; the index is on disk: only append


@dataclass
class SpooledRequest:
    """One export as it arrived: enough to decode it again (`decoding.decode_body`)."""
    protocol: str  # "http" or "grpc": which receiver took it
    content_type: str
    content_encoding: str | None
    body: bytes
    spans: int = 0  # records it holds (normalized: spans, log records, points), for the retry delay and the gauges
    # what the receiver decoded it to; never written: the drain uses it while it is in memory
    batch: "Batch | None" = field(default=None, repr=False, compare=False)
    signal: str = "traces"  # which Export*ServiceRequest the body is (SIGNALS)

    def encode(self) -> list[bytes]:
        """The record: header, then payload in pieces (the body is not copied)."""
        ctype = self.content_type.encode("latin-1", "replace")[:0xFFFF]
        encoding = (self.content_encoding or "").encode("latin-1", "replace")[:0xFFFF]
        kinds = PROTOCOLS.index(self.protocol) | SIGNALS.index(self.signal) << 4
        meta = RECORD_META.pack(FORMAT, kinds, self.spans, len(ctype), len(encoding))
        prefix = meta + ctype + encoding
        crc = zlib.crc32(self.body, zlib.crc32(prefix))
        return [RECORD_HEADER.pack(len(prefix) + len(self.body), crc), prefix, self.body]

    @classmethod
    def decode(cls, payload: bytes) -> "SpooledRequest":
        fmt, kinds, spans, n_ctype, n_encoding = RECORD_META.unpack_from(payload)
        protocol, signal = kinds & 0xF, kinds >> 4
        if fmt != FORMAT or protocol >= len(PROTOCOLS) or signal >= len(SIGNALS):
            raise ValueError(f"unknown spool record format {fmt}/{kinds}")
        at = RECORD_META.size
        ctype = payload[at:at + n_ctype].decode("latin-1")
        at += n_ctype
        encoding = payload[at:at + n_encoding].decode("latin-1") or None
        return cls(PROTOCOLS[protocol], ctype, encoding, payload[at + n_encoding:], spans, signal=SIGNALS[signal])


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
