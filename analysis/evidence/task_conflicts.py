"""A step picks a record its tool results show, where the task's wording names a sibling.

The generic failure: of records that differ only in words (the red item and the blue one),
the agent picks the one the task did not ask for. The reading is conflicts.py (`conflicts_in`
against the task's clause about the picked value; only the first step to pick an id chose it,
a pick made on a report that misread its results is the report's, `clear_misled_picks`).
Needs recorded tool results (instrumented sessions; not a plain message log).

Not a ranker input (base.py): it earns on neither the Who&When dev split nor the demo apps'
labelled sessions (the benches' leave-one-detector-out tables), so the graph heuristics weigh
it and the report shows it, and the learned rankers leave it out.
"""
from __future__ import annotations

from ..graph import TransitionGraph
from ..transition_unit import TransitionUnit
from .base import Evidence, per_unit

WEIGHT = "unsupported"
RANKER_INPUT = False
GROUP = "grounding"  # the value detectors add one bonus per step between them (hypotheses.py)


def _reason(u: TransitionUnit) -> str | None:
    if not u.task_conflicts:
        return None
    return f"picks {', '.join(u.as_written(u.task_conflicts[:3]))}, whose record does not match the task's wording"


def evidence(graph: TransitionGraph) -> list[Evidence]:
    return per_unit(graph, _reason)
