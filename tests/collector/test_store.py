"""The store on a DuckDB file in-process: what the single writer does when it merges requests."""
from __future__ import annotations

import uuid

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_ingest import _otlp_request, agent_run_with_sessionless_chat

from tracefix.collector.normalize import Batch, normalize_request
from tracefix.collector.store import Store


def test_a_retry_merged_into_the_same_transaction_is_stored_once(tmp_path):
    store = Store(tmp_path / "merge.duckdb")
    sid = f"merge-{uuid.uuid4().hex[:6]}"
    body = _otlp_request(sid, 3)
    merged = Batch()
    for _ in range(2):  # the original request and its retry, both queued when the writer wakes
        merged.extend(normalize_request(ExportTraceServiceRequest.FromString(body)))
    assert merged.merged and len(merged.spans) == 6
    store.ingest(merged)
    assert len(store.get_spans(sid)) == 3
    assert [s["index"] for s in store.get_session(sid)["steps"]] == [0, 1, 2]
    store.ingest(normalize_request(ExportTraceServiceRequest.FromString(body)))  # and once more, later
    assert store.stats()["spans"] == 3
    store.close()


def test_a_retry_of_a_span_stored_before_its_session_was_known_is_stored_once(tmp_path):
    """New sessions' spans skip the duplicate check (nothing of theirs can be stored yet), but a
    span first stored under its trace id (no session attribute in sight) can come back with
    its trace's session, new in that batch: it must still be found."""
    store = Store(tmp_path / "late.duckdb")
    sid = f"late-{uuid.uuid4().hex[:6]}"
    root, child = agent_run_with_sessionless_chat(sid)
    store.ingest(normalize_request(encode_spans([child])))  # alone: its session is its trace id
    assert store.stats()["spans"] == 1
    store.ingest(normalize_request(encode_spans([root, child])))  # the retry, now with the session
    assert store.stats()["spans"] == 2
    assert sorted(s["name"] for s in store.get_spans(sid)) == ["agent run", "chat m"]
    assert store.get_session(f"{child.context.trace_id:032x}") is None, "the trace id's session is gone"
    store.close()


def test_a_child_and_its_root_merged_into_one_transaction_share_the_session(tmp_path):
    """The writer merges queued requests: a child sent alone (its session then unknown) and
    the root that names it, in one batch, give one session, not one under the trace id."""
    store = Store(tmp_path / "merged-late.duckdb")
    sid = f"late-{uuid.uuid4().hex[:6]}"
    root, child = agent_run_with_sessionless_chat(sid)
    merged = Batch()
    for spans in ([child], [root]):
        merged.extend(normalize_request(encode_spans(spans)))
    store.ingest(merged)
    assert sorted(s["name"] for s in store.get_spans(sid)) == ["agent run", "chat m"]
    assert len(store.get_session(sid)["steps"]) == 1
    assert store.stats()["sessions"] == 1
    store.close()


def test_steps_of_new_and_known_sessions_in_one_batch(tmp_path):
    """Steps of sessions new in a batch are numbered from the batch, those of known sessions
    from the table: both in one transaction must give each session 0..n-1."""
    store = Store(tmp_path / "steps.duckdb")
    old, new = f"old-{uuid.uuid4().hex[:6]}", f"new-{uuid.uuid4().hex[:6]}"
    store.ingest(normalize_request(ExportTraceServiceRequest.FromString(_otlp_request(old, 2))))
    merged = Batch()
    for body in (_otlp_request(old, 3), _otlp_request(new, 2)):
        merged.extend(normalize_request(ExportTraceServiceRequest.FromString(body)))
    store.ingest(merged)
    assert [s["index"] for s in store.get_session(old)["steps"]] == [0, 1, 2, 3, 4]
    assert [s["index"] for s in store.get_session(new)["steps"]] == [0, 1]
    store.close()


def test_messages_are_stored_once_across_a_restart_of_the_writer(tmp_path):
    """The writer knows which messages are stored (no index does): a new Store on the same
    file must learn them from the table, or a resent history would be stored twice."""
    db = tmp_path / "restart.duckdb"
    store = Store(db)
    store.ingest(normalize_request(ExportTraceServiceRequest.FromString(_otlp_request("first", 3))))
    stored = store.stats()["messages"]
    assert stored == 1 + 3 + 3  # the shared system prompt, three questions, three answers
    store.close()
    store = Store(db)  # as after a restart of `tracefix serve`
    store.ingest(normalize_request(ExportTraceServiceRequest.FromString(_otlp_request("second", 4))))
    assert store.stats()["messages"] == stored + 1 + 1, "only q3 and a3 are new"
    assert store.get_session("second")["steps"][3]["output_message"]["content"] == "a3"
    store.close()


def test_a_store_from_before_migration_5_keeps_its_messages_without_the_index(tmp_path):
    from tracefix.collector.store import MIGRATIONS, connect_db

    db = tmp_path / "v4.duckdb"
    con = connect_db(db)
    con.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, description VARCHAR, applied_ns BIGINT)")
    for version, description, statements in MIGRATIONS[:4]:
        for sql in statements:
            con.execute(sql)
        con.execute("INSERT INTO schema_version VALUES (?, ?, 0)", [version, description])
    con.execute("""INSERT INTO messages VALUES (42, 'abc', '{"role":"user","content":"kept"}')""")
    con.close()
    store = Store(db)
    assert store.schema_version() == MIGRATIONS[-1][0] >= 5
    assert store._message_texts({42}) == {42: '{"role":"user","content":"kept"}'}
    indexes = store.con.execute("SELECT count(*) FROM duckdb_indexes() WHERE table_name = 'messages'").fetchone()[0]
    constraints = store.con.execute("SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'messages' "
                                    "AND constraint_type = 'PRIMARY KEY'").fetchone()[0]
    assert indexes == constraints == 0
    store.close()


