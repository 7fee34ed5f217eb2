"""Sorting and filtering the session list on every column that has a value (issue 40 §1): task,
agents, model, cost and diagnosis state beside the older ones, the same in the web UI's table
(`Store.session_table`) and the API's and CLI's list (`Store.list_sessions`), on a file store
fed real OTLP spans from the OpenTelemetry SDK.

The expected orders are computed here from the documents the store answers (`get_session`'s
task, agents and models), never from the SQL under test; the tasks are written from templates
the code never reads, with decoys: a word only in a session's output, a task named under a
key the reader does not know, a number where the task should be, LIKE wildcards."""
from __future__ import annotations

import json

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracefix import semconv as sc
from tracefix.collector.normalize import normalize_request
from tracefix.collector.store import Store

# (id, inputs of the entrypoint, metadata, first user message, [(agent, model, input tokens)], output)
SESSIONS = [
    ("s-rent", {"task": "Pay the rent for March"}, None, "hello", [("Clerk", "gpt-4o-mini", 1000)], "ok"),
    ("s-audit", None, {"goal": "audit 100%_ of the ledger"}, "ignored", [("Auditor", "claude-3-5-sonnet", 2000),
                                                                        ("Clerk", "gpt-4o-mini", 10)], "done"),
    ("s-first", None, None, "Zebra crossing: route the courier", [("Router", "scripted-bank-model", 50)],
     "the rent is paid"),  # "rent" only in its output: a task filter must not find it
    ("s-number", {"task": 42, "objective": "Alpha task under an unknown key"}, None, "book a flight to Oslo",
     [("Planner", "gpt-4o-mini", 500), ("Booker", "gpt-4o-mini", 500)], "booked"),
    ("s-empty", None, None, None, [], None),
]


def spans_of(sid: str, inputs, metadata, first_user, calls, output):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("sorting-test")
    root = {sc.SESSION_SPAN: True, sc.SESSION_ID: sid}
    if inputs is not None:
        root[sc.INPUTS] = json.dumps(inputs)
    if metadata is not None:
        root[sc.METADATA] = json.dumps(metadata)
    if output is not None:
        root["tracefix.session.output"] = json.dumps(output)
    with tracer.start_as_current_span(f"session {sid}", attributes=root):
        for step, (agent, model, tokens) in enumerate(calls):
            messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": first_user}]
            with tracer.start_as_current_span(f"chat {model}", attributes={
                    sc.SESSION_ID: sid, sc.STEP: step, "gen_ai.operation.name": "chat", "gen_ai.agent.name": agent,
                    "gen_ai.request.model": model, "gen_ai.provider.name": "openai",
                    "gen_ai.usage.input_tokens": tokens, "gen_ai.usage.output_tokens": 10,
                    "gen_ai.input.messages": json.dumps(messages),
                    "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": f"reply {step}"}])}):
                pass
    provider.shutdown()
    return encode_spans(exporter.get_finished_spans())


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = Store(str(tmp_path_factory.mktemp("sorting") / "s.duckdb"))
    for session in SESSIONS:
        s.ingest(normalize_request(spans_of(*session)))
    s.add_feedback("s-audit", -1.0, "wrong", alert_threshold=0.0)  # queues its diagnosis job
    s.save_analysis("s-first", {"hypotheses": []})
    yield s
    s.close()


def ours(rows) -> list[str]:
    return [r["session_id"] for r in (rows["rows"] if isinstance(rows, dict) else rows)
            if r["session_id"].startswith("s-")]


def expected_order(store, value, descending: bool) -> list[str]:
    """The sessions by `value(document)` (None last either way), ties by id."""
    docs = {sid: store.get_session(sid) for sid, *_ in SESSIONS}
    known = sorted((sid for sid in docs if value(docs[sid]) is not None), key=lambda sid: sid)
    known.sort(key=lambda sid: value(docs[sid]), reverse=descending)
    return known + sorted(sid for sid in docs if value(docs[sid]) is None)


def test_the_documents_read_as_the_test_means(store):
    tasks = {sid: store.get_session(sid)["task"] for sid, *_ in SESSIONS}
    assert tasks == {"s-rent": "Pay the rent for March", "s-audit": "audit 100%_ of the ledger",
                     "s-first": "Zebra crossing: route the courier", "s-number": "book a flight to Oslo",
                     "s-empty": None}


@pytest.mark.parametrize("sort, value", [
    ("task", lambda d: (d["task"] or "").lower() or None),
    ("agents", lambda d: ", ".join(sorted(d["agents"])) or None),
    ("model", lambda d: ", ".join(sorted(d["models"])) or None),
    ("cost", lambda d: d["cost_usd"]),
])
def test_both_lists_sort_by_each_column_as_the_documents_say(store, sort, value):
    for descending in (False, True):
        expected = expected_order(store, value, descending)
        # ties (same value) may come in id order only: compare with the ties broken by id
        assert ours(store.session_table(sort=sort, descending=descending)) == expected, (sort, descending)
        assert ours(store.list_sessions(sort=sort, descending=descending)) == expected, (sort, descending)


def test_sort_by_diagnosis_state_follows_the_states_order(store):
    shown = store.session_table(sort="diagnosis", descending=False)["rows"]
    states = [r["diagnosis"] for r in shown]
    assert states == sorted(states, key=store.TABLE_DIAGNOSIS.index)
    assert {r["session_id"]: r["diagnosis"] for r in shown}["s-audit"] == "queued"
    assert ours(store.list_sessions(sort="diagnosis", descending=True))[:2] == ["s-first", "s-audit"]  # analyzed, queued


@pytest.mark.parametrize("filters, expected", [
    ({"task": "RENT"}, {"s-rent"}),  # not s-first, whose output says rent
    ({"task": "100%_"}, {"s-audit"}),  # wildcards are literal
    ({"task": "100%x"}, set()),
    ({"task": "alpha"}, set()),  # a task under a key the reader does not know is no task
    ({"task": "oslo"}, {"s-number"}),  # a number where the task should be: the first user message
    ({"model": "gpt-4o-mini"}, {"s-rent", "s-audit", "s-number"}),
    ({"model": "gpt-4o"}, set()),  # exact, not a prefix
    ({"agent": "Clerk"}, {"s-rent", "s-audit"}),
    ({"diagnosis": "queued"}, {"s-audit"}),
    ({"diagnosis": "analyzed"}, {"s-first"}),
    ({"min_cost": 0.006}, {"s-audit"}),  # $0.00616 (claude $0.00615 + mini); s-first's model has no price
    ({"max_cost": 0.001}, {"s-rent", "s-number"}),
    ({"min_cost": 0.0}, {"s-rent", "s-audit", "s-number"}),  # unknown cost is not 0
    ({"model": "gpt-4o-mini", "max_cost": 0.001}, {"s-rent", "s-number"}),
])
def test_both_lists_filter_alike(store, filters, expected):
    assert set(ours(store.session_table(**filters))) == expected
    assert set(ours(store.list_sessions(**filters))) == expected


def test_a_wrong_sort_or_state_is_refused(store):
    for read in (store.session_table, store.list_sessions):
        with pytest.raises(ValueError, match="sort must be one of"):
            read(sort="task; DROP TABLE sessions")
        with pytest.raises(ValueError, match="diagnosis must be one of"):
            read(diagnosis="exploded")
