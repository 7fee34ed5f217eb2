"""A report in words restates a field of a record with another value than its result gave.

The generic failure: the agent misread what it looked up ("#4472: delivered" of a parcel
whose state was "out for delivery"; "2 x sku:40-a" of a line whose count is 1, as a later
call used it). The reading is agent_reports.py (`misread_listings`, `mark_restated_fields`),
on JSON and prose results alike. Needs recorded tool results.

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
    return f"restates {'; '.join(u.restated[:2])}" if u.restated else None


def evidence(graph: TransitionGraph) -> list[Evidence]:
    return per_unit(graph, _reason)
