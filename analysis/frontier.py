"""The anomaly frontier (AgentTether section III-C2): rank a run's steps by one detector's
score, cut at the largest drop in the run's own score distribution, and group the frontier
steps that are contiguous in execution order. Detectors stay separate evidence planes;
`union_groups` merges their groups only when asked.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence


def frontier_cut(scores: Sequence[float], max_fraction: float = 0.5) -> list[int]:
    """Steps above the largest gap between consecutive sorted scores, in step order.

    The gap is looked for among the top `max_fraction` of the run, so a run with one big
    normal plateau cannot flag most of its steps. A flat run (all scores equal) has no
    frontier.
    """
    n = len(scores)
    if n == 0:
        return []
    order = sorted(range(n), key=lambda i: (-float(scores[i]), i))
    ranked = [float(scores[i]) for i in order]
    if n == 1:
        return [order[0]] if ranked[0] > 0 else []
    limit = max(1, math.ceil(n * max_fraction))
    drops = [ranked[i] - ranked[i + 1] for i in range(min(limit, n - 1))]
    best = max(range(len(drops)), key=lambda i: (drops[i], -i))
    if drops[best] <= 1e-12:
        return []
    return sorted(order[: best + 1])


def contiguous_groups(steps: Iterable[int]) -> list[list[int]]:
    """[3, 4, 5, 9] -> [[3, 4, 5], [9]]"""
    groups: list[list[int]] = []
    for s in sorted(set(steps)):
        if groups and s == groups[-1][-1] + 1:
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups


def frontiers(scores_by_detector: dict[str, Sequence[float]]) -> dict[str, list[int]]:
    """Frontier steps per detector (the `frontier` part of the analysis result)."""
    return {name: frontier_cut(scores) for name, scores in scores_by_detector.items()}


def union_groups(frontier_by_detector: dict[str, list[int]]) -> list[dict]:
    """The union of the detectors' frontier groups, each group remembering which detectors
    flagged which of its steps: [{"steps": [5, 6], "detectors": {"hgt": [6], ...}}]."""
    all_steps = sorted({s for steps in frontier_by_detector.values() for s in steps})
    out = []
    for group in contiguous_groups(all_steps):
        members = set(group)
        out.append({"steps": group,
                    "detectors": {name: [s for s in steps if s in members]
                                  for name, steps in frontier_by_detector.items()
                                  if any(s in members for s in steps)}})
    return out
