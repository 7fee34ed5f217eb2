"""A step that says it failed, walked back to what it was handed or to its own error.

The generic failure: an agent reports that its work failed, in so many words (units.py's
failure claim words, a generic English phrase list: "failed", "could not", "unable"), or by
the agent who handed it the work handing the same work out again (failures.py's
`mark_failed_rounds`, whatever the report's words). symptoms.explain walks it back: to an
error of its own round, else to the hand-over it was given (an id invented earlier, the
first saying of a hand-over said again). A report of failures the run got past after
reporting them (every error of its round made again and working) is no symptom.

Testbed-only (base.py): on the Who&When dev split it does not earn its place in the learned
ranker (bench/whowhen.py's leave-one-detector-out table), on the demo apps' labelled sessions it
does (bench/localization.py's), so only the instrumented-session ranker reads it.
"""
from __future__ import annotations

from ..graph import TransitionGraph
from ..symptoms import Symptom, claims_failure, explain, reports_a_failure_got_past
from .base import Evidence

WEIGHT = "origins"
TESTBED_ONLY = True
SYMPTOMS = True


def evidence(graph: TransitionGraph) -> list[Evidence]:
    out: list[Evidence] = []
    for u in graph.units:
        if u.failed or not claims_failure(u) or reports_a_failure_got_past(graph.units, u.index):
            continue
        origin, path, reason = explain(graph, u.index)
        out.append(Evidence(origin, reason, Symptom(u.index, "failure_claim", origin, path, reason)))
    return out
