"""A session's steps as the trace shows them: a short line per step, its errors, the input
an agent had not seen before, the replay's trials, and which steps a long session's trace
shows.
"""
from __future__ import annotations

from dataclasses import dataclass

from tracefix.report.content.diagnosis import frontier_by_step, tested_step
from tracefix.report.content.values import brief, fields, hypotheses, objects, plural, to_json, whole

# how a step the run got past is named where the store holds no error for it (its tool
# answered the failure as text, and the analysis read it from the result)
FAILURE_READ_FROM_RESULT = "failure read from its result"


def step_action(step: dict) -> str:
    """What the step did, in one line: its tool calls, or the start of its text."""
    calls = step.get("tool_calls") or []
    if calls:
        parts = []
        for call in calls:
            args = call.get("arguments")
            parts.append(f"{call.get('name')}({brief(to_json(args, indent=None), 80) if args not in (None, {}) else ''})")
        return "calls " + ", ".join(parts)
    out = step.get("output_message") or {}
    text = out.get("content") if isinstance(out, dict) else None
    if text:
        return brief(text, 140)
    if step.get("kind") == "message":
        msgs = step.get("input_messages") or []
        if msgs:
            return brief(msgs[-1].get("content"), 140)
    return "(no output)"


def step_errors(step: dict) -> list[str]:
    errors = [str(step["error"])] if step.get("error") else []
    errors += [f"{c.get('name')}: {c['error']}" for c in step.get("tool_calls") or [] if c.get("error")]
    return errors


def new_input_messages(steps: list[dict], i: int) -> tuple[list[dict], int]:
    """The input messages of step i that the previous call of the same agent did not
    already send, and how many earlier ones are hidden. An agent resends its growing
    history every call; repeating it at every step buries what changed."""
    msgs = steps[i].get("input_messages") or []
    agent = steps[i].get("agent")
    for j in range(i - 1, -1, -1):
        if steps[j].get("agent") != agent:
            continue
        prev = list(steps[j].get("input_messages") or [])
        out = steps[j].get("output_message")
        for candidate in (prev + [out] if out else prev, prev):
            if candidate and len(candidate) <= len(msgs) and msgs[:len(candidate)] == candidate:
                return msgs[len(candidate):], len(candidate)
        break
    return msgs, 0


@dataclass
class Trial:
    index: int
    start: int
    end: int
    failed: bool | None
    plan_step: int | None = None


def trials(doc: dict, replay: dict | None) -> list[Trial]:
    """The replay's plan–execution trials, or one trial spanning the session."""
    steps = doc.get("steps") or []
    last = max((int(s.get("index", 0)) for s in steps), default=0)
    found = [Trial(whole(t.get("index"), i), whole(t.get("start"), 0), whole(t.get("end"), last),
                   t.get("failed") if isinstance(t.get("failed"), bool) else None, whole(t.get("plan_step")))
             for i, t in enumerate(objects(fields(replay).get("trials")))]
    return sorted(found, key=lambda t: t.start) or [Trial(0, 0, last, None)]


# --- which steps the trace shows ----------------------------------------------------------------

TRACE_STEPS_SHOWN = 300  # a longer session's trace shows the steps around its marks, and its two ends
TRACE_CONTEXT = 2  # steps shown either side of a marked one


def trace_positions(steps: list[dict], analysis: dict | None, replay: dict | None,
                    limit: int = TRACE_STEPS_SHOWN, context: int = TRACE_CONTEXT) -> list[int]:
    """The positions (into `steps`) the trace shows, in order: every step of a session of at
    most `limit` steps. A longer session shows about `limit`: each marked step with `context`
    steps either side, marks taken in the order a reader needs them (the hypotheses by rank,
    the steps a replay tested, the detectors' frontier, then the steps with an error, earliest
    first), its last steps, and its first steps with what is left; so a report of a session of
    any length stays readable and its size bounded."""
    n = len(steps)
    if n <= limit:
        return list(range(n))
    position: dict[int, int] = {}
    for i, step in enumerate(steps):
        position.setdefault(whole(step.get("index"), i), i)
    ranked = sorted((whole(h.get("rank"), 1 << 30), k) for h in hypotheses(analysis)
                    if (k := whole(h.get("step"))) is not None)
    marks = ([k for _, k in ranked] + [k for h in hypotheses(replay) if (k := tested_step(h)) is not None]
             + sorted(frontier_by_step(analysis))
             + [whole(step.get("index"), i) for i, step in enumerate(steps) if step_errors(step)])
    chosen = set(range(context + 1)) | set(range(n - context - 1, n))
    for k in marks:
        if len(chosen) >= limit:
            break
        if (i := position.get(k)) is not None:
            chosen.update(range(max(0, i - context), min(n, i + context + 1)))
    for i in range(n):  # what the marks leave of the budget goes to how the session began
        if len(chosen) >= limit:
            break
        chosen.add(i)
    return sorted(chosen)


def trace_note(steps: list[dict], shown: list[int]) -> str | None:
    """What the trace leaves out, said once above it; None when it shows every step."""
    if len(shown) == len(steps):
        return None
    return (f"The session has {len(steps):,} steps: this trace shows {len(shown):,} of them, around its hypotheses, "
            "the steps a replay tested, the detectors' frontier and its errors, and its first and last steps. "
            "The UI's session page and GET /api/v1/sessions/{id} have every step.")


def trace_gap(steps: list[dict], after: int | None, before: int) -> str | None:
    """The line standing for the steps left out between two shown positions (`after` None:
    from the start); None when nothing is left out there."""
    first = 0 if after is None else after + 1
    if before <= first:
        return None
    low, high = whole(steps[first].get("index"), first), whole(steps[before - 1].get("index"), before - 1)
    return f"{plural(before - first, 'step')} not shown (steps {low}–{high})"
