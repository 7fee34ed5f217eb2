"""The web UI's sessions page (tracefix.ui): one page of the sessions table, sorted,
filtered and searched, in one bounded read."""
from __future__ import annotations

from tracefix.attributes import from_json_text
from tracefix.collector import document
from tracefix.collector.store.filters import session_filter
from tracefix.collector.store.reads import StoreReads
from tracefix.collector.store.sql import in_strings, records, scalar


class Browse(StoreReads):
    """The sessions table: every column a person sorts or filters by, a page at a time."""

    # The sessions table of the web UI (tracefix.ui): sortable by these keys. Keys of the sessions
    # row page first and aggregate the page only; the others aggregate every matching session.
    TABLE_SORTS = {"time": "b.started_ns", "service": "b.service", "latency": "b.ended_ns - b.started_ns",
                   "outcome": "b.outcome", "steps": "agg_steps.n", "tokens": "agg_tokens.n", "cost": "agg_cost.n",
                   "feedback": "agg_fb.last_score"}
    TABLE_DIAGNOSIS = ("none", "queued", "running", "analyzed", "replayed", "failed")

    def session_table(self, *, sort: str = "time", descending: bool = True, search: str | None = None,
                      outcome: str | None = None, service: str | None = None, feedback: str | None = None,
                      diagnosis: str | None = None, replay_children: bool = True, limit: int = 50,
                      offset: int = 0) -> dict:
        """One page of sessions for the UI's table: `{"rows": [...], "total": n}`. Each row has the
        `list_sessions` summary fields plus `tokens` ({"input", "output"}) and `diagnosis` (the
        state of its latest job, else whether an analysis or replay is stored, else "none").
        `search` matches (case-insensitive) the id, service, name, entrypoint, inputs, metadata
        and output of a session; `outcome="none"` means no outcome recorded; `replay_children=False`
        leaves out the sessions replays ran."""
        if sort not in self.TABLE_SORTS:
            raise ValueError(f"sort must be one of {', '.join(self.TABLE_SORTS)}")
        if diagnosis is not None and diagnosis not in self.TABLE_DIAGNOSIS:
            raise ValueError(f"diagnosis must be one of {', '.join(self.TABLE_DIAGNOSIS)}")
        filtered, params = session_filter(search=search, outcome=outcome, service=service, feedback=feedback,
                                          replay_children=replay_children)
        diagnosis_state = """(SELECT CASE WHEN j.state IN ('queued', 'running') THEN j.state
                                          WHEN j.state IN ('failed', 'refused') THEN 'failed'
                                          WHEN r.session_id IS NOT NULL THEN 'replayed'
                                          WHEN a.session_id IS NOT NULL THEN 'analyzed'
                                          WHEN j.state = 'done' THEN 'analyzed' ELSE 'none' END)"""
        jobs_cte = """last_job AS (SELECT session_id, arg_max(state, created_ns) AS state FROM jobs GROUP BY session_id)"""
        if diagnosis is not None:
            filtered += f""" AND s.session_id IN (SELECT s2.session_id FROM sessions s2
                                 LEFT JOIN last_job j ON j.session_id = s2.session_id
                                 LEFT JOIN analyses a ON a.session_id = s2.session_id
                                 LEFT JOIN replays r ON r.session_id = s2.session_id
                                 WHERE {diagnosis_state} = ?)"""
            params.append(diagnosis)
        order = f"{self.TABLE_SORTS[sort]} {'DESC' if descending else 'ASC'} NULLS LAST, b.session_id"
        needs = {"steps": "agg_steps", "tokens": "agg_tokens", "cost": "agg_cost", "feedback": "agg_fb"}.get(sort)
        aggregates = {
            "agg_steps": "SELECT session_id, count(*) AS n FROM steps {scope} GROUP BY session_id",
            "agg_tokens": "SELECT session_id, sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)) AS n "
                          "FROM spans WHERE kind IN ('llm', 'message') {and_scope} GROUP BY session_id",
            "agg_cost": "SELECT session_id, sum(cost_usd) AS n FROM spans WHERE kind = 'llm' {and_scope} "
                        "GROUP BY session_id",
            "agg_fb": "SELECT session_id, arg_max(score, created_ns) AS last_score FROM feedback {scope} "
                      "GROUP BY session_id",
        }
        sort_join = ""
        if needs:
            agg = aggregates[needs].format(scope="WHERE session_id IN (SELECT session_id FROM base)",
                                           and_scope="AND session_id IN (SELECT session_id FROM base)")
            sort_join = f"LEFT JOIN ({agg}) {needs} ON {needs}.session_id = b.session_id"
        cur = self._read()
        # the count rides on the page's own scan (a text search filters 100k rows once, not twice)
        found = records(cur.execute(
            f"""WITH {jobs_cte}, base AS (SELECT session_id, service, outcome, started_ns, ended_ns
                                          FROM sessions s WHERE {filtered})
                SELECT b.session_id, count(*) OVER () AS total FROM base b {sort_join}
                ORDER BY {order} LIMIT ? OFFSET ?""",
            [*params, int(limit), int(offset)]))
        page_ids = [r["session_id"] for r in found]
        if not page_ids:  # past the last page: the count alone
            total = scalar(cur.execute(f"WITH {jobs_cte} SELECT count(*) FROM sessions s WHERE {filtered}", params))
            return {"rows": [], "total": total}
        total = found[0]["total"]
        in_page, page_params = in_strings(page_ids)
        rows = records(cur.execute(
            f"""WITH {jobs_cte},
                page AS (SELECT * FROM sessions WHERE session_id {in_page}),
                agg AS (SELECT session_id, count(*) FILTER (WHERE kind IN ('llm', 'message')) AS n_steps,
                               list(DISTINCT agent) FILTER (WHERE agent IS NOT NULL) AS agents,
                               count(*) FILTER (WHERE error IS NOT NULL) AS n_errors,
                               sum(input_tokens) AS tokens_in, sum(output_tokens) AS tokens_out,
                               sum(cost_usd) AS cost_usd
                        FROM spans WHERE start_ns BETWEEN coalesce((SELECT min(started_ns) FROM page), {document.INT64_MIN})
                                 AND coalesce((SELECT max(greatest(started_ns, ended_ns)) FROM page), {document.INT64_MAX})
                        AND session_id {in_page} GROUP BY session_id),
                fb AS (SELECT session_id, arg_max(score, created_ns) AS last_score, count(*) AS n_feedback
                       FROM feedback WHERE session_id {in_page} GROUP BY session_id)
                SELECT s.session_id, s.service, s.name, s.outcome, s.score, s.started_ns, s.ended_ns,
                       s.parent_session_id, agg.n_steps, agg.agents, agg.n_errors, agg.tokens_in, agg.tokens_out, agg.cost_usd,
                       fb.last_score, fb.n_feedback, {diagnosis_state} AS diagnosis, s.metadata, s.inputs
                FROM page s LEFT JOIN agg USING (session_id) LEFT JOIN fb USING (session_id)
                LEFT JOIN last_job j ON j.session_id = s.session_id
                LEFT JOIN analyses a ON a.session_id = s.session_id
                LEFT JOIN replays r ON r.session_id = s.session_id""",
            [*page_params, *page_params, *page_params]))
        firsts = self._first_messages(cur, page_ids)
        by_id = {}
        for r in rows:
            sid = r["session_id"]
            by_id[sid] = {
                "session_id": sid, "service": r["service"], "name": r["name"], "outcome": r["outcome"],
                "score": r["score"], "started_at": document.iso(r["started_ns"]),
                "ended_at": document.iso(r["ended_ns"]),
                "duration_ms": document.duration_ms(r["started_ns"], r["ended_ns"]),
                "parent_session_id": r["parent_session_id"], "steps": r["n_steps"] or 0,
                "agents": sorted(r["agents"] or []), "errors": r["n_errors"] or 0,
                "tokens": {"input": int(r["tokens_in"] or 0), "output": int(r["tokens_out"] or 0)},
                "cost_usd": r["cost_usd"],
                "feedback_score": r["last_score"], "feedback_count": r["n_feedback"] or 0,
                "diagnosis": r["diagnosis"],
                "task": document.task_of(from_json_text(r["metadata"]), from_json_text(r["inputs"]),
                                         firsts.get(sid, [])),
            }
        return {"rows": [by_id[sid] for sid in page_ids if sid in by_id], "total": total}
