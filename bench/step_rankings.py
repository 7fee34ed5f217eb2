"""Scoring a ranking of a session's steps against its labelled mistake step, for the
localization benches (bench/localization.py and its robustness suite on the demo apps,
bench/whowhen.py on real logs): steps ordered by a score, top-1 / hit@3 / step error, what a
uniformly random step would get, and the demo benches' error-position baselines (a benchmark
helper, not product).
"""
from __future__ import annotations

from typing import Sequence


def by_score(values: Sequence[float]) -> list[int]:
    """Step indices by score, highest first; ties: the earlier step first."""
    return sorted(range(len(values)), key=lambda k: (-values[k], k))


def hits(ranked: Sequence[int], truth: int) -> dict[str, float]:
    """top-1 and hit@3 of a ranking (an empty one hits nothing)."""
    return {"top1": float(bool(ranked) and ranked[0] == truth), "hit3": float(truth in ranked[:3])}


def random_hits(n: int) -> dict[str, float]:
    """The expected top-1 and hit@3 of a uniformly random step of n."""
    return {"top1": 1 / n, "hit3": min(3, n) / n}


def evaluate(predictions: Sequence[int], truth: int, n: int) -> dict:
    """top-1, hit@3 and how far the first prediction is from the truth (n: no prediction)."""
    first = predictions[0] if predictions else -1
    return {**hits(predictions, truth), "err": abs(first - truth) if first >= 0 else n}


def recency_baseline(units) -> int:
    """The last step with an error, else the last step."""
    errors = [u.index for u in units if u.status == "error"]
    return errors[-1] if errors else units[-1].index


def frequency_baseline(units, window: int = 3) -> int:
    """The centre of the densest error region (`window` steps), else the last step."""
    errors = [1 if u.status == "error" else 0 for u in units]
    if not any(errors):
        return units[-1].index
    best, best_start = -1, 0
    for start in range(0, max(len(units) - window + 1, 1)):
        count = sum(errors[start:start + window])
        if count > best:
            best, best_start = count, start
    region = [i for i in range(best_start, min(best_start + window, len(units))) if errors[i]]
    return region[len(region) // 2]
