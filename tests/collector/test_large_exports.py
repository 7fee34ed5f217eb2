"""Long prompts cannot break the store: one sender of requests of 30 spans with long messages,
at a DuckDB memory limit small enough that the data is several times the limit (issue 35 §1:
200 KB messages at the default 256MB made a checkpoint run out of memory, DuckDB gave up on
the database, and it stayed that way after a restart). Here 100 KB messages at 32MB: the same
ratio of data to memory, in seconds. Every acknowledged span is stored, a small export still
gets 200 and the session list answers, before and after a restart.

bench/large_exports.py is the full run (2,000 steps of 200 KB at the default limit)."""
from __future__ import annotations

import json
import signal
import uuid

from long_prompts import LongPrompts, export, export_retrying, get, stored_steps

import procs
MEMORY_LIMIT = "128MB"
MESSAGE_KB = 100
SPANS_PER_REQUEST = 30
REQUESTS = 90  # 2,700 spans, 270 MB of messages: twice the limit, as the issue's 1.2 GB was ~5x 256MB


def _assert_writable_and_complete(http: str, session_id: str, acknowledged: int, where: str) -> None:
    status, body = get(http + "/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok", (where, status, body[:300])
    stored = sorted(stored_steps(http, session_id))
    assert stored == list(range(acknowledged)), f"{where}: {acknowledged} spans acknowledged, {len(stored)} stored"
    small = LongPrompts(f"small-{uuid.uuid4().hex[:8]}", message_kb=1, pool_mb=1)
    status, body = export(http, small.request(3))
    assert status == 200, f"{where}: a small export got {status}: {body[:300]!r}"
    status, body = get(http + "/api/v1/sessions")
    assert status == 200, f"{where}: GET /api/v1/sessions answered {status}: {body[:300]!r}"


def test_long_prompts_at_a_small_memory_limit_keep_the_store_writable_across_a_restart(tmp_path):
    db = tmp_path / "long.duckdb"
    env = {"TRACEFIX_DB_MEMORY_LIMIT": MEMORY_LIMIT, "TRACEFIX_TOKEN": ""}
    serve = procs.start_serve(db, "--diagnose", "off", env=env)
    session = LongPrompts(f"long-{uuid.uuid4().hex[:8]}", message_kb=MESSAGE_KB)
    acknowledged, statuses = 0, []
    try:
        for _ in range(REQUESTS):
            if not export_retrying(serve.match["http"], session.request(SPANS_PER_REQUEST), statuses=statuses):
                break  # what follows is not acknowledged either: a store DuckDB gave up on stays so
            acknowledged += SPANS_PER_REQUEST
        assert acknowledged == REQUESTS * SPANS_PER_REQUEST, \
            f"{acknowledged} spans acknowledged; answers {statuses}:\n{serve.output()[-3000:]}"
        _assert_writable_and_complete(serve.match["http"], session.session_id, acknowledged, "running")
    finally:
        assert serve.stop(30) == 0, serve.output()[-3000:]

    serve = procs.start_serve(db, "--diagnose", "off", env=env)  # the same limit: no larger one needed
    try:
        _assert_writable_and_complete(serve.match["http"], session.session_id, acknowledged, "after a restart")
    finally:
        assert serve.stop(30) == 0, serve.output()[-3000:]


def test_a_wal_larger_than_the_memory_limit_is_folded_in_at_start(tmp_path):
    """A file a collector left with a WAL larger than the limit (killed, or stopped by the bug
    this file tests, before the fix): the next start replays and checkpoints it with DuckDB's
    own limit, then writes and reads at the small one. Before the fix the replayed rows sat in
    the small limit and the next commit or checkpoint ran out of memory, at every restart."""
    db = tmp_path / "left.duckdb"
    roomy = {"TRACEFIX_DB_MEMORY_LIMIT": "2GB", "TRACEFIX_CHECKPOINT_THRESHOLD": "1GB", "TRACEFIX_TOKEN": ""}
    serve = procs.start_serve(db, "--diagnose", "off", env=roomy)
    session = LongPrompts(f"left-{uuid.uuid4().hex[:8]}", message_kb=200)
    try:
        for _ in range(15):  # 90 MB, no checkpoint at these settings
            assert export_retrying(serve.match["http"], session.request(SPANS_PER_REQUEST))
    finally:
        serve.popen.send_signal(signal.SIGKILL)
        serve.popen.wait()
    assert (tmp_path / "left.duckdb.wal").stat().st_size > 80 << 20

    serve = procs.start_serve(db, "--diagnose", "off", env={"TRACEFIX_DB_MEMORY_LIMIT": "64MB", "TRACEFIX_TOKEN": ""})
    try:
        _assert_writable_and_complete(serve.match["http"], session.session_id, 15 * SPANS_PER_REQUEST, "started")
    finally:
        assert serve.stop(30) == 0, serve.output()[-3000:]


def test_reads_of_long_messages_the_running_collector_wrote_answer_at_a_small_limit(tmp_path):
    """DuckDB reads a row the running process wrote a whole vector of its string column at a
    time: one 100 KB message of the session list costs far more than a 64MB limit holds (the
    full run: ~350-500 MB for 200 KB messages against 256MB). Before the retry with room
    (collector/api/read_room.py), the session's page answered 500 while the collector ran."""
    db = tmp_path / "reads.duckdb"
    serve = procs.start_serve(db, "--diagnose", "off", env={"TRACEFIX_DB_MEMORY_LIMIT": "64MB", "TRACEFIX_TOKEN": ""})
    session = LongPrompts(f"reads-{uuid.uuid4().hex[:8]}", message_kb=MESSAGE_KB)
    try:
        for _ in range(30):  # 900 spans, 90 MB of messages
            assert export_retrying(serve.match["http"], session.request(SPANS_PER_REQUEST))
        for path in ("/api/v1/sessions", f"/api/v1/sessions/{session.session_id}", "/api/v1/sessions",
                     f"/session?id={session.session_id}", "/"):  # the web UI reads the same rows
            status, body = get(serve.match["http"] + path)
            assert status == 200, f"GET {path} answered {status}: {body[:300]!r}"
        status, body = export(serve.match["http"], session.request(3))  # the limit is the small one again
        assert status == 200, body[:300]
    finally:
        assert serve.stop(30) == 0, serve.output()[-3000:]
