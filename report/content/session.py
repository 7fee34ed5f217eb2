"""The session at a glance: its task, outcome, final answer, facts, feedback, marks on steps and milestones
(the session document, docs/contracts.md §1).
"""
from __future__ import annotations

import re

from tracefix.collector.document import live_tools_reason, session_task, unrecorded_tools
from tracefix.report.content.values import fields, fmt_duration, fmt_score, objects, plural, to_json


def task_text(doc: dict) -> str:
    task = session_task(doc)
    return re.sub(r"^\s*task:\s*", "", task, flags=re.I) if task else "(no task recorded)"


def outcome_text(doc: dict) -> str:
    outcome = doc.get("outcome") or "unknown"
    score = doc.get("score")
    return outcome if score is None else f"{outcome} (score {fmt_score(score)})"


def final_answer(output) -> str:
    if isinstance(output, dict) and "final_answer" in output:
        return str(output["final_answer"])
    if output is None:
        return ""
    return to_json(output, indent=None)


def facts(doc: dict) -> list[tuple[str, str]]:
    """The session at a glance, as (label, value) rows."""
    tokens = doc.get("tokens") or {}
    rows = [
        ("Session", str(doc.get("session_id") or "?")),
        ("Task", task_text(doc)),
        ("Outcome", outcome_text(doc)),
        ("Final answer", final_answer(doc.get("output")) or "—"),
        ("Service", str(doc.get("service") or "—")),
        ("Entrypoint", str(doc.get("entrypoint") or "—")),
        ("Agents", ", ".join(map(str, doc.get("agents") or [])) or "—"),
        ("Models", ", ".join(map(str, doc.get("models") or [])) or "—"),
        ("Tokens", f"{tokens.get('input', 0) or 0:,} in / {tokens.get('output', 0) or 0:,} out"),
        ("Time", f"{fmt_duration(doc.get('duration_ms'))}, {plural(len(doc.get('steps') or []), 'step')}"
                 + (f", started {doc['started_at']}" if doc.get("started_at") else "")),
    ]
    if doc.get("parent_session_id"):
        rows.append(("Replay of", str(doc["parent_session_id"])))
    rows.append(("Replay", replay_readiness(doc)))
    return rows


def replay_readiness(doc: dict) -> str:
    """Whether a replay can re-run this session from its recording, in a sentence (the
    document's `replayable` and its reason)."""
    if doc.get("replayable"):
        return "replayable from the recording"
    live = unrecorded_tools(doc.get("steps") or [])
    reason = doc.get("replayable_reason") or "no entrypoint recorded, or an incomplete recording"
    if live and reason == live_tools_reason(live):
        return (f"with live tools only: {', '.join(live)} ran without @tracefix.tool, so a replay runs them "
                "again for real (tracefix replay --allow-live-tools)")
    return f"not replayable: {reason}"


def feedback_lines(doc: dict) -> list[str]:
    out = []
    for fb in doc.get("feedback") or []:
        score = fb.get("score")
        thumb = "thumbs-down" if score is not None and float(score) < 0 else "thumbs-up" if score is not None and float(score) > 0 else "neutral"
        comment = f": “{fb['comment']}”" if fb.get("comment") else ""
        when = f" ({fb['created_at']})" if fb.get("created_at") else ""
        out.append(f"{thumb} (score {fmt_score(score, 1)}){comment}{when}")
    return out


def mark_lines(doc: dict) -> list[str]:
    """People's marks on steps (Phoenix's span annotations, Langfuse's scores), one line each."""
    out = []
    for mark in objects(doc.get("annotations")):
        said = ", ".join([*([f"“{mark['label']}”"] if mark.get("label") else []),
                          *([f"score {fmt_score(mark['score'], 1)}"] if mark.get("score") is not None else [])])
        comment = f": “{mark['comment']}”" if mark.get("comment") else ""
        wrong = " (marked wrong)" if mark.get("negative") else ""
        out.append(f"step {mark.get('step')}{wrong}: {said}{comment}")
    return out


def milestones(doc: dict) -> list[tuple[str, bool]]:
    evaluation = fields(doc.get("evaluation"))
    return [(str(m.get("name")), bool(m.get("achieved"))) for m in objects(evaluation.get("milestones"))]
