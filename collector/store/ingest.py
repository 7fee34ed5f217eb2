"""Writing batches: messages once by key, sessions merged, spans and snapshots without
duplicates, steps numbered; feedback carried by spans goes through the outbox."""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from tracefix.collector import document
from tracefix.collector.keyset import KeySet
from tracefix.collector.normalize import Batch, merge_session
from tracefix.collector.store.lake_appends import appended_steps, sessions_table
from tracefix.collector.store.outbox import FeedbackOutbox
from tracefix.collector.store.schema import SESSION_FIELDS, SESSION_SCHEMA
from tracefix.collector.store.signals import insert_signals
from tracefix.collector.store.steps import STEP_SOURCE_COLUMNS, BatchSteps, numbered_steps
from tracefix.collector.store.stored_sessions import StoredSessions
from tracefix.collector.store.sql import distinct_spans, in_strings
from tracefix.collector.store.tasks import batch_tasks, store_tasks


def _tasks_in_batch(batch: Batch, spans: pa.Table | None, session_ids: list[str],
                    steps: BatchSteps | None = None) -> dict[str, str | None]:
    """The tasks of sessions all of whose spans are in the batch (new ones), from the batch alone."""
    numbered = (steps or BatchSteps(spans)).of(session_ids)
    return batch_tasks(session_ids, batch.sessions, numbered, spans, batch.messages)


def _merge_expressions() -> dict[str, str]:
    out = {}
    for f in SESSION_FIELDS[1:]:
        if f == "started_ns":
            out[f] = "least(sessions.started_ns, u.started_ns)"
        elif f == "ended_ns":
            out[f] = "greatest(sessions.ended_ns, u.ended_ns)"
        elif f == "replayable":  # false wins: one truncated span makes the session not replayable
            out[f] = ("CASE WHEN sessions.replayable = false OR u.replayable = false "
                      "THEN false ELSE coalesce(u.replayable, sessions.replayable) END")
        elif f == "source":
            out[f] = "coalesce(sessions.source, u.source)"
        else:
            out[f] = f"coalesce(u.{f}, sessions.{f})"
    return out


_MERGE_SESSION = [f"{f} = {e}" for f, e in _merge_expressions().items()]
# on a lake the merged row is appended as the session's latest version (lake_appends), after the stored one
_MERGED_VERSION = ["u.session_id"] + [e for f, e in _merge_expressions().items() if f != "updated_ns"] \
    + ["greatest(u.updated_ns, sessions.updated_ns + 1)", "sessions.task"]


