"""The final answer of a failed run, when nothing earlier explains the failure.

The generic failure: the run ended in a wrong answer and no step before it failed or said it
failed, so the answer itself is the first place the failure shows. Counted only for a failed
session, and only when no other symptom came first (then the answer is its consequence); a
silent suspect earlier in the run (a value no input showed, an unacted claim, a hand-over
said again) outweighs it (hypotheses.py). Works on message logs and instrumented sessions.

Not a ranker input (base.py): it earns on neither the Who&When dev split nor the demo apps'
labelled sessions (the benches' leave-one-detector-out tables), so the graph heuristics weigh
it and the report shows it, and the learned rankers leave it out.
"""
from __future__ import annotations

from ..graph import TransitionGraph
from ..symptoms import Symptom, claims_failure
from .base import Evidence

WEIGHT = "final_answer"
RANKER_INPUT = False
SYMPTOMS = True
REASON = "the run's final answer"


def evidence(graph: TransitionGraph) -> list[Evidence]:
    if not graph.units:
        return []
    last = graph.units[-1]
    if claims_failure(last) or last.status == "error":
        return []
    return [Evidence(last.index, REASON, Symptom(last.index, "final_answer", last.index, [last.index], REASON))]
