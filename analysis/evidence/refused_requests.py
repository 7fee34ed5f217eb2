"""A request that did not take effect, read from what followed it: walked back to where it started.

The generic failure: a tool said no, in whatever words (an error, a polite "not in a position
to ...", a note that the request was set aside). It is read from its effect, not from its words
(failures.mark_requests_without_effect): the answer brought nothing of its own (no record made
or found: no id, number or other value the call had not carried) and the same call with the
same arguments was made again soon after (at once, or once the request was handed out again)
and answered the same way (the world had not moved). symptoms.explain walks it back as it does
a tool error (to the call that lacked what was needed, the hand-over that gave the failing value,
the report that misread it). One symptom per refused request, at its first asking. It reads
the calls of instrumented sessions; a message log's tool outputs are messages, which it does
not read, so only the ranker of instrumented sessions takes it as an input (TESTBED_ONLY).
"""
from __future__ import annotations

from ..graph import TransitionGraph
from ..symptoms import Symptom, explain
from .base import Evidence

WEIGHT = "origins"
SYMPTOMS = True
TESTBED_ONLY = True  # finds nothing in message logs (see the docstring)


def evidence(graph: TransitionGraph) -> list[Evidence]:
    out: list[Evidence] = []
    for u in graph.units:
        if u.asked_again_at is None or not u.failed:
            continue
        origin, path, reason = explain(graph, u.index)
        reason = f"asked again at step {u.asked_again_at} with the same answer, nothing came back; {reason}"
        out.append(Evidence(origin, reason, Symptom(u.index, "refusal", origin, path, reason)))
    return out
