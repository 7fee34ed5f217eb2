"""The order of a session list and the values it sorts by that no column holds: a session's
task, agents, models, cost, diagnosis state. One definition for the web UI's table
(`Browse.session_table`) and the API's and CLI's list (`Queries.list_sessions`)."""
from __future__ import annotations

from typing import Any

from tracefix.collector.document import TASK_KEYS
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


def _named_text(column: str) -> str:
    """The first TASK_KEYS value of a JSON object column that is a non-empty string (document.task_of),
    the column parsed once."""
    paths = ", ".join(f"'$.\"{key}\"'" for key in TASK_KEYS)
    return (f"(CASE WHEN json_valid({column}) THEN list_filter(json_extract({column}, [{paths}]), "
            f"v -> json_type(v) = 'VARCHAR' AND v::VARCHAR <> '\"\"')[1] ->> '$' END)")


def session_tasks(scope: str) -> str:
    """SELECT session_id, task: each session's task as document.task_of reads it (named in its
    metadata, else its inputs, else the first user message of its step 0, cut at 1,000
    characters), for the sessions `scope` (a SELECT of ids) names. Messages are read only for
    the sessions that name no task."""
    return f"""WITH named AS (
                   SELECT session_id, coalesce({_named_text('metadata')}, {_named_text('inputs')}) AS task
                   FROM sessions WHERE session_id IN ({scope})),
               first_step AS (
                   SELECT st.session_id, sp.input_keys, CASE WHEN sp.kind = 'message' THEN sp.output_key END AS said
                   FROM named n JOIN steps st ON st.session_id = n.session_id AND st.idx = 0
                   JOIN spans sp ON sp.span_id = st.span_id AND sp.session_id = st.session_id
                   WHERE n.task IS NULL),
               keyed AS (
                   SELECT session_id, unnest(list_append(coalesce(input_keys, []), said)) AS key,
                          generate_subscripts(list_append(coalesce(input_keys, []), said), 1) AS pos
                   FROM first_step),
               first_user AS (
                   SELECT k.session_id, arg_min(json_extract_string(m.message, '$.content'), k.pos) AS content
                   FROM keyed k JOIN messages m ON m.key = k.key
                   -- messages are stored as compact JSON with sorted keys: the text test skips the
                   -- parse of every message that cannot be a user's (a third of the time at 100k)
                   WHERE contains(m.message, '"role":"user"') AND json_valid(m.message)
                         AND json_extract_string(m.message, '$.role') = 'user'
                         AND json_type(m.message, '$.content') = 'VARCHAR'
                   GROUP BY k.session_id)
               SELECT n.session_id, coalesce(n.task, substring(f.content, 1, 1000)) AS task
               FROM named n LEFT JOIN first_user f ON f.session_id = n.session_id"""


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
    "task": ("lower(agg.n)", "SELECT session_id, task AS n FROM ({tasks})"),
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
        sql = aggregate.format(scope=scope, tasks=session_tasks(scope), states=diagnosis_states(scope))
        join = f"LEFT JOIN ({sql}) agg ON agg.session_id = b.session_id"
    # the count rides on the page's own scan (a text search filters 100k rows once, not twice)
    found = records(cur.execute(
        f"""WITH base AS (SELECT session_id, service, outcome, started_ns, ended_ns FROM sessions s WHERE {filtered})
            SELECT b.session_id, count(*) OVER () AS total FROM base b {join}
            ORDER BY {order} {'DESC' if descending else 'ASC'} NULLS LAST, b.session_id LIMIT ? OFFSET ?""",
        [*params, int(limit), int(offset)]))
    return [r["session_id"] for r in found], (found[0]["total"] if found else None)
