"""A step acts on a value (an id, an amount) that neither the task nor its input showed it.

The generic failure: an agent makes up a value, or carries one over from nowhere, and the
run goes on with it (a transfer to an account nobody looked up). The reading is values.py's
`unsupported_in`, run by units.build_units over each step's input (a message log's step:
over what was said before it); a tool's output reports the world and invents nothing.
Works on message logs and instrumented sessions alike.

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
    return f"uses {', '.join(u.as_written(u.unsupported[:3]))}, which its input never showed it" if u.unsupported else None


def evidence(graph: TransitionGraph) -> list[Evidence]:
    return per_unit(graph, _reason)
