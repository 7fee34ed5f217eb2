"""The web UI's sessions page (tracefix.ui): one page of the sessions table, sorted,
filtered and searched, in one bounded read."""
from __future__ import annotations

from tracefix.collector import document
from tracefix.collector.store.filters import session_filter
from tracefix.collector.store.reads import StoreReads
from tracefix.collector.store.sorting import DIAGNOSIS_STATE, DIAGNOSIS_STATES, LAST_JOB, SORTS, sorted_page
from tracefix.collector.store.sql import in_strings, records, scalar


class Browse(StoreReads):
    """The sessions table: every column a person sorts or filters by, a page at a time."""

    # The sessions table of the web UI (tracefix.ui): sortable by these keys (sorting.SORTS)
    TABLE_SORTS = tuple(SORTS)
    TABLE_DIAGNOSIS = DIAGNOSIS_STATES

    def session_table(self, *, sort: str = "time", descending: bool = True, search: str | None = None,
                      outcome: str | None = None, service: str | None = None, feedback: str | None = None,
                      diagnosis: str | None = None, replay_children: bool = True, agent: str | None = None,
                      model: str | None = None, task: str | None = None, min_cost: float | None = None,
                      max_cost: float | None = None, since: int | None = None, until: int | None = None,
                      limit: int = 50, offset: int = 0) -> dict:
        """One page of sessions for the UI's table: `{"rows": [...], "total": n}`. Each row has the
        `list_sessions` summary fields plus `tokens` ({"input", "output"}) and `diagnosis` (the
        state of its latest job, else whether an analysis or replay is stored, else "none").
        `search` matches (case-insensitive) the id, service, name, entrypoint, inputs, metadata
        and output of a session; `outcome="none"` means no outcome recorded; `replay_children=False`
        leaves out the sessions replays ran; the other filters are filters.session_filter's."""
        filtered, params = session_filter(search=search, outcome=outcome, service=service, feedback=feedback,
                                          replay_children=replay_children, diagnosis=diagnosis, agent=agent,
                                          model=model, task=task, min_cost=min_cost, max_cost=max_cost,
                                          since=since, until=until)
        cur = self._read()
        page_ids, total = sorted_page(cur, filtered, params, sort, descending, limit, offset)
        if not page_ids:  # past the last page: the count alone
            return {"rows": [], "total": scalar(cur.execute(f"SELECT count(*) FROM sessions s WHERE {filtered}", params))}
        in_page, page_params = in_strings(page_ids)
        rows = records(cur.execute(
            f"""WITH last_job AS {LAST_JOB},
                page AS (SELECT * FROM sessions WHERE session_id {in_page}),
                agg AS (SELECT session_id, count(*) FILTER (WHERE kind IN ('llm', 'message')) AS n_steps,
                               list(DISTINCT agent) FILTER (WHERE agent IS NOT NULL) AS agents,
                               list(DISTINCT model) FILTER (WHERE model IS NOT NULL) AS models,
                               count(*) FILTER (WHERE error IS NOT NULL) AS n_errors,
                               sum(input_tokens) AS tokens_in, sum(output_tokens) AS tokens_out,
                               sum(cost_usd) AS cost_usd
                        FROM spans WHERE start_ns BETWEEN coalesce((SELECT min(started_ns) FROM page), {document.INT64_MIN})
                                 AND coalesce((SELECT max(greatest(started_ns, ended_ns)) FROM page), {document.INT64_MAX})
                        AND session_id {in_page} GROUP BY session_id),
                fb AS (SELECT session_id, arg_max(score, created_ns) AS last_score, count(*) AS n_feedback
                       FROM feedback WHERE session_id {in_page} GROUP BY session_id)
                SELECT s.session_id, s.service, s.name, s.outcome, s.score, s.started_ns, s.ended_ns,
                       s.parent_session_id, agg.n_steps, agg.agents, agg.models, agg.n_errors, agg.tokens_in, agg.tokens_out, agg.cost_usd,
                       fb.last_score, fb.n_feedback, {DIAGNOSIS_STATE} AS diagnosis, s.task
                FROM page s LEFT JOIN agg USING (session_id) LEFT JOIN fb USING (session_id)
                LEFT JOIN last_job j ON j.session_id = s.session_id
                LEFT JOIN analyses a ON a.session_id = s.session_id
                LEFT JOIN replays r ON r.session_id = s.session_id""",
            [*page_params, *page_params, *page_params]))
        by_id = {}
        for r in rows:
            sid = r["session_id"]
            by_id[sid] = {
                "session_id": sid, "service": r["service"], "name": r["name"], "outcome": r["outcome"],
                "score": r["score"], "started_at": document.iso(r["started_ns"]),
                "ended_at": document.iso(r["ended_ns"]),
                "duration_ms": document.duration_ms(r["started_ns"], r["ended_ns"]),
                "parent_session_id": r["parent_session_id"], "steps": r["n_steps"] or 0,
                "agents": sorted(r["agents"] or []), "models": sorted(r["models"] or []), "errors": r["n_errors"] or 0,
                "tokens": {"input": int(r["tokens_in"] or 0), "output": int(r["tokens_out"] or 0)},
                "cost_usd": r["cost_usd"],
                "feedback_score": r["last_score"], "feedback_count": r["n_feedback"] or 0,
                "diagnosis": r["diagnosis"],
                "task": r["task"],  # stored at ingest (tasks.py)
            }
        return {"rows": [by_id[sid] for sid in page_ids if sid in by_id], "total": total}
