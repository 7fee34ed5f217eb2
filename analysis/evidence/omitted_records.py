"""A report in words leaves out records of its own tool results while naming their siblings.

The generic failure: a summary that names what a call looked at but drops what it found (two
of three matching orders reported, the third forgotten), so whoever acts on the summary
misses it. The reading is agent_reports.py (`omitted_records`, `dropped_findings`), on
JSON and prose results alike (records.py). Needs recorded tool results.

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
    if not u.omitted:
        return None
    return f"leaves {', '.join(u.as_written(u.omitted[:3]))} out of its summary of its tool results"


def evidence(graph: TransitionGraph) -> list[Evidence]:
    return per_unit(graph, _reason)
