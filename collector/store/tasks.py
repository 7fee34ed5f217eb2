"""Each session's task, stored in its row (`sessions.task`, migration 12) so that the session
list sorts and filters by it without reading messages: computed at ingest for the sessions a
batch touches, with document.task_of over what the list read before (the session's metadata
and inputs, else the first user message of its step 0), and by migration 12 for a store made
before the column (backfill_tasks). At 100k sessions, computing it in SQL on every read cost
0.4-0.5 s a list page."""
from __future__ import annotations

from typing import Callable, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from tracefix.attributes import from_json_text
from tracefix.collector import document
from tracefix.collector.jsonsafe import utf8
from tracefix.collector.store.lake_appends import SESSION_ROWS
from tracefix.collector.store.sql import in_strings


BACKFILL_CHUNK = 20_000  # sessions whose first messages one backfill query reads


def backfill_tasks(con) -> None:
    """Migration 12's data step: every stored session's task, read as at ingest (in Python:
    document.task_of over the typed messages: the SQL the sort used before read a message
    without a string role as no user's, where typed_message reads it as a user's), a chunk of
    sessions at a time."""
    ids = [sid for (sid,) in con.execute("SELECT session_id FROM sessions ORDER BY session_id").fetchall()]
    for i in range(0, len(ids), BACKFILL_CHUNK):
        _chunk = pa.table({"session_id": pa.array(ids[i:i + BACKFILL_CHUNK], pa.string())})  # noqa: F841 (by name)
        rows = con.execute(
            """SELECT s.session_id, s.metadata, s.inputs, sp.kind, sp.input_keys, sp.output_key
               FROM _chunk c JOIN sessions s ON s.session_id = c.session_id
               LEFT JOIN steps st ON st.session_id = s.session_id AND st.idx = 0
               LEFT JOIN spans sp ON sp.session_id = st.session_id AND sp.trace_id = st.trace_id
                                  AND sp.span_id = st.span_id""").fetchall()
        named = {sid: document.task_of(from_json_text(metadata), from_json_text(inputs), [])
                 for sid, metadata, inputs, *_ in rows}
        first_keys = {sid: _said_too(kind, keys, out) for sid, _, _, kind, keys, out in rows if named[sid] is None}
        _keys = pa.table({"key": pa.array(sorted({k for keys in first_keys.values() for k in keys}),  # noqa: F841
                                          pa.int64())})
        texts = dict(con.execute("SELECT m.key, m.message FROM messages m JOIN _keys k ON m.key = k.key").fetchall())
        tasks = {sid: _task(named[sid], first_keys.get(sid, []), texts) for sid in named}
        _write(con, {sid: task for sid, task in tasks.items() if task is not None})


def _task(named: str | None, first_keys: list[int], texts: dict[int, str]) -> str | None:
    """A session's task as stored: the one its metadata or inputs name, else its first user
    message's (`first_keys`, read from `texts`), as a VARCHAR holds it: a lone UTF-16 surrogate
    (JSON's "\\ud800" decodes to one, and inputs are kept as sent) has no UTF-8 form, so it is
    stored as U+FFFD, as every answer writes it (jsonsafe.utf8); the batch's spans were refused
    whole before."""
    task = named or _first_user(first_keys, texts)
    return utf8(task).decode("utf-8") if task else task


def batch_tasks(session_ids: list[str], sessions: dict[str, dict], steps: pa.Table | None, spans: pa.Table | None,
                batch_messages: dict[int, tuple[str, str]]) -> dict[str, str | None]:
    """The tasks of sessions a batch creates, read from the batch alone (their fields in it,
    `sessions`; their steps and span rows, all in it; its messages: key -> (sha256, text))."""
    named = {sid: document.task_of(from_json_text(sessions[sid].get("metadata")),
                                   from_json_text(sessions[sid].get("inputs")), []) for sid in session_ids}
    unnamed = {sid for sid, task in named.items() if task is None}
    first_keys = _first_step_keys(None, unnamed, steps, spans) if unnamed else {}
    texts = {k: batch_messages[k][1] for keys in first_keys.values() for k in keys if k in batch_messages}
    return {sid: _task(named[sid], first_keys.get(sid, []), texts) for sid in session_ids}


