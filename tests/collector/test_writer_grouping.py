"""The writer groups the requests that wait for it into one transaction (collector/writer.py):
a request the database refuses in part still costs only its own refused span, never its
neighbours in the group; and once no request is due any more the group is committed at once,
not after the whole linger (an acknowledgement waits for a request that is not coming)."""
from __future__ import annotations

import threading
import time
import uuid

from test_partial_success import good_chat, make_request

from tracefix.collector.normalize import normalize_request
from tracefix.collector.store import Store
from tracefix.collector.writer import Writer

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
