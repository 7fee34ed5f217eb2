"""A step picks a record where the final answer names its sibling: answer and acts parted.

The generic failure: the run's answer says X was done while its calls did Y (or pairs an
amount with X that every call passing it paired with Y), so one of them went wrong at the
pick. The reading is conflicts.py's `mark_answer_conflicts`. Needs recorded tool results.

Testbed-only (base.py): on the Who&When dev split it does not earn its place in the learned
ranker (bench/whowhen.py's leave-one-detector-out table), on the demo apps' labelled sessions it
does (bench/localization.py's), so only the instrumented-session ranker reads it.
"""
from __future__ import annotations

from ..graph import TransitionGraph
from ..transition_unit import TransitionUnit
from .base import Evidence, per_unit

WEIGHT = "unsupported"
TESTBED_ONLY = True
GROUP = "grounding"  # the value detectors add one bonus per step between them (hypotheses.py)


def _reason(u: TransitionUnit) -> str | None:
    if not u.answer_conflicts:
        return None
    return (f"picks {', '.join(u.as_written(u.answer_conflicts[:3]))}, where the final answer "
            "names a sibling record instead")


def evidence(graph: TransitionGraph) -> list[Evidence]:
    return per_unit(graph, _reason)
