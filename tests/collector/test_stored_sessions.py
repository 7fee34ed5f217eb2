"""A batch of new sessions reads nothing of the sessions table before it writes them
(collector/store/stored_sessions.py: the store knows the ids it holds), and what that read was
for still holds: a retried request stores its spans once, a session's later request merges
into it, a trace's spans stored before its session was named are adopted, also by a store
opened again on the file (which loads the ids)."""
from __future__ import annotations

import uuid

from test_partial_success import good_chat, make_request, make_span

from tracefix.collector.normalize import normalize_request
from tracefix.collector.store import Store


def reads_of_sessions(store: Store) -> list[str]:
    """The statements DuckDB ran since its query log was switched on that read the sessions
    table by id."""
    rows = store.con.execute("SELECT message FROM duckdb_logs WHERE type = 'QueryLog'").fetchall()
    return [m for (m,) in rows if "FROM sessions WHERE session_id" in " ".join(m.split())]


def chats(sid: str, trace: bytes, steps: range):
    return normalize_request(make_request([good_chat(sid, trace, n) for n in steps]))


def unnamed_tool_span(trace: bytes, n: int):
    """A span of the trace that names no session: stored under its trace id until one does."""
    return normalize_request(make_request([make_span(trace, n, f"tool {n}", {"gen_ai.operation.name": "execute_tool",
                                                                             "gen_ai.tool.name": "lookup"})]))


def test_new_sessions_are_written_without_reading_the_sessions_table_and_merges_stay_exact(tmp_path):
    path = tmp_path / "known.duckdb"
    store = Store(path)
    try:
        store.ingest(chats(f"warm-{uuid.uuid4().hex[:6]}", uuid.uuid4().bytes, range(2)))  # loads the ids
        store.con.execute("CALL enable_logging('QueryLog')")
        sid, trace = f"new-{uuid.uuid4().hex[:6]}", uuid.uuid4().bytes
        store.ingest(chats(sid, trace, range(3)))
        assert reads_of_sessions(store) == [], "a batch of new sessions read the sessions table"

        store.ingest(chats(sid, trace, range(3)))  # the exporter's retry: its session is stored now
        store.ingest(chats(sid, trace, range(3, 5)))  # the session's later request
        assert reads_of_sessions(store), "a stored session was not looked up"
        assert sorted(s["name"] for s in store.get_spans(sid)) == [f"chat good-{n}" for n in range(5)]

        orphan = uuid.uuid4().bytes
        store.ingest(unnamed_tool_span(orphan, 7))  # stored under its trace id's session
    finally:
        store.close()
    store = Store(path)  # opened again: the ids are loaded from the file
    try:
        named = f"named-{uuid.uuid4().hex[:6]}"
        store.ingest(chats(named, orphan, range(2)))
        assert sorted(s["name"] for s in store.get_spans(named)) == ["chat good-0", "chat good-1", "tool 7"]
        assert store.get_session(orphan.hex()) is None  # the trace's session was adopted, not kept beside
        store.ingest(chats(sid, trace, range(5)))  # a retry after the restart: still once
        assert len(store.get_spans(sid)) == 5
    finally:
        store.close()
