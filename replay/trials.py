"""Trial segmentation: split a session's steps into plan-execution trials (DoVer 4.1).

A trial runs from a planning (or re-planning) step up to the step before the next one.
With an LLM the planning steps come from the segmentation prompt; without one (or when
its answer is unusable) they are detected from what the trace already says: the agent's
role (a coordinating agent: `tracefix.analysis.roles.coordinators`), the phase the analysis assigned ("plan"), and
plan-like content (the word "plan", a numbered list).
"""
from __future__ import annotations

import re

from tracefix.analysis.roles import coordinators
from tracefix.collector.document import session_task
from tracefix.replay import prompts

PLAN_WORDS = re.compile(r"\b(plan|re-?plan|revised plan|new plan|strategy)\b", re.I)
NUMBERED_LIST = re.compile(r"(^|\n)\s*(1[.)]|step 1\b).*(\n)\s*(2[.)]|step 2\b)", re.I | re.S)


def _phases(analysis: dict | None) -> dict[int, str]:
    return {s["step"]: s.get("phase") for s in (analysis or {}).get("scores", []) if "step" in s}


def looks_like_plan(step: dict, phase: str | None, planners: set[str]) -> bool:
    text = ((step.get("output_message") or {}).get("content") or "")
    if phase == "plan":
        return True
    by_planner = step.get("agent") in planners
    first_line = text.strip().split("\n", 1)[0]
    plan_text = bool(PLAN_WORDS.search(first_line)) or bool(NUMBERED_LIST.search(text))
    # A planner's instruction to a worker is execution; its step counts only if it plans,
    # and it plans without calling tools (a tool call is execution).
    return by_planner and plan_text and not step.get("tool_calls")


def planning_steps_fallback(steps: list[dict], analysis: dict | None) -> list[int]:
    phases = _phases(analysis)
    planners = coordinators([s.get("agent") for s in steps])
    return [s["index"] for s in steps if looks_like_plan(s, phases.get(s["index"]), planners)]


def planning_steps_llm(llm, task: str | None, steps: list[dict]) -> list[int]:
    system, user = prompts.segmentation(task, steps)
    answer = llm.complete_json("segmentation", system, user)
    indices = []
    initial = answer.get("initial_planning_step")
    if isinstance(initial, dict) and initial.get("step_index") is not None:
        indices.append(initial["step_index"])
    for update in answer.get("plan_update_steps") or []:
        if isinstance(update, dict):
            indices.append(update.get("plan_update_step_index", update.get("step_index")))
    valid = {s["index"] for s in steps}
    try:
        picked = sorted({int(i) for i in indices})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"segmentation answer has non-integer step indices: {indices!r}") from exc
    if not picked or not set(picked) <= valid:
        raise ValueError(f"segmentation answer names no valid planning step: {indices!r}")
    return picked


def trials_from_plans(steps: list[dict], plan_steps: list[int], failed_session: bool) -> list[dict]:
    """Cut the steps at the planning steps; steps before the first plan join the first trial."""
    if not steps:
        return []
    first, last = steps[0]["index"], steps[-1]["index"]
    starts = sorted({p for p in plan_steps if first <= p <= last})
    if not starts:
        return [{"index": 0, "start": first, "end": last, "plan_step": None, "failed": failed_session}]
    trials = []
    for i, plan in enumerate(starts):
        start = first if i == 0 else plan
        end = starts[i + 1] - 1 if i + 1 < len(starts) else last
        # Every trial of a failed session failed: earlier ones were abandoned by a re-plan,
        # the last one ended in the failure itself.
        trials.append({"index": i, "start": start, "end": end, "plan_step": plan, "failed": failed_session})
    return trials


def segment(doc: dict, analysis: dict | None, llm=None) -> tuple[list[dict], str, str | None]:
    """(trials, stage label "llm"|"fallback", note explaining a fallback or None)."""
    steps = doc.get("steps") or []
    failed = doc.get("outcome") != "success"
    note = None
    if llm is not None:
        try:
            return trials_from_plans(steps, planning_steps_llm(llm, session_task(doc), steps), failed), "llm", None
        except Exception as exc:  # an unusable answer must not stop the diagnosis
            note = f"segmentation: LLM answer unusable ({exc}); used plan markers"
    plans = planning_steps_fallback(steps, analysis)
    return trials_from_plans(steps, plans, failed), "fallback", note
