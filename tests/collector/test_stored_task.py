"""Each session's task is stored in its row (migration 12) at ingest, so the session list sorts
and filters by it without reading messages; the lists show what they showed before the column
(document.task_of over the metadata, the inputs, else step 0's first user message, as
StoreReads._task_of still reads it), whatever order the spans arrive in, and a store made
before the column gets it by the migration's backfill.

Real OpenTelemetry SDK spans, encoded as OTLP and ingested a request at a time; the tasks are
written from templates here, with decoys: an empty task, a number under a task key, a user
message that is not step 0's, a system message naming a user, a task longer than the list keeps, content as a list of parts."""
from __future__ import annotations

import json

import duckdb
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracefix import semconv as sc
from tracefix.collector.normalize import normalize_request
from tracefix.collector.store import Store

LONG = "Reconcile the ledger line by line, " * 60  # past the 1,000 characters a task keeps


def spans(sid: str, *, inputs=None, metadata=None, users=("hello",), system="be brief") -> list:
    """A root span and one chat span per entry of `users` (its first user message), finished
    spans in the order the SDK ended them (the chats first, the root last)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("stored-task-test")
    root = {sc.SESSION_SPAN: True, sc.SESSION_ID: sid}
    if inputs is not None:
        root[sc.INPUTS] = json.dumps(inputs)
    if metadata is not None:
        root[sc.METADATA] = json.dumps(metadata)
    with tracer.start_as_current_span(f"session {sid}", attributes=root):
        for step, user in enumerate(users):
            messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
            with tracer.start_as_current_span("chat m", attributes={
                    sc.SESSION_ID: sid, sc.STEP: step, "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                    "gen_ai.input.messages": json.dumps(messages),
                    "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": f"done {step}"}])}):
                pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


def ingest(store: Store, *requests: list) -> None:
    for finished in requests:
        store.ingest(normalize_request(encode_spans(finished)))


# id -> (the task the list must show, the requests its spans arrive in)
def cases() -> dict[str, tuple[str | None, list[list]]]:
    meta = spans("t-meta", metadata={"task": "Close the March books"}, inputs={"task": "not this one"})
    empty = spans("t-empty", metadata={"task": ""}, inputs={"query": "Which invoices are overdue?"})
    number = spans("t-number", inputs={"task": 7}, users=("Ship order 7 to Lyon", "later words"))
    decoy = spans("t-system", system='a "role":"user" decoy', users=(LONG, "not the first step"))
    late_root = spans("t-late-root", inputs={"goal": "Rebook the Oslo flight"}, users=("rebook it",))
    late_step0 = spans("t-late-step0", users=("Count the pallets in bay 4", "and then bay 5"))
    bare = spans("t-bare", users=())
    parts = spans("t-parts", users=([{"type": "text", "text": "Refill the printer"},
                                     {"type": "text", "text": "on floor 3"}],))
    return {
        "t-meta": ("Close the March books", [meta]),
        "t-empty": ("Which invoices are overdue?", [empty]),
        "t-number": ("Ship order 7 to Lyon", [number]),
        "t-system": (LONG[:1000], [decoy]),
        # the chat first, the root naming the task in a later request
        "t-late-root": ("Rebook the Oslo flight", [late_root[:-1], late_root[-1:]]),
        # step 1 first (its user message is no task), step 0 in a later request
        "t-late-step0": ("Count the pallets in bay 4", [late_step0[1:], late_step0[:1]]),
        "t-bare": (None, [bare]),
        "t-parts": ("Refill the printeron floor 3", [parts]),  # content as a list of parts, joined at ingest
    }


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    path = tmp_path_factory.mktemp("task") / "s.duckdb"
    store = Store(str(path))
    expected = {}
    for sid, (task, requests) in cases().items():
        ingest(store, *requests)
        expected[sid] = task
    yield store, expected
    store.close()


def listed(store: Store) -> tuple[dict, dict]:
    table = {r["session_id"]: r["task"] for r in store.session_table(limit=100)["rows"]}
    api = {r["session_id"]: r["task"] for r in store.list_sessions(limit=100)}
    return table, api


def test_the_lists_show_the_task_as_the_session_reads_it(stored):
    store, expected = stored
    table, api = listed(store)
    assert table == api == expected
    assert dict(store._read().execute("SELECT session_id, task FROM sessions").fetchall()) == expected
    for sid in expected:  # what the lists computed before the column, from the same rows
        assert store._task_of(store._read(), sid) == expected[sid]


def test_sort_and_filter_read_the_stored_task(stored):
    store, expected = stored
    order = [r["session_id"] for r in store.session_table(sort="task", descending=False, limit=100)["rows"]]
    named = sorted((sid for sid in expected if expected[sid]), key=lambda sid: (expected[sid].lower(), sid))
    assert order == named + ["t-bare"]
    assert {r["session_id"] for r in store.session_table(task="PALLETS", limit=100)["rows"]} == {"t-late-step0"}
    assert not store.session_table(task="not the first step", limit=100)["rows"]
    assert not store.session_table(task="not this one", limit=100)["rows"]


def test_a_store_made_before_the_column_gets_it_from_the_backfill(stored, tmp_path):
    expected = stored[1]
    path = tmp_path / "old.duckdb"
    store = Store(str(path))
    for _, requests in cases().values():
        ingest(store, *requests)
    store.close()
    with duckdb.connect(str(path)) as con:  # the store as version 11 left it: no task column
        con.execute("ALTER TABLE sessions DROP COLUMN task")
        con.execute("DELETE FROM schema_version WHERE version >= 12")
    reopened = Store(str(path))
    try:
        table, api = listed(reopened)
        assert table == api == expected
    finally:
        reopened.close()
