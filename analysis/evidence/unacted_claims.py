"""A worker reports its work done without having acted: a claim of success with no call.

The generic failure: an agent handed work says it is done (in so many words, or by handing
the round back as done) though it called no tool since it was handed that work; for a lone
agent, a claim of work with no call since its own instruction. The claim words are
units.py's success / failure claim patterns (a generic English phrase list: "done", "completed",
"succeeded", "failed", "could not"). Needs recorded tool calls: in a message log no step calls a tool,
so it finds nothing there.

Testbed-only (base.py): on the Who&When dev split it does not earn its place in the learned
ranker (bench/whowhen.py's leave-one-detector-out table), on the demo apps' labelled sessions it
does (bench/localization.py's), so only the instrumented-session ranker reads it.
"""
from __future__ import annotations

from ..graph import TransitionGraph
from ..roles import hub_agents, in_words_only, is_coordinator
from ..transition_unit import TransitionUnit
from .base import Evidence

WEIGHT = "unacted_claim"
TESTBED_ONLY = True


def evidence(graph: TransitionGraph) -> list[Evidence]:
    return [Evidence(k, "reports success without having called a tool")
            for k, flag in enumerate(unacted_claims(graph.units)) if flag > 0]


def unacted_claims(units: list[TransitionUnit]) -> list[float]:
    """1.0 for a text step of a worker (an agent that calls tools in this run, or any agent
    that neither coordinates nor is named like a coordinator) that called no tool since it
    was last handed work, and that either reports success in so many words or hands the
    round back as done: its last word to the agent who handed it the work, not a failure
    report (no failure words, the round not handed out again, not the words of a failed
    report said again). A claim without an action, whatever its wording. Message logs carry
    no calls: 0."""
    hubs = hub_agents([u.agent for u in units if u.kind == "llm"])
    tool_users = {u.agent for u in units if u.action["calls"]}
    tool_users |= {u.agent for u in units if u.kind == "llm" and not is_coordinator(u.agent) and u.agent not in hubs}
    out = [0.0] * len(units)
    acted: dict[str, bool] = {}
    failed_reports: set[tuple[str, str]] = set()
    for i, u in enumerate(units):
        before = units[i - 1] if i > 0 else None
        after_own_words = before is not None and before.agent == u.agent and in_words_only(before)
        if before is not None and (before.agent != u.agent or (after_own_words and not before.claims_success)):
            # Handed work anew: by another agent, or by its own plan or instruction (a single
            # agent hands itself each part of the work in words before it acts on it).
            acted[u.agent] = False
        # Right after its own claim, an agent sums up what it claimed (a single agent's
        # answer after its reports): no claim of its own.
        summing_up = after_own_words and before is not None and before.claims_success
        said = (u.agent, " ".join(u.action["text"].split()))
        if u.claims_failure or u.round_failed:
            failed_reports.add(said)
        if u.action["calls"]:
            acted[u.agent] = True
        elif u.agent not in tool_users or acted.get(u.agent, False) or u.claims_failure or summing_up:
            continue
        elif u.claims_success:
            out[i] = 1.0
        elif (u.kind == "llm" and u.action["text"].strip() and not u.round_failed and said not in failed_reports
              and i + 1 < len(units) and units[i + 1].agent != u.agent and i > 0 and units[i - 1].agent != u.agent):
            out[i] = 1.0  # answered the hand-over at once, in words only, and the round was taken as done
    return out
