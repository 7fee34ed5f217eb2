"""The order of a session list and the values it sorts by that no column holds: a session's
agents, models, cost, diagnosis state (its task is a column: tasks.py). One definition for the web UI's table
(`Browse.session_table`) and the API's and CLI's list (`Queries.list_sessions`)."""
from __future__ import annotations

from typing import Any

from tracefix.collector.session_list import DIAGNOSIS_STATES, SESSION_SORTS
from tracefix.collector.store.sql import records

# each session's latest job (its state), for diagnosis_state
LAST_JOB = "(SELECT session_id, arg_max(state, created_ns) AS state FROM jobs GROUP BY session_id)"
# over `sessions s` joined with LAST_JOB j, analyses a and replays r by session_id
DIAGNOSIS_STATE = """(CASE WHEN j.state IN ('queued', 'running') THEN j.state
                          WHEN j.state IN ('failed', 'refused') THEN 'failed'
                          WHEN r.session_id IS NOT NULL THEN 'replayed'
                          WHEN a.session_id IS NOT NULL THEN 'analyzed'
                          WHEN j.state = 'done' THEN 'analyzed' ELSE 'none' END)"""


def diagnosis_states(scope: str) -> str:
    """SELECT session_id, state: the diagnosis state of the sessions `scope` (a SELECT of ids) names."""
    return f"""SELECT s.session_id, {DIAGNOSIS_STATE} AS state FROM sessions s
               LEFT JOIN {LAST_JOB} j ON j.session_id = s.session_id
               LEFT JOIN analyses a ON a.session_id = s.session_id
               LEFT JOIN replays r ON r.session_id = s.session_id
               WHERE s.session_id IN ({scope})"""


# Sort key -> (what a row is ordered by, the aggregate over the matching sessions it needs:
# `{scope}` is the SELECT of their ids). Keys of the sessions row need no aggregate.
SORTS: dict[str, tuple[str, str | None]] = {
    "time": ("b.started_ns", None),
    "service": ("b.service", None),
    "latency": ("b.ended_ns - b.started_ns", None),
    "outcome": ("b.outcome", None),
    "steps": ("agg.n", "SELECT session_id, count(*) AS n FROM steps WHERE session_id IN ({scope}) GROUP BY session_id"),
    "tokens": ("agg.n", "SELECT session_id, sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)) AS n FROM spans "
                        "WHERE kind IN ('llm', 'message') AND session_id IN ({scope}) GROUP BY session_id"),
    "cost": ("agg.n", "SELECT session_id, sum(cost_usd) AS n FROM spans WHERE kind = 'llm' AND session_id IN ({scope}) "
                      "GROUP BY session_id"),
    "feedback": ("agg.n", "SELECT session_id, arg_max(score, created_ns) AS n FROM feedback "
                          "WHERE session_id IN ({scope}) GROUP BY session_id"),
    # as the list shows them: the names sorted and joined; a session without any sorts last
    "agents": ("agg.n", "SELECT session_id, nullif(array_to_string(list_sort(list(DISTINCT agent)), ', '), '') AS n "
                        "FROM spans WHERE agent IS NOT NULL AND session_id IN ({scope}) GROUP BY session_id"),
    "model": ("agg.n", "SELECT session_id, nullif(array_to_string(list_sort(list(DISTINCT model)), ', '), '') AS n "
                       "FROM spans WHERE model IS NOT NULL AND session_id IN ({scope}) GROUP BY session_id"),
    "task": ("lower(b.task)", None),  # stored at ingest (tasks.py)
    "diagnosis": ("agg.n", "SELECT session_id, list_position(" + repr(list(DIAGNOSIS_STATES)) + ", state) AS n "
                           "FROM ({states})"),
}

assert tuple(SORTS) == SESSION_SORTS, "every sort key the API and the CLI accept has its SQL here"


def sorted_page(cur, filtered: str, params: list[Any], sort: str, descending: bool, limit: int,
                offset: int) -> tuple[list[str], int | None]:
    """(ids of the page's sessions in order, how many match; None when the page is past the
    end) of the sessions `filtered` (a condition over `sessions s`) sorted by `sort`: ties and
    sessions without a value (last, either way) by id."""
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}")
    order, aggregate = SORTS[sort]
    join = ""
    if aggregate:
        scope = "SELECT session_id FROM base"
        sql = aggregate.format(scope=scope, states=diagnosis_states(scope))
        join = f"LEFT JOIN ({sql}) agg ON agg.session_id = b.session_id"
    # the count rides on the page's own scan (a text search filters 100k rows once, not twice)
    found = records(cur.execute(
        f"""WITH base AS (SELECT session_id, service, outcome, started_ns, ended_ns, task FROM sessions s WHERE {filtered})
            SELECT b.session_id, count(*) OVER () AS total FROM base b {join}
            ORDER BY {order} {'DESC' if descending else 'ASC'} NULLS LAST, b.session_id LIMIT ? OFFSET ?""",
        [*params, int(limit), int(offset)]))
    return [r["session_id"] for r in found], (found[0]["total"] if found else None)
