"""Which sessions a list shows: the one WHERE clause over `sessions s` that the session list
(`Queries.list_sessions`: the API, the CLI) and the web UI's table (`Browse.session_table`)
filter by."""
from __future__ import annotations

from typing import Any

from tracefix.collector import document
from tracefix.collector.store.sorting import DIAGNOSIS_STATES, diagnosis_states

FEEDBACK_FILTERS = ("negative", "positive", "any", "none")
# the session columns a text search reads
SEARCHED_COLUMNS = ("session_id", "service", "name", "entrypoint", "inputs", "metadata", "output")


def session_filter(*, search: str | None = None, outcome: str | None = None, service: str | None = None,
                   feedback: str | None = None, agent: str | None = None, since: Any = None, until: Any = None,
                   parent_session_id: str | None = None, replay_children: bool = True, model: str | None = None,
                   task: str | None = None, diagnosis: str | None = None, min_cost: float | None = None,
                   max_cost: float | None = None) -> tuple[str, list[Any]]:
    """(condition over `sessions s`, its parameters); None filters nothing.

    `search`: a case-insensitive substring of any of SEARCHED_COLUMNS. `outcome="none"`: no
    outcome recorded (outcomes are "success" and "failure"). `feedback`: "negative" /
    "positive" (some feedback scored below / above 0), "any" (some feedback), "none" (none).
    `agent`: some span of the session names it. `since` / `until`: when it started (an ISO
    time or epoch value, `document.to_ns`), `until` excluded. `replay_children=False`: no
    session a replay ran (one with a `parent_session_id`). `model`: some span of the session
    names it. `task`: a case-insensitive substring of its task (stored at ingest: tasks.py).
    `diagnosis`: its diagnosis state (sorting.DIAGNOSIS_STATES). `min_cost` / `max_cost`: its
    LLM calls cost at least / at most this many USD (a session of unknown cost matches neither)."""
    where: list[str] = ["true"]
    params: list[Any] = []
    if search:
        pattern = _like_pattern(search)
        where.append("(" + " OR ".join(f"s.{c} ILIKE ? ESCAPE '\\'" for c in SEARCHED_COLUMNS) + ")")
        params += [pattern] * len(SEARCHED_COLUMNS)
    if outcome == "none":
        where.append("s.outcome IS NULL")
    elif outcome is not None:
        where.append("s.outcome = ?")
        params.append(outcome)
    if service is not None:
        where.append("s.service = ?")
        params.append(service)
    if feedback in ("negative", "positive"):
        where.append(f"s.session_id IN (SELECT session_id FROM feedback WHERE score {'<' if feedback == 'negative' else '>'} 0)")
    elif feedback == "any":
        where.append("s.session_id IN (SELECT session_id FROM feedback)")
    elif feedback == "none":
        where.append("s.session_id NOT IN (SELECT session_id FROM feedback)")
    elif feedback is not None:
        raise ValueError(f"feedback must be one of {', '.join(FEEDBACK_FILTERS)}")
    if agent is not None:
        where.append("s.session_id IN (SELECT session_id FROM spans WHERE agent = ?)")
        params.append(agent)
    if since is not None:
        where.append("s.started_ns >= ?")
        params.append(document.to_ns(since))
    if until is not None:
        where.append("s.started_ns < ?")
        params.append(document.to_ns(until))
    if parent_session_id is not None:
        where.append("s.parent_session_id = ?")
        params.append(parent_session_id)
    if not replay_children:
        where.append("s.parent_session_id IS NULL")
    if model is not None:
        where.append("s.session_id IN (SELECT session_id FROM spans WHERE model = ?)")
        params.append(model)
    if task:
        where.append("s.task ILIKE ? ESCAPE '\\'")
        params.append(_like_pattern(task))
    if diagnosis is not None:
        if diagnosis not in DIAGNOSIS_STATES:
            raise ValueError(f"diagnosis must be one of {', '.join(DIAGNOSIS_STATES)}")
        where.append(f"s.session_id IN (SELECT session_id FROM ({diagnosis_states('SELECT session_id FROM sessions')}) "
                     "WHERE state = ?)")
        params.append(diagnosis)
    for bound, op in ((min_cost, ">="), (max_cost, "<=")):
        if bound is not None:
            where.append("s.session_id IN (SELECT session_id FROM spans WHERE kind = 'llm' GROUP BY session_id "
                         f"HAVING sum(cost_usd) {op} ?)")
            params.append(float(bound))
    return " AND ".join(where), params


def _like_pattern(text: str) -> str:
    """An ILIKE pattern (ESCAPE '\\') matching `text` anywhere: its wildcards taken literally."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
