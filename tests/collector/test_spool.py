"""The durable ingest spool (tracefix.collector.spool): its segment files on their own (torn
tails, checksums, deletion only once committed, one process per directory), then a real
`tracefix serve` whose writer queue is tiny: a burst of exports from a client that never
retries is stored whole, and only a spent disk budget is refused, with RetryInfo / Retry-After.
(kill -9 while spilling: test_durability.py.)"""
from __future__ import annotations

import json
import math
import os
import time
import uuid

import pytest
from collector_support import TOKEN, otlp_error
from test_backpressure import assert_retry_info, grpc_burst, session_body
from test_ingest import post
from test_metrics import burst, scrape, value

import procs

from tracefix.collector.access import HttpAccess
from tracefix.collector.grpc_receiver import MAX_CONCURRENT_EXPORTS
from tracefix.collector.spool import Spool, SpooledRequest
from tracefix.collector.spool.segments import MAGIC


def request(i: int, size: int = 300) -> SpooledRequest:
    return SpooledRequest("grpc" if i % 2 else "http", "application/x-protobuf", "gzip" if i % 3 else None,
                          os.urandom(size), spans=i)


def fill(spool: Spool, n: int) -> list[SpooledRequest]:
    sent = [request(i) for i in range(n)]
    for fut in [spool.append(r) for r in sent]:
        assert fut.result(10) == []  # acknowledged: fsynced
    return sent


def drain(spool: Spool) -> list:
    taken = []
    while (found := spool.next(timeout=0.1)) is not None:
        spool.taken()
        taken.append(found)
    return taken


def segments(directory) -> list[str]:
    return sorted(p.name for p in directory.glob("*.seg"))


def test_requests_come_back_in_order_byte_for_byte_and_segments_go_once_committed(tmp_path):
    spool = Spool(tmp_path / "s", max_bytes=1 << 20, segment_bytes=1000, memo_bytes=0).open()
    try:
        sent = fill(spool, 10)
        assert len(segments(tmp_path / "s")) == 5  # two ~330-byte records per 1000-byte segment
        taken = drain(spool)
        assert [(r.protocol, r.content_type, r.content_encoding, r.body, r.spans) for _, r in taken] == \
            [(r.protocol, r.content_type, r.content_encoding, r.body, r.spans) for r in sent]
        assert spool.pending_requests == 10 and spool.pending_spans == sum(range(10))
        for position, _ in taken[:3]:  # the first segment whole, the second half
            spool.committed(position)
        assert len(segments(tmp_path / "s")) == 4
        for position, _ in taken[3:]:
            spool.committed(position)
        assert segments(tmp_path / "s") == [] and spool.bytes == 0 and spool.pending_requests == 0
    finally:
        spool.close()


def test_appends_racing_the_drain_leave_no_segment_behind(tmp_path):
    """Appending threads and a committing drain at once, a new segment every few records: once
    everything is committed the directory is empty (a segment sealed after its last commit too)."""
    import threading

    spool = Spool(tmp_path / "s", max_bytes=64 << 20, segment_bytes=900, memo_bytes=2000).open()
    try:
        def append(worker: int) -> None:
            for i in range(60):
                assert spool.append(request(worker * 100 + i, size=100 + 37 * (i % 5))).result(10) == []

        appenders = [threading.Thread(target=append, args=(w,)) for w in range(4)]
        for t in appenders:
            t.start()
        seen = 0
        while seen < 240:
            found = spool.next(timeout=5)
            assert found is not None, f"the drain stalled after {seen} of 240 records"
            spool.taken()
            spool.committed(found[0])
            seen += 1
        for t in appenders:
            t.join()
        assert segments(tmp_path / "s") == [] and spool.bytes == 0 and spool.pending_requests == 0
    finally:
        spool.close()


def test_a_restart_replays_what_was_not_committed_and_ignores_a_torn_tail(tmp_path, caplog):
    spool = Spool(tmp_path / "s", max_bytes=1 << 20, segment_bytes=1000, memo_bytes=0).open()
    sent = fill(spool, 6)
    taken = drain(spool)
    for position, _ in taken[:2]:
        spool.committed(position)
    spool.close()
    last = tmp_path / "s" / segments(tmp_path / "s")[-1]
    with open(last, "ab") as f:  # a process killed mid-append: a record cut short, never acknowledged
        f.write(sent[0].encode()[0] + b"only part of the payload")

    spool = Spool(tmp_path / "s", max_bytes=1 << 20, segment_bytes=1000, memo_bytes=0).open()
    try:
        assert spool.unread == 4
        assert [r.body for _, r in drain(spool)] == [r.body for r in sent[2:]]
        assert "ignored" in caplog.text
        later = fill(spool, 1)  # appended to a new segment, never after the torn tail
        assert [r.body for _, r in drain(spool)] == [later[0].body]
    finally:
        spool.close()


def test_a_record_whose_checksum_fails_ends_its_segment(tmp_path):
    spool = Spool(tmp_path / "s", max_bytes=1 << 20, memo_bytes=0).open()
    sent = fill(spool, 3)
    spool.close()
    seg = tmp_path / "s" / segments(tmp_path / "s")[0]
    data = bytearray(seg.read_bytes())
    second = len(MAGIC) + sum(len(p) for p in sent[0].encode())
    data[second + 40] ^= 0xFF  # one flipped bit in the second record's body
    seg.write_bytes(bytes(data))
    spool = Spool(tmp_path / "s", max_bytes=1 << 20, memo_bytes=0).open()
    try:
        assert [r.body for _, r in drain(spool)] == [sent[0].body]
    finally:
        spool.close()


