"""The writer groups the requests that wait for it into one transaction (collector/writer.py):
a request the database refuses in part still costs only its own refused span, never its
neighbours in the group; while an export the receivers admitted is still decoding, the group
waits for its batch (HTTP and gRPC, against a real collector), but not after an export was
turned away (its retry needs the room acknowledgements free); and once none is decoding, the
group is committed at once, not after the whole linger (an acknowledgement waits for a request
that is not coming)."""
from __future__ import annotations

import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from test_partial_success import accepted, good_chat, make_request, make_span

from tracefix.collector.normalize import normalize_request
from tracefix.collector.server import Collector, Config
from tracefix.collector.store import Store
from tracefix.collector.writer import QueueFull, Writer

REFUSED = '[{"role":"user","content":"lone \\ud800 surrogate"}]'  # DuckDB cannot store it (no UTF-8 form)


def request_batch(sid: str, bad: int | None = None):
    spans = [good_chat(sid, uuid.uuid4().bytes, n) for n in range(4)]
    if bad is not None:
        spans[bad].attributes.add(key="gen_ai.input.messages").value.string_value = REFUSED
    return normalize_request(make_request(spans))


def held(writer: Writer) -> threading.Event:
    """Keep the writer thread busy until the returned event is set: what is submitted meanwhile
    waits in its queue and is taken in one group."""
    release, running = threading.Event(), threading.Event()
    writer.call(lambda store: (running.set(), release.wait(30)))
    assert running.wait(30)
    return release


def test_a_refused_span_in_a_grouped_transaction_costs_only_that_span(tmp_path):
    store = Store(tmp_path / "grouped.duckdb")
    writer = Writer(store).start()
    try:
        sids = [f"group-{i}-{uuid.uuid4().hex[:6]}" for i in range(4)]
        release = held(writer)
        futures = [writer.submit_batch(request_batch(sid, bad=2 if i == 1 else None)) for i, sid in enumerate(sids)]
        release.set()
        results = [f.result(60) for f in futures]
        assert writer.transactions == 1  # the four requests were one group
        assert results[0] == results[2] == results[3] == []
        [(count, why)] = results[1]
        assert count == 1 and "chat good-2" in why and "database refused" in why
        stored = {sid: sorted(s["name"] for s in store.get_spans(sid)) for sid in sids}
        assert stored[sids[1]] == ["chat good-0", "chat good-1", "chat good-3"]
        assert all(stored[sid] == [f"chat good-{n}" for n in range(4)] for sid in (sids[0], sids[2], sids[3]))
    finally:
        writer.close()
        store.close()


def test_a_group_is_committed_once_no_more_requests_are_due_not_after_the_whole_linger(tmp_path):
    store = Store(tmp_path / "linger.duckdb")
    writer = Writer(store, linger_s=5.0).start()  # the most an acknowledgement may be held back
    try:
        release = held(writer)
        # requests that arrived together while the writer was busy: a stream, whose next
        # request would be due at once; none comes, so the group goes in without waiting 5 s
        futures = [writer.submit_batch(request_batch(f"linger-{i}-{uuid.uuid4().hex[:6]}")) for i in range(3)]
        started = time.monotonic()
        release.set()
        assert all(f.result(60) == [] for f in futures)
        assert time.monotonic() - started < 2.5
        assert writer.committed_spans == 12 and writer.transactions == 1
    finally:
        writer.close()
        store.close()


def wait_until(check, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.002)


