"""A step whose tool failed, and the run did not get past it: walked back to where it started.

The generic failure: a call raised, answered with an error (an HTTP status of 400 or more, a
failure flag in an API envelope, a short text worded as a failure, plain text where the tool
otherwise answers JSON), or was made again at once with the same answer. What counts as a
failed call, and which failures the run got past (the same calls made again soon after and
working: a timeout, a 503), is failures.py's reading; the walk back along the transition
graph (to the first occurrence, the hand-over that gave the failing value, the worker who
neglected the id the failure is about, the report that misread it) is symptoms.explain.
Repeats of an error already seen are one symptom. Works on message logs (a tool's output,
blamed on the call that asked for it) and instrumented sessions.

Testbed-only (base.py): on the Who&When dev split it does not earn its place in the learned
ranker (bench/whowhen.py's leave-one-detector-out table), on the demo apps' labelled sessions it
does (bench/localization.py's), so only the instrumented-session ranker reads it.
"""
from __future__ import annotations

from ..graph import TransitionGraph
from ..symptoms import Symptom, explain
from .base import Evidence

WEIGHT = "origins"
TESTBED_ONLY = True
SYMPTOMS = True


def evidence(graph: TransitionGraph) -> list[Evidence]:
    out: list[Evidence] = []
    seen_errors: set[str] = set()
    for u in graph.units:
        if not u.failed or u.error_signature in seen_errors:
            continue
        seen_errors.add(u.error_signature or "")
        origin, path, reason = explain(graph, u.index)
        out.append(Evidence(origin, reason, Symptom(u.index, "error", origin, path, reason)))
    return out
