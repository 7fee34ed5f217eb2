"""Reads of whole things: session lists, a session's document and spans, training sets."""
from __future__ import annotations

from typing import Any

from tracefix.collector import assemble, document
from tracefix.collector.contracts import SessionDocument
from tracefix.collector.store.annotations import annotation_rows
from tracefix.collector.store.filters import session_filter
from tracefix.collector.store.log_events import join_log_events
from tracefix.collector.store.reads import StoreReads
from tracefix.collector.store.schema import DOCUMENT_SPAN_COLUMNS, SESSION_FIELDS, SPAN_DICT_COLUMNS
from tracefix.collector.store.sorting import sorted_page
from tracefix.collector.store.sql import first_row, in_strings, records, scalar


class Queries(StoreReads):
    """Whole sessions and lists of them."""

    def session_exists(self, session_id: str) -> bool:
        return first_row(self._read().execute("SELECT 1 FROM sessions WHERE session_id = ?", [session_id])) is not None

    def list_sessions(self, feedback: str | None = None, outcome: str | None = None, service: str | None = None,
                      agent: str | None = None, since: Any = None, until: Any = None, limit: int = 50,
                      offset: int = 0, parent_session_id: str | None = None, sort: str = "time",
                      descending: bool = True, model: str | None = None, task: str | None = None,
                      diagnosis: str | None = None, min_cost: float | None = None,
                      max_cost: float | None = None) -> list[dict]:
        """A page of session summaries sorted by `sort` (sorting.SORTS: newest first by default),
        filtered as filters.session_filter says."""
        filtered, params = session_filter(outcome=outcome, service=service, feedback=feedback, agent=agent,
                                          since=since, until=until, parent_session_id=parent_session_id,
                                          model=model, task=task, diagnosis=diagnosis, min_cost=min_cost,
                                          max_cost=max_cost)
        cur = self._read()
        page_ids, _ = sorted_page(cur, filtered, params, sort, descending, limit, offset)
        if not page_ids:
            return []
        in_page, page_params = in_strings(page_ids)
        rows = records(cur.execute(
            f"""WITH page AS (SELECT * FROM sessions WHERE session_id {in_page}),
                agg AS (SELECT session_id, count(*) FILTER (WHERE kind IN ('llm', 'message')) AS n_steps,
                               list(DISTINCT agent) FILTER (WHERE agent IS NOT NULL) AS agents,
                               list(DISTINCT model) FILTER (WHERE model IS NOT NULL) AS models,
                               count(*) FILTER (WHERE error IS NOT NULL) AS n_errors,
                               count(*) AS n_spans, sum(cost_usd) AS cost_usd
                        FROM spans WHERE session_id IN (SELECT session_id FROM page) GROUP BY session_id),
                fb AS (SELECT session_id, arg_max(score, created_ns) AS last_score, count(*) AS n_feedback
                       FROM feedback WHERE session_id IN (SELECT session_id FROM page) GROUP BY session_id)
                SELECT page.session_id, page.service, page.name, page.entrypoint, page.outcome, page.score,
                       page.started_ns, page.ended_ns, page.parent_session_id, page.replayable, page.source,
                       agg.n_steps, agg.agents, agg.models, agg.n_errors, agg.n_spans, agg.cost_usd, fb.last_score, fb.n_feedback,
                       page.task
                FROM page LEFT JOIN agg USING (session_id) LEFT JOIN fb USING (session_id)""", page_params))
        position = {sid: n for n, sid in enumerate(page_ids)}
        rows.sort(key=lambda r: position[r["session_id"]])
        out = []
        for r in rows:
            out.append({
                "session_id": r["session_id"], "service": r["service"], "name": r["name"],
                "entrypoint": r["entrypoint"], "outcome": r["outcome"], "score": r["score"],
                "started_at": document.iso(r["started_ns"]), "ended_at": document.iso(r["ended_ns"]),
                "duration_ms": document.duration_ms(r["started_ns"], r["ended_ns"]),
                "parent_session_id": r["parent_session_id"],
                # the app's mark only; whether a replay runs it is the document's `replayable`
                "marked_replayable": bool(r["replayable"]),
                "source": r["source"], "steps": r["n_steps"] or 0, "agents": sorted(r["agents"] or []),
                "models": sorted(r["models"] or []), "errors": r["n_errors"] or 0, "spans": r["n_spans"] or 0,
                "cost_usd": r["cost_usd"],
                "feedback_score": r["last_score"], "feedback_count": r["n_feedback"] or 0,
                "task": r["task"],  # stored at ingest (tasks.py)
            })
        return out

    def get_spans(self, session_id: str) -> list[dict]:
        cur = self._read()
        lo, hi = self._time_range(cur, session_id)
        rows = records(cur.execute(
            f"""SELECT {', '.join(SPAN_DICT_COLUMNS)}
                FROM spans WHERE start_ns BETWEEN ? AND ? AND session_id = ? ORDER BY start_ns, span_id""",
            [lo, hi, session_id]))
        genai = [r for r in rows if r["message_dialect"] == "genai"]  # the dialect whose messages were moved out
        keys = {k for r in genai for k in (r["input_keys"] or [])}
        keys |= {r["output_key"] for r in genai if r["output_key"] is not None}
        keys |= {r["tools_key"] for r in rows if r["tools_key"] is not None}
        texts = {document.key_ref(k): t for k, t in self._iter_message_texts(keys, cur)}
        return [assemble.span_dict(r, texts) for r in rows]

    def get_session(self, session_id: str) -> SessionDocument | None:
        cur = self._read()
        srow = first_row(cur.execute(f"SELECT {', '.join(SESSION_FIELDS)} FROM sessions WHERE session_id = ?",
                           [session_id]))
        if srow is None:
            return None
        session = dict(zip(SESSION_FIELDS, srow))
        cols = DOCUMENT_SPAN_COLUMNS
        lo, hi = self._time_range(cur, session_id)
        spans = [dict(zip(cols, r)) for r in cur.execute(
            f"""SELECT {', '.join(cols)} FROM spans WHERE start_ns BETWEEN ? AND ? AND session_id = ?
                AND kind <> 'other' ORDER BY start_ns""", [lo, hi, session_id]).fetchall()]
        # spans of kind 'other' only matter as parents (agent inheritance); fetch the links alone
        join_log_events(cur, spans)  # messages the GenAI events of bare LLM spans carried
        links = dict(cur.execute("SELECT span_id, parent_span_id FROM spans WHERE start_ns BETWEEN ? AND ? "
                                 "AND session_id = ? AND kind = 'other'", [lo, hi, session_id]).fetchall())
        order = cur.execute("SELECT span_id, idx FROM steps WHERE started_ns BETWEEN ? AND ? AND session_id = ? "
                            "ORDER BY idx", [lo, hi, session_id]).fetchall()
        keys = {k for s in spans for k in (s["input_keys"] or [])} | {s["output_key"] for s in spans if s["output_key"]}
        messages = self._messages(keys, cur)
        snaps = cur.execute("SELECT span_id, key, state, step, time_ns FROM snapshots WHERE session_id = ? "
                            "ORDER BY time_ns, seq", [session_id]).fetchall()
        feedback = cur.execute("SELECT feedback_id, score, comment, source, created_ns FROM feedback "
                               "WHERE session_id = ? ORDER BY created_ns", [session_id]).fetchall()
        return assemble.build(session, spans, links, order, messages, snaps, feedback,
                              annotation_rows(cur, session_id))

    def training_sessions(self, criterion: str = "success", limit: int = 10_000) -> list[SessionDocument]:
        """The documents of the sessions to train on (training_session_ids), oldest first."""
        ids = self.training_session_ids(criterion)[:limit]
        return [d for d in (self.get_session(i) for i in ids) if d is not None]

    def training_session_ids(self, criterion: str = "success") -> list[str]:
        """The sessions to train on, oldest first: those that succeeded (`success`: by the
        evaluator or the latest feedback), that have positive latest feedback (`positive`), or
        all (`all`); never one with negative feedback."""
        if criterion == "success":
            cond = ("outcome = 'success' OR session_id IN (SELECT session_id FROM feedback "
                    "GROUP BY session_id HAVING arg_max(score, created_ns) > 0)")
        elif criterion == "positive":
            cond = "session_id IN (SELECT session_id FROM feedback GROUP BY session_id HAVING arg_max(score, created_ns) > 0)"
        elif criterion == "all":
            cond = "true"
        else:
            raise ValueError("criterion must be 'success', 'positive' or 'all'")
        return [r[0] for r in self._read().execute(
            f"SELECT session_id FROM sessions WHERE ({cond}) AND session_id NOT IN "
            f"(SELECT session_id FROM feedback WHERE score < 0) ORDER BY started_ns, session_id").fetchall()]

    def stats(self) -> dict:
        cur = self._read()
        # on a lake a message may be stored twice until `compact` (lake.py): counted once
        distinct = {"messages": "count(DISTINCT key)" if self.shared else "count(*)"}
        return {t: scalar(cur.execute(f"SELECT {distinct.get(t, 'count(*)')} FROM {t}"))
                for t in ("sessions", "spans", "messages", "steps", "snapshots", "feedback", "alerts", "jobs")}