def test_a_group_waits_for_an_export_still_decoding_and_is_committed_as_it_arrives(tmp_path):
    store = Store(tmp_path / "expecting.duckdb")
    writer = Writer(store, linger_s=10.0).start()
    try:
        release = held(writer)
        first = writer.submit_batch(request_batch(f"first-{uuid.uuid4().hex[:6]}"))
        decoded, later = threading.Event(), []

        def receiver() -> None:  # an export admitted and decoding while the writer takes the first
            with writer.expecting():
                decoded.wait(30)
                later.append(writer.submit_batch(request_batch(f"later-{uuid.uuid4().hex[:6]}")))

        thread = threading.Thread(target=receiver)
        thread.start()
        wait_until(lambda: writer.arrivals.decoding == 1, "the receiver never counted its export")
        release.set()
        time.sleep(0.3)
        assert not first.done(), "committed without the export still decoding"
        arrived = time.monotonic()
        decoded.set()
        thread.join(30)
        assert first.result(60) == [] and later[0].result(60) == []
        assert time.monotonic() - arrived < 5.0, "waited out the linger after the last export arrived"
        assert writer.transactions == 1 and writer.committed_spans == 8
    finally:
        writer.close()
        store.close()


def test_after_an_export_was_turned_away_a_group_does_not_wait_for_one_still_decoding(tmp_path):
    store = Store(tmp_path / "refused.duckdb")
    writer = Writer(store, max_pending_spans=10, linger_s=10.0).start()
    try:
        release = held(writer)
        first = writer.submit_batch(request_batch(f"first-{uuid.uuid4().hex[:6]}"))
        large = normalize_request(make_request([good_chat("large", uuid.uuid4().bytes, n) for n in range(8)]))
        with pytest.raises(QueueFull):
            writer.submit_batch(large)  # 4 + 8 spans > 10: its exporter is told to retry
        with writer.expecting():  # another export still decoding, while the writer takes the first
            release.set()
            assert first.result(5) == [], "held for the export still decoding"
        assert writer.transactions == 1
    finally:
        writer.close()
        store.close()


class Served:
    """An in-process collector where test_partial_success.export finds its ports."""

    def __init__(self, collector: Collector):
        self.collector = collector
        self.match = {"http": collector.http_url, "grpc": collector.grpc_addr}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    collector = Collector(Config(db=str(tmp_path_factory.mktemp("grouping") / "g.duckdb"), http_port=0, grpc_port=0,
                                 diagnose="off", spool_max_bytes=0))
    collector.start()
    yield Served(collector)
    collector.stop()


def large_request(sid: str, spans: int = 6000):
    """A body the decode worker takes a while over (~6 MB): its export is admitted and decoding
    while the writer takes another."""
    trace = uuid.uuid4().bytes
    text = json.dumps([{"role": "user", "content": "q " * 500}])
    return make_request([make_span(trace, n, f"chat {n}", {"gen_ai.operation.name": "chat", "tracefix.session.id": sid,
                                                            "tracefix.step": n, "gen_ai.input.messages": text})
                         for n in range(spans)])


@pytest.mark.parametrize("via", ["protobuf", "grpc"])
def test_a_receivers_export_still_decoding_joins_the_group_that_waits_for_it(served, via):
    """A small export waits in the writer's queue while a large one decodes in the worker: the
    writer, let go, waits for the large one (both receivers count an export from its body's
    arrival until its batch is queued) and commits both in one transaction as it arrives."""
    writer = served.collector.writer
    writer.linger_s = 30.0  # what is measured is that it waits, and for what; not a timer
    small = make_request([good_chat(f"small-{via}-{uuid.uuid4().hex[:6]}", uuid.uuid4().bytes, n) for n in range(4)])
    large = large_request(f"large-{via}-{uuid.uuid4().hex[:6]}")
    before = writer.transactions
    release = held(writer)
    with ThreadPoolExecutor(2) as pool:
        answers = [pool.submit(accepted, served, small, via)]
        wait_until(lambda: writer.pending_spans == 4, "the small export never reached the writer's queue")
        answers.append(pool.submit(accepted, served, large, via))
        wait_until(lambda: writer.arrivals.decoding == 1, "the large export was never counted as decoding")
        release.set()
        let_go = time.monotonic()
        for answer in answers:
            assert not answer.result(60).partial_success.rejected_spans
    assert writer.transactions == before + 1, "the small export was committed without the large one"
    assert time.monotonic() - let_go < 20.0, "waited out the linger"