class Ingest(FeedbackOutbox):
    """Batches in, one transaction each. Feedback that spans carry (evaluation events) goes
    through the outbox of its base class, in the same transaction."""

    _stored_sessions: StoredSessions | None = None  # on a DuckDB file: the session ids it may hold

    def ingest(self, batch: Batch, *, alert_threshold: float = 0.0, webhooks: Iterable[str] = (),
               public_url: str | None = None) -> dict:
        """Store one batch in one transaction; returns what it created (feedback, alerts, jobs)."""
        hooks = list(webhooks)  # on a lake the transaction may run twice (lake.LakeLock.run)
        created, message_keys = self._write_batch(
            batch, lambda con: self._ingest(con, batch, alert_threshold, hooks, public_url))
        self._remember_messages(message_keys)
        return created

    def _new_messages(self, con, batch: Batch) -> list[int]:
        """Keys of the batch's messages not stored yet. On a DuckDB file this store is the
        only writer (DuckDB lets one process write; the collector has one Store), so the keys
        it loaded and added since are exactly the stored ones. On a lake other collectors add
        messages too: the keys this store does not know are looked up in the table (under the
        lake's write lock, so the answer holds until this transaction commits)."""
        if self._message_keys is None:
            stored = con.execute("SELECT key FROM messages").to_arrow_table().column("key")
            self._message_keys = KeySet(stored.to_numpy())
        missing = self._message_keys.missing(list(batch.messages))
        if missing and self.shared:
            found = [k for (k,) in con.execute(f"SELECT key FROM messages WHERE key IN ({', '.join(map(str, missing))})"
                                               ).fetchall()]
            if found:
                self._message_keys.add(found)
                known = set(found)
                missing = [k for k in missing if k not in known]
        return missing

    def _remember_messages(self, keys: list[int]) -> None:
        """Keys this writer committed: stored from now on (not loaded yet: the load reads them)."""
        if self._message_keys is not None:
            self._message_keys.add(keys)

    def _ingest(self, con, batch: Batch, alert_threshold: float, webhooks: list[str],
                public_url) -> tuple[dict, list[int]]:
        """Write one batch in the caller's transaction. Returns what it created (feedback,
        alerts, jobs) and the keys of the messages it inserted, stored once it commits."""
        named = {t: batch.explicit_traces[t] for t in batch.fallback_traces if t in batch.explicit_traces}
        if named:  # a request merged into this batch names the session its trace's other spans lacked
            batch.reassign(named)
        if batch.fallback_traces:  # rare: foreign spans that name their session on some spans only
            in_traces, params = in_strings(batch.fallback_traces)
            found = con.execute(f"SELECT trace_id, any_value(session_id) FROM spans WHERE trace_id {in_traces} "
                                "AND session_id <> trace_id GROUP BY trace_id", params).fetchall()
            batch.reassign(dict(found))
        # The Arrow tables of a transaction reach DuckDB as local variables its SQL names
        # (DuckDB's replacement scans; no table is called `_..._batch`): con.register and
        # unregister cost ~0.8 ms per table, and a transaction has up to six.
        keys = self._new_messages(con, batch)
        if keys:
            _msg_batch = pa.table({"key": pa.array(keys, pa.int64()),  # noqa: F841 (scanned by name)
                                   "sha256": pa.array([batch.messages[k][0] for k in keys], pa.string()),
                                   "message": pa.array([batch.messages[k][1] for k in keys], pa.string())})
            con.execute("INSERT INTO messages SELECT * FROM _msg_batch")
        table = batch.span_arrow()
        if table is not None and not table.num_rows:
            table = None
        # Sessions first: a span is written in the same transaction as its session's row, so
        # only spans of sessions that existed before can be stored already (an exporter retry).
        # A span stored before its trace's session was known sits in the trace id's session.
        touched = list(batch.sessions)
        batch_steps = BatchSteps(table)
        span_range, existed = None, table is not None
        new_sessions: set[str] = set()
        adopted: dict[str, str] = {}
        if batch.sessions:
            trace_ids = pc.unique(table["trace_id"]).to_pylist() if table is not None else []
            span_range, new_sessions, existed, adopted = self._upsert_sessions(
                con, batch.sessions, source="otlp", fallback_ids=trace_ids, owners=batch.explicit_traces,
                new_tasks=lambda ids: _tasks_in_batch(batch, table, ids, batch_steps))
            if adopted:
                self._adopt_trace_sessions(con, adopted, span_range)
        # fresh: every span of the batch was new, so none of its snapshots can be stored yet
        fresh, source = True, "_span_batch"
        if table is not None:
            table = _span_batch = table.combine_chunks()  # one chunk per column: scanned ~30% faster
            unique = distinct_spans(table) if batch.merged else table.num_rows
            if unique != table.num_rows:  # requests merged into one transaction repeat a span (a retry)
                source = "(SELECT DISTINCT ON (trace_id, span_id) * FROM _span_batch)"
            if existed:
                # a retried span has the same start time: only row groups overlapping the batch's
                # time range are read (zonemaps), so this stays cheap as the table grows
                lo, hi = (int(x.as_py()) for x in pc.min_max(table["start_ns"]).values())
                inserted = con.execute(f"""INSERT INTO spans SELECT b.* FROM {source} b WHERE NOT EXISTS (
                                    SELECT 1 FROM spans s WHERE s.start_ns BETWEEN {lo} AND {hi}
                                    AND s.trace_id = b.trace_id AND s.span_id = b.span_id)""").fetchone()[0]
            else:  # only new sessions: nothing stored to compare against
                inserted = con.execute(f"INSERT INTO spans SELECT * FROM {source}").fetchone()[0]
            fresh = inserted == unique
        if batch.snapshots:  # one copy per (span, event) even when a retry shares the batch
            s = list({(x.trace_id, x.span_id, x.seq): x for x in reversed(batch.snapshots)}.values())
            _snap_batch = pa.table({  # noqa: F841 (scanned by name)
                "session_id": [x.session_id for x in s], "trace_id": [x.trace_id for x in s],
                "span_id": [x.span_id for x in s], "seq": pa.array([x.seq for x in s], pa.int32()),
                "key": [x.key for x in s], "state": [x.state for x in s], "hash": pa.array([x.hash for x in s], pa.string()),
                "step": pa.array([x.step for x in s], pa.int32()), "time_ns": pa.array([x.time_ns for x in s], pa.int64())})
            if fresh:
                con.execute("INSERT INTO snapshots SELECT * FROM _snap_batch")
            else:
                lo, hi = int(min(x.time_ns for x in s)), int(max(x.time_ns for x in s))
                con.execute(f"""INSERT INTO snapshots SELECT b.* FROM _snap_batch b WHERE NOT EXISTS (
                                   SELECT 1 FROM snapshots s WHERE s.time_ns BETWEEN {lo} AND {hi}
                                   AND s.trace_id = b.trace_id AND s.span_id = b.span_id AND s.seq = b.seq)""")
        if touched:
            steps = self._derive_steps(con, touched, span_range, new_sessions=new_sessions, batch=batch_steps)
            store_tasks(con, batch.sessions, new_sessions, set(adopted.values()), steps, table, batch.messages,
                        lambda keys: self._message_texts(keys, con),  # the older sessions' tasks
                        versions=self.shared)
        insert_signals(con, batch)  # OTLP logs' and metrics' rows (their messages are in `keys`)
        created: dict[str, list[dict]] = {"feedback": [], "alerts": [], "jobs": []}
        for ev in batch.evaluations:
            exists = con.execute("SELECT 1 FROM feedback WHERE feedback_id = ?", [ev.feedback_id]).fetchone()
            if exists:
                continue
            res = self._add_feedback(con, ev.session_id, ev.score, ev.comment, source="span_event",
                                     feedback_id=ev.feedback_id, created_ns=ev.time_ns,
                                     alert_threshold=alert_threshold, webhooks=webhooks, public_url=public_url)
            for k in created:
                created[k].extend(res[k])
        return created, keys

    def _upsert_sessions(self, con, sessions: dict[str, dict], source: str, fallback_ids: Iterable[str] = (),
                         owners: dict[str, str] | None = None,
                         new_tasks: Callable[[list[str]], dict[str, str | None]] | None = None
                         ) -> tuple[tuple, set[str], bool, dict[str, str]]:
        """Insert new sessions; merge fields into known ones (an UPDATE is much cheaper than
        INSERT ... ON CONFLICT in DuckDB 1.5 for the common all-new case). Returns the time
        range the touched sessions' spans start in, after the merge, the new sessions' ids,
        whether any of them or of `fallback_ids` (the batch's trace ids) was stored before, and
        the stored sessions named by a trace id that `owners` (trace id -> session named in
        this batch) now names: {trace id: session}. Their fields are merged here (this
        batch's win); `_adopt_trace_sessions` moves what they hold. `new_tasks`: the tasks of
        new sessions whose spans are all in the batch, stored with their rows (store_tasks sets
        the others' after their steps)."""
        now = time.time_ns()
        sessions = dict(sessions)
        ids = list(sessions)
        looked_up = ids + [t for t in fallback_ids if t not in sessions]
        if not self.shared:  # ids this store never wrote are not stored: new sessions read nothing
            self._stored_sessions = self._stored_sessions or StoredSessions()
            looked_up = self._stored_sessions.maybe_stored(con, looked_up)
        in_ids, params = in_strings(looked_up)
        stored = con.execute(f"SELECT session_id, started_ns, ended_ns FROM sessions WHERE session_id {in_ids}",
                             params).fetchall() if looked_up else []
        existed = bool(stored)
        owners = owners or {}
        adopted = {sid: owners[sid] for sid, _, _ in stored
                   if sid not in sessions and owners.get(sid, sid) != sid and owners[sid] in sessions}
        if adopted:  # read their whole rows
            in_adopted, params = in_strings(adopted)
            in_source, source_params = in_strings([source])
            # Only a session this source made of a trace's spans: an imported session is its own,
            # and (rare) one holding spans of another trace is no trace's session but one named so.
            rows = con.execute(f"SELECT {', '.join(SESSION_FIELDS)} FROM sessions s WHERE session_id {in_adopted} "
                               f"AND source {in_source} AND NOT EXISTS (SELECT 1 FROM spans "
                               "WHERE spans.session_id = s.session_id AND spans.trace_id <> spans.session_id)",
                               params + source_params).fetchall()
            adopted = {row[0]: adopted[row[0]] for row in rows}
            for row in rows:
                owner = adopted[row[0]]
                fields = {f: v for f, v in zip(SESSION_FIELDS, row) if f not in ("session_id", "source", "updated_ns")}
                merge_session({owner: fields}, owner, sessions[owner])
                sessions[owner] = fields
        stored = [(sid, started, ended) for sid, started, ended in stored if sid in sessions]
        known = {sid for sid, _, _ in stored}
        starts = [started for _, started, _ in stored] + [f.get("started_ns") for f in sessions.values()]
        ends = [ended for _, _, ended in stored] + [f.get("ended_ns") for f in sessions.values()] + starts
        starts = [x for x in starts if x is not None]
        ends = [x for x in ends if x is not None]
        span_range = (min(starts) if starts else None, max(ends) if ends else None)
        for part, is_new in (([i for i in ids if i not in known], True), ([i for i in ids if i in known], False)):
            if not part:
                continue
            cols: dict[str, list[Any]] = {f: [] for f in SESSION_FIELDS}
            for sid in part:
                fields = sessions[sid]
                for f in SESSION_FIELDS:
                    cols[f].append(sid if f == "session_id" else source if f == "source"
                                   else now if f == "updated_ns" else fields.get(f))
            _sess_batch = pa.Table.from_arrays(  # noqa: F841 (scanned by name, see _ingest)
                [pa.array(cols[f], type=SESSION_SCHEMA.field(f).type) for f in SESSION_FIELDS], schema=SESSION_SCHEMA)
            if is_new:
                # an UPDATE of the rows just inserted cost a tenth of a batch's CPU: the task goes in with them
                taking = set(adopted.values())  # spans stored under a trace id: not all in the batch
                tasks = new_tasks([sid for sid in part if sid not in taking]) if new_tasks else {}
                _sess_batch = _sess_batch.append_column("task", pa.array([tasks.get(sid) for sid in part], pa.string()))
                con.execute(f"INSERT INTO {sessions_table(self.shared)} ({', '.join(SESSION_FIELDS)}, task) "
                            "SELECT * FROM _sess_batch")
                if self._stored_sessions is not None:
                    self._stored_sessions.written(part)
            elif self.shared:  # an append commutes with other collectors' writes (lake_appends)
                con.execute(f"INSERT INTO {sessions_table(True)} ({', '.join(SESSION_FIELDS)}, task) SELECT "
                            + ", ".join(_MERGED_VERSION) + " FROM _sess_batch u JOIN sessions USING (session_id)")
            else:
                con.execute("UPDATE sessions SET " + ", ".join(_MERGE_SESSION)
                            + " FROM _sess_batch u WHERE sessions.session_id = u.session_id")
        # a session that adopts stored spans is not new: its steps are read from the table
        return span_range, set(ids) - known - set(adopted.values()), existed, adopted

    def _adopt_trace_sessions(self, con, adopted: dict[str, str], span_range: tuple) -> None:
        """Move what sessions named by a trace id hold into the session the trace turned out
        to belong to, and drop them. A span without a session attribute that reaches the store
        before any span of its trace naming one is stored under its trace id; that is the
        common order, since children end, and so are exported, before the root that names
        the session (a batch processor cuts between them at any batch boundary)."""
        lo, hi = span_range if None not in span_range else (document.INT64_MIN, document.INT64_MAX)
        for trace_id, sid in adopted.items():
            con.execute(f"UPDATE spans SET session_id = ? WHERE start_ns BETWEEN {int(lo)} AND {int(hi)} "
                        "AND session_id = ? AND trace_id = ?", [sid, trace_id, trace_id])
            for table in ("snapshots", "feedback", "step_annotations", "alerts", "jobs"):
                con.execute(f"UPDATE {table} SET session_id = ? WHERE session_id = ?", [sid, trace_id])
            con.execute("DELETE FROM steps WHERE session_id = ?", [trace_id])
            con.execute(f"DELETE FROM {sessions_table(self.shared)} WHERE session_id = ?", [trace_id])

    def _derive_steps(self, con, session_ids: list[str], span_range: tuple | None = None, *,
                      new_sessions: set | frozenset = frozenset(), batch: BatchSteps | None = None
                      ) -> pa.Table | None:
        """Number a session's decisions 0..n-1 (`numbered_steps`). Sessions in `new_sessions`
        were created in this transaction: they have no steps to delete, and all their spans
        are in `batch` (this batch's spans), so the spans table is read only for sessions that
        existed before. Returns the steps it numbered (every step of these sessions)."""
        if batch is None or batch.spans is None:
            new_sessions = frozenset()
        old = [sid for sid in session_ids if sid not in new_sessions]
        parts = []
        if batch is not None and len(old) < len(session_ids):  # new sessions: their spans are all in the batch
            parts.append(batch.of(new_sessions))
        appended = None
        if old:
            in_old, params = in_strings(old)
            # a session's spans start within [started_ns, ended_ns] of its row: prune by time first
            lo, hi = span_range if span_range and None not in span_range else (document.INT64_MIN, document.INT64_MAX)
            parts.append(numbered_steps(con.execute(
                f"SELECT {', '.join(STEP_SOURCE_COLUMNS)} FROM spans WHERE start_ns BETWEEN {int(lo)} AND {int(hi)} "
                f"AND kind IN ('llm', 'message') AND session_id {in_old}", params).to_arrow_table()))
            if self.shared:  # on a lake, steps that only follow the stored ones are appended (lake_appends)
                appended = appended_steps(con.execute(f"SELECT * FROM steps WHERE session_id {in_old}",
                                                      params).to_arrow_table(), parts[-1])
            if appended is None:
                con.execute(f"DELETE FROM steps WHERE session_id {in_old}", params)
        _steps_batch = pa.concat_tables(parts) if parts else None
        _new_steps = _steps_batch if appended is None else pa.concat_tables(parts[:-1] + [appended])
        if _new_steps is not None and _new_steps.num_rows:
            con.execute("INSERT INTO steps SELECT * FROM _new_steps")  # scanned by name, see _ingest
        return _steps_batch

    # --- import of message-log sessions ------------------------------------------------------
    def import_new_sessions(self, docs: list[dict]) -> tuple[list[str], list[str]]:
        """Import the documents whose session id is not stored yet: (ids imported, ids left out
        as stored already). An import run again leaves what it stored the first time as it was;
        `import_sessions` would write each document over its stored session, message by message
        at the same positions. Writes are serialized (the collector's writer, or one process on
        the file), so no other import lands in between."""
        if not isinstance(docs, list):
            return self.import_sessions(docs), []  # which refuses it, saying why
        named = [str(doc["session_id"]) for doc in docs if isinstance(doc, dict) and doc.get("session_id")]
        stored: set[str] = set()
        if named:
            in_named, params = in_strings(named)
            stored = {sid for (sid,) in self._read().execute(
                f"SELECT session_id FROM sessions WHERE session_id {in_named}", params).fetchall()}
        fresh, skipped = [], []
        for doc in docs:  # a session named twice in the request is imported once, too
            sid = str(doc.get("session_id") or "") if isinstance(doc, dict) else ""
            if sid and sid in stored:
                skipped.append(sid)
            else:
                fresh.append(doc)
                if sid:
                    stored.add(sid)
        return (self.import_sessions(fresh) if fresh else []), skipped

    def import_sessions(self, docs: list[dict]) -> list[str]:
        from tracefix.collector.imports import batch_from_documents

        batch, ids = batch_from_documents(docs)
        with self._tx() as con:
            _, message_keys = self._ingest(con, batch, 0.0, [], None)
            in_ids, params = in_strings(ids)
            con.execute(f"UPDATE {sessions_table(self.shared)} SET source = 'import' WHERE session_id {in_ids}",
                        params)
        self._remember_messages(message_keys)
        return ids
