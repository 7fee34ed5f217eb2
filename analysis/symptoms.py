"""Where a failure shows, and the dependency path back to where it started.

A failure surfaces as a symptom: a step whose tool failed (error, raised or returned as
text), a step that says it failed (a failure claim: "FAILED", "could not", or a report whose
round of work the coordinator handed out again, whatever its words), or, in a failed run,
the final answer. The
trouble usually started earlier, so each symptom is walked back through the critical
transition graph:

- a repeated error or a repeated call goes back to its first occurrence (loop and
  same-error edges);
- an error that names a value the failing step was handed goes back to the step that
  handed it over (the latest step of another agent whose message carried that value),
  unless the failing call left out a value that hand-over gave it (then the call is to blame);
- a failure claim with an error in the claimant's own work since it was handed the task is
  explained by that error; without one, by what it was handed (the hand-over step), which
  may itself be a failure claim, explained in turn.
The origin of each symptom is a candidate root cause; the path is its evidence.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .graph import LOOP, SAME_ERROR, TransitionGraph
from .units import TransitionUnit, extract_artifacts

MAX_DEPTH = 12


@dataclass
class Symptom:
    step: int
    kind: str  # "error" | "failure_claim" | "final_answer"
    origin: int
    path: list[int] = field(default_factory=list)  # symptom first, origin last
    reason: str = ""


def claims_failure(u: TransitionUnit) -> bool:
    """A text step that reports failure: in so many words, or by its round being handed out
    again (units.mark_failed_rounds), whatever its words."""
    if u.action["calls"] or u.status == "error":
        return False
    return (u.claims_failure and not u.claims_success) or u.round_failed


def handover_source(units: list[TransitionUnit], k: int) -> int | None:
    """The latest earlier step of another agent that said something (an instruction, a
    report, a message): what step k's agent was handed."""
    agent = units[k].agent
    for j in range(k - 1, -1, -1):
        if units[j].agent != agent and units[j].action["text"].strip():
            return j
    return None


def _dropped(handover: TransitionUnit, u: TransitionUnit) -> set[str]:
    """Values a hand-over's words gave that the failing call left out of its arguments: the
    call did not do what it was handed, so the failure is the call's, not the hand-over's."""
    if not u.action["calls"]:
        return set()
    given = extract_artifacts(handover.action["text"])
    return given - u.artifacts_consumed


def _first_occurrence(graph: TransitionGraph, k: int, path: list[int]) -> int:
    """Back along same-error and loop edges to the first time this happened."""
    for _ in range(MAX_DEPTH):
        prev = [e.src for e in graph.in_edges(k, (SAME_ERROR, LOOP)) if e.src < k]
        if not prev:
            return k
        k = min(prev)
        path.append(k)
    return k


def explain(graph: TransitionGraph, k: int, path: list[int] | None = None, depth: int = 0) -> tuple[int, list[int], str]:
    """(origin, path, reason) for a symptom at step k."""
    units = graph.units
    path = path if path is not None else [k]
    u = units[k]
    if depth > MAX_DEPTH:
        return k, path, "walk-back depth limit"
    if u.status == "error":
        if u.kind == "message" and u.feedback and not u.action["calls"]:
            # A tool's output in a message log: the failure belongs to the call that asked for it.
            caller = next((j for j in range(k - 1, -1, -1) if units[j].action["calls"]), None)
            if caller is not None:
                path.append(caller)
                k, u = caller, units[caller]
        first = _first_occurrence(graph, k, path)
        f = units[first]
        named = extract_artifacts(f.error_text or units[path[0]].error_text or "") & f.artifacts_consumed
        p = handover_source(units, first)
        if named and p is not None and named & units[p].artifacts_consumed and not _dropped(units[p], f):
            path.append(p)
            value = sorted(named & units[p].artifacts_consumed)[0]
            return p, path, f"the failing value {value} was handed over by step {p}"
        return first, path, "its own action failed" if first == k else f"first occurrence of the failure at step {first}"
    if claims_failure(u):
        p = handover_source(units, k)
        start = (p + 1) if p is not None else 0
        own_errors = [j for j in range(start, k) if units[j].agent == u.agent and units[j].status == "error"]
        if own_errors:
            path.append(own_errors[0])
            return explain(graph, own_errors[0], path, depth + 1)
        if p is None:
            return k, path, "claims failure with nothing handed to it"
        path.append(p)
        if claims_failure(units[p]) or units[p].status == "error":
            return explain(graph, p, path, depth + 1)
        first = _first_occurrence(graph, p, path)  # a hand-over said again: blame its first saying
        return first, path, f"claims failure without an error of its own: what step {p} handed over" + \
            (f", first said at step {first}" if first != p else "")
    return k, path, "the run's final answer"


def find_symptoms(graph: TransitionGraph, failed: bool) -> list[Symptom]:
    """Symptoms in step order, each explained; repeats of a known error are skipped."""
    out: list[Symptom] = []
    seen_errors: set[str] = set()
    units = graph.units
    for u in units:
        if u.status == "error":
            if u.error_signature in seen_errors:
                continue
            seen_errors.add(u.error_signature or "")
            kind = "error"
        elif claims_failure(u):
            kind = "failure_claim"
        else:
            continue
        origin, path, reason = explain(graph, u.index)
        out.append(Symptom(u.index, kind, origin, path, reason))
    if failed and units:
        last = units[-1]
        if not out or out[-1].step != last.index:
            if not claims_failure(last) and last.status != "error":
                out.append(Symptom(last.index, "final_answer", last.index, [last.index], "the run's final answer"))
    return out
