"""Uploads that stall or crawl cannot starve OTLP/HTTP ingest, and are dropped in bounded time.

Eight sockets each declare a 32 MiB body (8 x 32 MiB is the whole in-flight budget) and
send next to nothing; a ninth trickles one byte a second. A real SDK exporter must still
get its spans stored, and the server must answer the slow sockets 408 and close them."""
from __future__ import annotations

import socket
import threading
import time
import urllib.parse
import uuid

from collector_support import TOKEN, tracer_provider

DECLARED = 32 * 1024 * 1024
DROPPED_WITHIN_S = 25.0  # the server's deadlines are 10 s idle, 10 s grace then 64 KiB/s


def open_upload(http_url: str) -> socket.socket:
    """A POST /v1/traces that declares a 32 MiB body; returns once the server reads the
    body (it answers `Expect: 100-continue` only then), having sent 10 bytes of it."""
    url = urllib.parse.urlsplit(http_url)
    sock = socket.create_connection((url.hostname, url.port), timeout=DROPPED_WITHIN_S)
    sock.sendall((f"POST /v1/traces HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/x-protobuf\r\n"
                  f"Authorization: Bearer {TOKEN}\r\nContent-Length: {DECLARED}\r\n"
                  "Expect: 100-continue\r\n\r\n").encode())
    interim = sock.recv(4096)
    assert interim.startswith(b"HTTP/1.1 100"), interim
    sock.sendall(b"\x0a" * 10)
    return sock


def answer_and_close(sock: socket.socket) -> tuple[bytes, float]:
    """What the server sends until it closes the connection, and when it closed it."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data, time.monotonic()
        data += chunk


def test_stalled_and_crawling_uploads_neither_starve_exporters_nor_stay(collector, api):
    http = collector.match["http"]
    start = time.monotonic()
    stalled = [open_upload(http) for _ in range(8)]
    crawling = open_upload(http)
    stop = threading.Event()

    def crawl() -> None:  # never idle for long, far below the minimum rate
        try:
            while not stop.wait(1.0):
                crawling.sendall(b"\x00")
        except OSError:  # the server closed it: what we wait for
            pass

    threading.Thread(target=crawl, daemon=True).start()
    try:
        sid = f"slow-{uuid.uuid4().hex[:8]}"
        provider = tracer_provider(collector, "http")
        with provider.get_tracer("t").start_as_current_span("chat m", attributes={
                "gen_ai.operation.name": "chat", "tracefix.session.id": sid}):
            pass
        assert provider.force_flush(15_000)
        provider.shutdown()
        assert [s["name"] for s in api.get_spans(sid)] == ["chat m"], "the export was starved"

        for sock in [*stalled, crawling]:
            data, closed_at = answer_and_close(sock)
            assert data.startswith(b"HTTP/1.1 408"), data[:200]
            assert b"too slow" in data
            assert closed_at - start < DROPPED_WITHIN_S
    finally:
        stop.set()
        for sock in [*stalled, crawling]:
            sock.close()
