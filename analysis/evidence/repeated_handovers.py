"""A hand-over said again word for word after its first round went well: the next request
went wrong.

The generic failure: a coordinator (or a lone agent, to itself) hands the same agent the same
words it handed before, when that round got its result and nothing failed: the work was
done, so this is no retry but the same item asked twice and the one still to do never
asked. A round that got nothing makes asking again a retry, which this does not flag.
Works on message logs and instrumented sessions.

Not a ranker input (base.py): it earns on neither the Who&When dev split nor the demo apps'
labelled sessions (the benches' leave-one-detector-out tables), so the graph heuristics weigh
it and the report shows it, and the learned rankers leave it out.
"""
from __future__ import annotations

from ..graph import TransitionGraph
from ..roles import hub_agents, in_words_only, is_coordinator, single_agent
from ..transition_unit import TransitionUnit
from .base import Evidence

WEIGHT = "unsupported"
RANKER_INPUT = False


def evidence(graph: TransitionGraph) -> list[Evidence]:
    return [Evidence(k, f"hands over again, word for word, the request of step {first}, "
                        "whose round already got its result")
            for k, first in sorted(repeated_handovers(graph.units).items())]


def repeated_handovers(units: list[TransitionUnit]) -> dict[int, int]:
    """{step: earlier step} for a coordinator's hand-over (or a lone agent's words to itself
    before it acts) that says word for word what it handed the same agent before, when that
    earlier round went well (a call returned a result, no step failed, the report claims no
    failure and was not handed out again): the work was done, so saying it again is not a
    retry but the next request gone wrong (the same item asked twice, the one still to do
    never asked)."""
    givers = hub_agents([u.agent for u in units]) | {u.agent for u in units if is_coordinator(u.agent)}
    alone = single_agent(units)
    n = len(units)
    done: dict[tuple[str, str, str], int] = {}  # (giver, taker, words) -> the hand-over whose round went well
    out: dict[int, int] = {}
    for k in range(n - 1):
        u = units[k]
        if alone:
            # An agent alone hands itself work in the words-only step it acts on at once;
            # the round runs through its calls to the report in words that follows them.
            if not in_words_only(u) or not units[k + 1].action["calls"]:
                continue
            end = next((j + 1 for j in range(k + 2, n) if in_words_only(units[j])), n)
        elif u.kind != "llm" or u.agent not in givers or u.action["calls"] or units[k + 1].agent == u.agent:
            continue
        else:
            end = next((j for j in range(k + 1, n) if units[j].agent == u.agent), n)
        words = " ".join(u.action["text"].split())
        if len(words) < 20:
            continue
        key = (u.agent, units[k + 1].agent, words)
        if key in done:
            out[k] = done[key]
            continue
        round_ = units[k + 1:end]
        if (any(w.outcome == "result" for w in round_) and not any(w.failed for w in round_)
                and not any(w.claims_failure or w.round_failed for w in round_)):
            done[key] = k
    return out
