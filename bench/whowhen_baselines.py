"""The baselines bench/whowhen.py sets the product against on the Who&When logs, each a
step ranking from the stored session alone: the first agent turns, the first error-looking
steps, recency, the first worker turns (the rule the ranker largely learns on coordinated
teams), and a uniformly random step's expected scores (a benchmark helper, not product).
"""
from __future__ import annotations

import re

from step_rankings import random_hits

# Generic failure words only: nothing specific to these tasks or frameworks.
ERROR_LOOKING = re.compile(r"\b(error|exception|traceback|failed|cannot)\b", re.I)


def agent_key(speaker: str | None) -> str:
    """'Orchestrator (-> WebSurfer)' -> 'orchestrator': the agent behind a speaker label."""
    from tracefix.analysis.roles import speaker_of

    return speaker_of(str(speaker or ""))


def error_looking_steps(doc: dict) -> list[int]:
    from tracefix.collector.document import content_text

    return [k for k, s in enumerate(doc["steps"])
            if ERROR_LOOKING.search(content_text((s.get("output_message") or {}).get("content")))]


def first_worker_turns(doc: dict) -> list[int]:
    """The turns of the agents a coordinator hands work to, in order (no coordinator: the
    agents' turns), then the rest: what the ranker learns on a coordinated team, as a rule."""
    from tracefix.analysis.roles import HUMAN_ROLES, coordinating_speaker

    speakers = [agent_key(s.get("agent")) for s in doc["steps"]]
    agents = [sp not in HUMAN_ROLES for sp in speakers]
    hub = coordinating_speaker(speakers, agents)
    first = [k for k, sp in enumerate(speakers) if agents[k] and sp != hub]
    return first + [k for k in range(len(speakers)) if k not in set(first)]


def baseline_rankings(doc: dict) -> dict[str, list[int]]:
    from tracefix.analysis.roles import HUMAN_ROLES

    steps = doc["steps"]
    n = len(steps)
    first_agent = next((k for k, s in enumerate(steps) if str(s.get("agent")).lower() not in HUMAN_ROLES), 0)
    return {"first agent turns": list(range(first_agent, n)),
            "first worker turns": first_worker_turns(doc),
            "first error-looking": error_looking_steps(doc) or [n - 1],
            "recency (last step)": list(range(n - 1, -1, -1))}


def random_expectation(truth: int, truth_agent: str, agents: list[str]) -> dict[str, float]:
    n = len(agents)
    return {**random_hits(n), "near2": sum(abs(k - truth) <= 2 for k in range(n)) / n,
            "agent": sum(agent_key(a) == truth_agent for a in agents) / n}
