"""A report in words attaches a value to the wrong record of its own tool results.

The generic failure: the agent read its results and paired a field with the wrong record
("item 1 is red" where the result says item 1 is blue, item 2 red), a sibling in the same
result or the same lookup's answer for another value. The reading is agent_reports.py
(`misattributed_values`, `mispaired_numbers`). Needs recorded tool results.

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
    if not u.misattributed:
        return None
    return f"attaches {', '.join(u.as_written(u.misattributed[:3]))} to the wrong record of its tool results"


def evidence(graph: TransitionGraph) -> list[Evidence]:
    return per_unit(graph, _reason)
