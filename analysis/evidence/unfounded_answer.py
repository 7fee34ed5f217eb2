"""A final answer that names none of the values its tool results showed: the run stopped short.

The generic failure: the answer reports nothing the run found ("all done, nothing more to
do") though its tool results showed ids and amounts, so with nothing failing before it, the
answer is where the run stopped short of the work. It is the final answer symptom
(final_answer.py), weighed as the stronger `unfounded_answer`. In a message log, what the
run found is whatever the messages before the answer named.

Testbed-only (base.py): on the Who&When dev split it does not earn its place in the learned
ranker (bench/whowhen.py's leave-one-detector-out table), on the demo apps' labelled sessions it
does (bench/localization.py's), so only the instrumented-session ranker reads it.
"""
from __future__ import annotations

from ..graph import TransitionGraph
from ..roles import in_words_only
from ..symptoms import Symptom, claims_failure
from ..transition_unit import TransitionUnit
from ..values import extract_artifacts
from .base import Evidence
from .final_answer import REASON

WEIGHT = "unfounded_answer"
TESTBED_ONLY = True
SYMPTOMS = True


def evidence(graph: TransitionGraph) -> list[Evidence]:
    units = graph.units
    if not units or claims_failure(units[-1]) or units[-1].status == "error" or not answer_carries_no_finding(units):
        return []
    last = units[-1].index
    reason = REASON + ", which carries none of the values its tool results showed"
    return [Evidence(last, reason, Symptom(last, "final_answer", last, [last], reason, carries_no_finding=True))]


def answer_carries_no_finding(units: list[TransitionUnit]) -> bool:
    """Whether the session's last step, an answer in words, names none of the values (ids,
    amounts) that its tool results showed, though they showed some: it reports nothing the
    run found ("all done, nothing more to do"), so with nothing failing before it, the
    answer itself is where the run stopped short of the work."""
    if not units or not in_words_only(units[-1]):
        return False
    shown = {v for u in units[:-1] for v in u.artifacts_produced}
    return bool(shown) and not extract_artifacts(units[-1].action["text"]) & shown