def store_tasks(con, sessions: dict[str, dict], new: set[str], adopted: set[str], steps: pa.Table | None,
                spans: pa.Table | None, batch_messages: dict[int, tuple[str, str]],
                stored_texts: Callable[[set[int]], dict[int, str]], versions: bool = False) -> None:
    """Set `sessions.task` of the sessions a batch touched and did not create (`sessions`:
    their fields in it; `new`: those it created, whose task batch_tasks gave their rows;
    `adopted`: those that took in a trace's stored spans) where it may have changed: one
    whose metadata or inputs the batch names, whose step 0 is in the batch or was adopted. `steps`: the steps just numbered for them; `spans`:
    the batch's span rows; messages are read from the batch (`batch_messages`: key ->
    (sha256, text)), else by `stored_texts` (keys -> texts). `versions`: a lake's, whose task changes append
    a version of the row (lake_appends)."""
    first_spans: dict[str, str] = {}
    if steps is not None and steps.num_rows:
        firsts = steps.filter(pc.equal(steps["idx"], 0))
        first_spans = dict(zip(firsts["session_id"].to_pylist(), firsts["span_id"].to_pylist()))
    in_batch: set[str] = set()
    if spans is not None and first_spans:
        shown = pc.is_in(spans["span_id"], value_set=pa.array(list(first_spans.values()), pa.string()))
        in_batch = set(spans.filter(shown)["span_id"].to_pylist())
    old = [sid for sid, fields in sessions.items() if sid not in new and (
        sid in adopted or first_spans.get(sid) in in_batch
        or fields.get("metadata") is not None or fields.get("inputs") is not None)]
    if not old:
        return
    in_old, params = in_strings(old)
    rows = con.execute(f"SELECT session_id, metadata, inputs, task FROM sessions WHERE session_id {in_old}",
                       params).fetchall()
    named = {sid: document.task_of(from_json_text(metadata), from_json_text(inputs), [])
             for sid, metadata, inputs, _ in rows}
    unnamed = {sid for sid, task in named.items() if task is None}
    first_keys = _first_step_keys(con, unnamed, steps, spans) if unnamed else {}
    texts = {k: batch_messages[k][1] for keys in first_keys.values() for k in keys if k in batch_messages}
    missing = {k for keys in first_keys.values() for k in keys if k not in texts}
    if missing:
        texts.update(stored_texts(missing))
    changed: dict[str, str | None] = {}
    for sid, _, _, stored in rows:
        task = _task(named[sid], first_keys.get(sid, []), texts)
        if task != stored:
            changed[sid] = task
    _write(con, changed, versions)


def _first_user(keys: list[int], texts: dict[int, str]) -> str | None:
    """The task a session's first messages give (document.task_of), each parsed only until it is found."""
    return document.task_of(None, None, (document.stored_message(texts[k]) for k in keys if k in texts))


def _said_too(kind: str | None, keys: list[int] | None, output_key: int | None) -> list[int]:
    """Where a step's task may be, by message key: its input messages, and what a message step said."""
    return list(keys or []) + ([output_key] if kind == "message" and output_key is not None else [])


def _write(con, tasks: dict[str, str | None], versions: bool = False) -> None:
    if tasks:
        _task_batch = pa.table({"session_id": pa.array(list(tasks), pa.string()),  # noqa: F841 (scanned by name)
                                "task": pa.array(list(tasks.values()), pa.string())})
        if versions:  # an append commutes with other collectors' writes where an UPDATE would not
            con.execute(f"INSERT INTO {SESSION_ROWS} SELECT s.* REPLACE (u.task AS task, s.updated_ns + 1 AS updated_ns) "
                        "FROM sessions s JOIN _task_batch u USING (session_id)")
        else:
            con.execute("UPDATE sessions SET task = u.task FROM _task_batch u WHERE sessions.session_id = u.session_id")


def _first_step_keys(con, session_ids: set[str], steps: pa.Table | None, spans: pa.Table | None
                     ) -> dict[str, list[int]]:
    """The messages of each session's step 0 where its task may be, by key, in order (what
    StoreReads._first_messages reads): its input messages, and what a message step said."""
    if steps is None or not steps.num_rows:
        return {}
    firsts = steps.filter(pc.and_(pc.equal(steps["idx"], 0),
                                  pc.is_in(steps["session_id"], value_set=pa.array(list(session_ids), pa.string()))))
    wanted = dict(zip(firsts["span_id"].to_pylist(), firsts["session_id"].to_pylist()))
    found: dict[str, tuple] = {}
    if spans is not None:
        here = spans.filter(pc.is_in(spans["span_id"], value_set=pa.array(list(wanted), pa.string())))
        for sid, span_id, kind, keys, out in zip(*(here[c].to_pylist() for c in (
                "session_id", "span_id", "kind", "input_keys", "output_key"))):
            if wanted.get(span_id) == sid:
                found[sid] = (kind, keys, out)
    rest = [(span_id, sid, start) for span_id, sid, start in zip(
        firsts["span_id"].to_pylist(), firsts["session_id"].to_pylist(), firsts["started_ns"].to_pylist())
        if sid not in found]
    if rest and con is not None:  # step 0 stored by an earlier batch: its span is found by its start time first
        starts = [start for *_, start in rest if start is not None]
        lo, hi = (min(starts), max(starts)) if starts else (document.INT64_MIN, document.INT64_MAX)
        in_spans, span_params = in_strings([span_id for span_id, *_ in rest])
        in_sessions, session_params = in_strings([sid for _, sid, _ in rest])
        for sid, span_id, kind, keys, out in con.execute(
                f"SELECT session_id, span_id, kind, input_keys, output_key FROM spans WHERE start_ns BETWEEN "
                f"{int(lo)} AND {int(hi)} AND span_id {in_spans} AND session_id {in_sessions}",
                span_params + session_params).fetchall():
            if wanted.get(span_id) == sid:
                found[sid] = (kind, keys, out)
    return {sid: _said_too(kind, keys, out) for sid, (kind, keys, out) in found.items()}