def test_key_set_answers_exactly_before_and_after_folding_recent_keys():
    from tracefix.collector.keyset import FOLD_AT, KeySet

    keys = KeySet([5, -3, 2**63 - 1])
    assert keys.missing([5, 6, -3, -(2**63)]) == [6, -(2**63)]
    keys.add(range(10, 10 + FOLD_AT))  # crosses the fold: the recent set joins the sorted array
    assert len(keys) == 3 + FOLD_AT and not keys._recent
    assert keys.missing([9, 10, 10 + FOLD_AT - 1, 10 + FOLD_AT]) == [9, 10 + FOLD_AT]
    keys.add([9])
    assert 9 in keys and 8 not in keys


def test_a_diagnosis_job_that_keeps_taking_the_collector_down_is_failed_not_requeued_forever(tmp_path):
    from tracefix.collector.jobs import MAX_JOB_ATTEMPTS

    store = Store(tmp_path / "jobs.duckdb")
    store.import_sessions([{"session_id": "s-1", "messages": [{"role": "user", "content": "hi"}]}])
    job = store.enqueue_job("s-1", reason="test")
    for attempt in range(1, MAX_JOB_ATTEMPTS + 1):
        claimed = store.claim_job("diagnosis")  # ... and the process dies while running it
        assert claimed["job_id"] == job["job_id"] and claimed["attempts"] == attempt
        requeued = store.requeue_running_jobs("diagnosis")  # the next start
        assert requeued == (1 if attempt < MAX_JOB_ATTEMPTS else 0)
    failed = store.get_job(job["job_id"])
    assert failed["state"] == "failed" and f"{MAX_JOB_ATTEMPTS} times" in failed["error"]
    assert store.claim_job("diagnosis") is None


def test_a_diagnosis_job_leased_to_a_worker_is_not_requeued_by_a_collector_start(tmp_path):
    store = Store(tmp_path / "jobs.duckdb")
    store.import_sessions([{"session_id": "s-1", "messages": [{"role": "user", "content": "hi"}]}])
    job = store.enqueue_job("s-1", reason="test")
    assert store.claim_job("diagnosis", "worker-a", lease_s=60)["job_id"] == job["job_id"]
    assert store.requeue_running_jobs("diagnosis") == 0  # the worker may outlive the collector: its lease decides
    assert store.get_job(job["job_id"])["state"] == "running"
    assert store.claim_job("diagnosis") is None and store.claim_job("diagnosis", "worker-b", lease_s=60) is None
    assert store.finish_job(job["job_id"], worker="worker-a", state="done")
    store.close()


def test_a_session_named_like_a_trace_id_is_not_taken_for_that_traces_session(tmp_path):
    """Only a session the store made of a trace's session-less spans is moved: a client that
    names a session with some trace's id (by chance, or to take it over) moves nothing."""
    store = Store(tmp_path / "named.duckdb")
    root, child = agent_run_with_sessionless_chat(f"thief-{uuid.uuid4().hex[:6]}")
    victim = f"{root.context.trace_id:032x}"
    store.ingest(normalize_request(ExportTraceServiceRequest.FromString(_otlp_request(victim, 2))))
    store.ingest(normalize_request(encode_spans([root, child])))
    assert len(store.get_session(victim)["steps"]) == 2
    store.close()


def test_messages_an_older_collector_kept_with_fields_of_another_type_are_read_well_typed(tmp_path):
    """Before messages were typed at ingest, a client's `"tool_calls": 1.5` was stored as
    sent, and building the session's document failed on it (every read of the session was a
    500). Such a stored message is read with each field of the type readers take it for."""
    import json

    store = Store(tmp_path / "older.duckdb")
    sid = f"older-{uuid.uuid4().hex[:6]}"
    store.ingest(normalize_request(ExportTraceServiceRequest.FromString(_otlp_request(sid, 2))))
    bent = {"role": 7, "content": {"text": "an object"}, "name": ["x"], "tool_calls": 1.5, "tool_call_id": 3}
    store.con.execute("UPDATE messages SET message = ?", [json.dumps(bent)])
    steps = store.get_session(sid)["steps"]
    assert len(steps) == 2
    for message in [steps[0]["output_message"], *steps[0]["input_messages"]]:
        assert message == {"role": "user", "content": '{"text": "an object"}', "tool_call_id": "3"}
    assert store.session_page(sid)["steps"][0]["output_message"]["role"] == "user"
    assert sid in {doc["session_id"] for doc in store.training_sessions(criterion="all")}
    store.close()


def test_an_imported_session_named_like_a_trace_id_is_not_taken_for_that_traces_session(tmp_path):
    """Only a session the store made of a trace's session-less spans is moved into the session
    the trace turns out to belong to: an imported one (here one with no steps yet, so no span
    of another trace marks it) keeps its id and what it was given."""
    store = Store(tmp_path / "imported.duckdb")
    root, child = agent_run_with_sessionless_chat(f"owner-{uuid.uuid4().hex[:6]}")
    named = f"{root.context.trace_id:032x}"
    store.import_sessions([{"session_id": named, "task": "an imported task", "messages": []}])
    store.ingest(normalize_request(encode_spans([child])))
    store.ingest(normalize_request(encode_spans([root])))
    kept = store.get_session(named)
    assert kept is not None and kept["task"] == "an imported task"
    store.close()