def test_the_budget_refuses_what_does_not_fit_and_one_directory_has_one_owner(tmp_path):
    from tracefix.collector.spool import SpoolFull
    from tracefix.collector.writer import QueueFull

    spool = Spool(tmp_path / "s", max_bytes=1000, memo_bytes=0).open()
    try:
        fill(spool, 2)
        with pytest.raises(SpoolFull) as full:
            spool.append(request(9, size=600))
        assert isinstance(full.value, QueueFull)  # the receivers' back-pressure path answers it
        with pytest.raises(OSError, match="another tracefix serve"):
            Spool(tmp_path / "s", max_bytes=1000).open()
    finally:
        spool.close()


# --- a real collector ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def spilling_serve(tmp_path_factory):
    """A writer queue of one span: every export that meets another waiting goes to the spool."""
    p = procs.start_serve(tmp_path_factory.mktemp("spool") / "s.duckdb", "--token", TOKEN, "--diagnose", "off",
                          "--max-queue-spans", "1", env={"TRACEFIX_TOKEN": ""})
    yield p
    p.stop()


def health(serve) -> dict:
    import urllib.request

    with urllib.request.urlopen(serve.match["http"] + "/healthz", timeout=10) as resp:
        return json.loads(resp.read())


def wait_drained(serve, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while (h := health(serve))["spooled_requests"] or h["pending_spans"]:
        assert time.monotonic() < deadline, h
        time.sleep(0.05)
    return h


def test_a_burst_over_the_queue_and_the_concurrency_cap_is_stored_whole_without_a_retry(spilling_serve, tmp_path):
    """Raw gRPC calls that never retry (as the JS exporter's): with a spool, none is refused."""
    before = scrape(spilling_serve)
    sid = f"spool-burst-{uuid.uuid4().hex[:8]}"
    body = session_body(sid, 50)  # one session: every export repeats the same 50 spans
    assert grpc_burst(spilling_serve, body, 2 * MAX_CONCURRENT_EXPORTS) == []  # no RESOURCE_EXHAUSTED
    answers = burst(lambda: post(spilling_serve.match["http"] + "/v1/traces",
                                 session_body(f"{sid}-http-{uuid.uuid4().hex[:6]}", 20)))
    assert {status for status, _, _ in answers} == {200}
    wait_drained(spilling_serve)
    after = scrape(spilling_serve)

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("tracefix_spooled_requests_total", protocol="grpc") > 0
    assert moved("tracefix_spooled_requests_total", protocol="http") > 0
    assert moved("tracefix_export_requests_backpressured_total", protocol="grpc") == 0
    assert value(after, "tracefix_spool_bytes") == 0 and value(after, "tracefix_spool_pending_requests") == 0
    assert value(after, "tracefix_spool_budget_bytes") == 2048 << 20
    api = HttpAccess(spilling_serve.match["http"], TOKEN)
    assert len(api.get_spans(sid)) == 50  # the repeats stored once
    sessions = {s["session_id"]: s["spans"] for s in api.list_sessions(limit=1000)}
    http_sessions = [n for s, n in sessions.items() if s.startswith(f"{sid}-http-")]
    assert len(http_sessions) == len(answers) and set(http_sessions) == {20}


@pytest.fixture(scope="module")
def tiny_spool_serve(tmp_path_factory):
    """A 256 KiB spool behind a one-span queue: a burst of ~100 KB exports spends it."""
    p = procs.start_serve(tmp_path_factory.mktemp("tiny") / "t.duckdb", "--token", TOKEN, "--diagnose", "off",
                          "--max-queue-spans", "1", "--spool-max-mb", "0.25", env={"TRACEFIX_TOKEN": ""})
    yield p
    p.stop()


def test_a_spent_spool_budget_answers_resource_exhausted_with_retry_info(tiny_spool_serve):
    body = session_body(f"spool-full-{uuid.uuid4().hex[:8]}", 400)
    assert len(body) > 64 << 10
    busy = grpc_burst(tiny_spool_serve, body, 2 * MAX_CONCURRENT_EXPORTS)
    assert_retry_info(busy)
    assert all("budget" in exc.details() for exc in busy), {exc.details() for exc in busy}


def test_a_spent_spool_budget_answers_429_with_retry_after(tiny_spool_serve):
    body = session_body(f"spool-full-http-{uuid.uuid4().hex[:8]}", 400)
    answers = burst(lambda: post(tiny_spool_serve.match["http"] + "/v1/traces", body), threads=12, rounds=3)
    assert {status for status, _, _ in answers} <= {200, 429}
    busy = [(otlp_error(resp, "application/x-protobuf"), {k.lower(): v for k, v in headers.items()})
            for status, resp, headers in answers if status == 429]
    assert busy, "the burst never spent the 256 KiB budget: it proves nothing"
    for (message, delay), headers in busy:  # a protobuf Status: RetryInfo beside Retry-After
        assert "budget" in message
        assert headers["retry-after"] == str(math.ceil(delay))
