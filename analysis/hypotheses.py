"""Ranked failure hypotheses from the detectors' frontiers and the dependency graph.

A failure surfaces late (an error, a wrong final answer) but usually starts earlier: the
step that invented a wrong value, gave a wrong instruction, or misread a result. So besides
each frontier group's peak step, the evidence detectors of evidence/ propose steps: the
symptom detectors walk every symptom back along the transition graph (symptoms.py) to its
origin, and the silent ones name steps that went wrong without anything failing there
(values a step acts on that its input never showed it or attaches to the wrong record, a
success reported without an action, a hand-over said again). Which detectors count is one
argument, the registry by default. Each hypothesis keeps its evidence separate per
detector, the features that made its step stand out, and the dependency path from the
symptom back to it; `evidence_packet` prunes that to what an analyst needs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .evidence import REGISTRY, Evidence, EvidenceDetector, find_symptoms, findings
from .features import FEATURE_NAMES
from .frontier import union_groups
from .graph import TransitionGraph
from .transition_unit import TransitionUnit

@dataclass(frozen=True)
class EvidenceWeights:
    """How much each kind of evidence adds to a step's combined detector score (in [0, 1]).
    Specific evidence outranks a generic anomaly: the detectors' score counts half, so it
    orders steps the graph evidence cannot tell apart (and every step when there is none)."""
    detectors: float = 0.5
    origins: tuple[float, ...] = (1.2, 0.8, 0.5, 0.3)  # origin of the 1st, 2nd, ... symptom (failures cascade)
    frontier: float = 0.2  # flagged by at least one detector's frontier
    unsupported: float = 1.0  # acts on a value its input never showed it, or misreads / mispicks a record
    unacted_claim: float = 1.0  # reports success without having acted
    final_answer: float = 0.4  # the answer of a failed run with no earlier symptom
    unfounded_answer: float = 1.2  # ... that names none of the values its tool results showed


DEFAULT_WEIGHTS = EvidenceWeights()
MAX_HYPOTHESES = 5


def _normalized(scores: Sequence[float]) -> list[float]:
    lo, hi = float(min(scores)), float(max(scores))  # plain floats: results must stay JSON
    if hi - lo < 1e-12:
        return [0.0] * len(scores)
    return [(float(s) - lo) / (hi - lo) for s in scores]


def combined_scores(scores_by_detector: dict[str, Sequence[float]], n: int) -> list[float]:
    """Mean of the detectors' min-max normalized scores per step."""
    if not scores_by_detector or n == 0:
        return [0.0] * n
    norm = [_normalized(s) for s in scores_by_detector.values()]
    return [sum(col[k] for col in norm) / len(norm) for k in range(n)]


def top_features(features: Any, step: int, k: int = 3) -> dict[str, float]:
    """The features on which `step` stands furthest from the run's median (robust z)."""
    import numpy as np

    X = np.asarray(features, dtype=float)
    if X.size == 0:
        return {}
    med = np.median(X, axis=0)
    spread = np.median(np.abs(X - med), axis=0) * 1.4826
    spread = np.where(spread < 1e-9, X.std(axis=0) + 1e-9, spread)
    z = np.abs(X[step] - med) / spread
    order = np.argsort(-z, kind="stable")[:k]
    return {FEATURE_NAMES[i]: round(float(X[step, i]), 4) for i in order if z[i] > 1e-6}


def rank_hypotheses(graph: TransitionGraph, scores_by_detector: dict[str, Sequence[float]],
                    frontier: dict[str, list[int]], features: Any, failed: bool = True,
                    limit: int = MAX_HYPOTHESES, weights: EvidenceWeights = DEFAULT_WEIGHTS,
                    evidence: Sequence[EvidenceDetector] = REGISTRY,
                    found_by: dict[str, list[Evidence]] | None = None) -> list[dict[str, Any]]:
    """Ranked hypotheses (docs/contracts.md section 3, `hypotheses`), source "detectors".

    Candidates: each frontier group's peak, each symptom's origin, and the steps the silent
    evidence detectors name (`evidence`: the registry, or fewer for an ablation; `found_by`:
    their findings, evidence.findings, when the caller has read them already). Score: the
    detectors' combined score plus the weight of each piece of evidence, so a step
    supported by both the detectors and the dependency graph wins.
    """
    import numpy as np

    n = len(graph)
    if n == 0:
        return []
    X = np.asarray(features, dtype=float).reshape(n, len(FEATURE_NAMES))
    base = combined_scores(scores_by_detector, n)
    candidates: dict[int, dict[str, Any]] = {}

    def candidate(step: int) -> dict[str, Any]:
        return candidates.setdefault(step, {"step": step, "group": [step], "bonus": 0.0, "why": [],
                                            "paths": [], "symptoms": []})

    for group in union_groups(frontier):
        peak = max(group["steps"], key=lambda s: (base[s], -s))
        candidate(peak)["group"] = group["steps"]
    if found_by is None:
        found_by = findings(graph, evidence)
    symptoms = find_symptoms(graph, failed, evidence, found_by)
    # The silent detectors' evidence (a step went wrong without anything failing there).
    silent = [(d, found_by[d.name]) for d in evidence if not d.reads_symptoms] if failed else []
    silent_suspects = {e.step for _, found in silent for e in found}
    origins_seen: list[int] = []
    for symptom in symptoms:
        c = candidate(symptom.origin)
        if symptom.kind == "final_answer" and origins_seen:
            continue  # an earlier symptom already explains the wrong answer
        if symptom.kind == "final_answer":
            # A silent suspect earlier in the run explains a wrong answer better than the answer.
            weight = weights.unfounded_answer if symptom.carries_no_finding else weights.final_answer
            weight = weight if not silent_suspects else weight / 3
        else:
            if symptom.origin in origins_seen:
                continue
            weight = weights.origins[min(len(origins_seen), len(weights.origins) - 1)]
            origins_seen.append(symptom.origin)
        c["bonus"] += weight
        c["paths"].append(symptom.path)
        c["symptoms"].append({"step": symptom.step, "kind": symptom.kind, "reason": symptom.reason})
    credited: set[tuple[str, int]] = set()  # (group, step): a group's weight counts once per step
    for detector, found in silent:
        for e in found:
            c = candidate(e.step)
            if (detector.group, e.step) not in credited:
                credited.add((detector.group, e.step))
                c["bonus"] += getattr(weights, detector.weight)
            c["why"].append(e.reason)

    flagged = {s for steps in frontier.values() for s in steps}
    for step, c in candidates.items():
        c["score"] = weights.detectors * base[step] + c["bonus"] + (weights.frontier if step in flagged else 0.0)
    ranked = sorted(candidates.values(), key=lambda c: (-c["score"], c["step"]))[:limit]
    top = ranked[0]["score"] if ranked else 1.0
    out = []
    for rank, c in enumerate(ranked, start=1):
        u = graph.units[c["step"]]
        detectors = sorted(name for name, steps in frontier.items() if c["step"] in steps)
        path = min(c["paths"], key=len) if c["paths"] else [c["step"]]
        out.append({
            "rank": rank, "step": c["step"], "agent": u.agent,
            "score": round(c["score"] / top, 4) if top > 0 else 0.0,
            "source": "detectors",
            "rationale": _rationale(graph, c, detectors),
            "evidence": {
                "detectors": detectors,
                "scores": {name: round(float(s[c["step"]]), 4) for name, s in scores_by_detector.items()},
                "features": top_features(X, c["step"]),
                "path": path,
                "symptoms": c["symptoms"],
                "signals": c["why"],
                "group": c["group"],
                "tool": u.tool,
                "error": u.error_text,
                "phase": u.phase,
            },
        })
    return out


def _failed_with(graph: TransitionGraph, u: TransitionUnit) -> str:
    """A step's error in a rationale, and how the run got past it: the same calls made again
    worked, or failed otherwise (a timeout, then the refusal the run went on with)."""
    text = f"failed with {u.error_text!r}"
    if u.recovered_by is None:
        return text
    retry = graph.units[u.recovered_by]
    how = "worked" if retry.status != "error" else "failed otherwise"
    return f"{text}, then {how} when made again at step {retry.index}"


def _rationale(graph: TransitionGraph, c: dict, detectors: list[str]) -> str:
    u = graph.units[c["step"]]
    parts = []
    for s in c["symptoms"]:
        if s["step"] == u.index:
            parts.append(f"{s['kind'].replace('_', ' ')} here ({s['reason']})")
        else:
            parts.append(f"origin of the {s['kind'].replace('_', ' ')} at step {s['step']} ({s['reason']})")
    parts += c["why"]
    if detectors:
        parts.append(f"anomalous to {' and '.join(detectors)}")
    if u.error_text and not any(s["step"] == u.index for s in c["symptoms"]):
        parts.append(_failed_with(graph, u))
    if not parts:
        parts.append("peaks within its frontier group")
    return f"Step {u.index} ({u.agent}, {u.phase}): " + "; ".join(parts) + "."


def evidence_packet(graph: TransitionGraph, hypothesis: dict[str, Any], context: int = 1) -> dict[str, Any]:
    """What an analyst needs about one hypothesis: its turning-point step, the detector
    signals supporting it, and the minimal CTG context (neighbours and the dependency path),
    as one-line summaries; routine steps elsewhere are dropped."""
    step = hypothesis["step"]
    n = len(graph)
    keep = set(hypothesis["evidence"].get("path", [])) | {step}
    keep |= {s for s in range(step - context, step + context + 1) if 0 <= s < n}
    keep |= set(graph.dependency_sources(step))
    return {
        "step": step, "agent": hypothesis["agent"],
        "detectors": hypothesis["evidence"]["detectors"],
        "features": hypothesis["evidence"]["features"],
        "path": hypothesis["evidence"].get("path", []),
        "steps": [graph.units[s].summary(200) for s in sorted(keep)],
    }


def rerank_hypotheses(graph: TransitionGraph, hypotheses: list[dict[str, Any]], ranker: Any,
                      inputs: Sequence[Sequence[float]], ranker_scores: Sequence[float],
                      scores_by_detector: dict[str, Sequence[float]],
                      limit: int = MAX_HYPOTHESES) -> list[dict[str, Any]]:
    """The learned ranker's top steps as hypotheses, most suspect first.

    A step the graph heuristics also proposed keeps their evidence (symptoms, paths,
    signals); a step only the ranker proposes gets the inputs that raised it as evidence.
    Each hypothesis records the ranker's score and its reasons under `evidence.ranker`."""
    n = len(graph)
    by_step = {h["step"]: h for h in hypotheses}
    order = sorted(range(n), key=lambda k: (-ranker_scores[k], k))[:limit]
    lo, hi = min(ranker_scores), max(ranker_scores)
    out = []
    for rank, step in enumerate(order, start=1):
        reasons = ranker.contributions(inputs[step])
        in_words = ranker.reasons(inputs[step])
        h = by_step.get(step)
        if h is None:
            u = graph.units[step]
            h = {"step": step, "agent": u.agent, "source": "ranker",
                 "rationale": (f"Step {step} ({u.agent}, {u.phase}): ranked suspect by the learned step ranker "
                               f"({'; '.join(in_words) or 'no single input stands out'})"
                               + (f"; {_failed_with(graph, u)}" if u.error_text else "") + "."),
                 "evidence": {"detectors": [], "scores": {name: round(float(s[step]), 4)
                                                          for name, s in scores_by_detector.items()},
                              "features": {}, "path": [step], "symptoms": [], "signals": [], "group": [step],
                              "tool": u.tool, "error": u.error_text, "phase": u.phase}}
        else:
            h = {**h, "evidence": dict(h["evidence"])}
        h["rank"] = rank
        h["score"] = round((ranker_scores[step] - lo) / (hi - lo), 4) if hi > lo else 1.0
        h["evidence"]["ranker"] = {"score": round(float(ranker_scores[step]), 4), "reasons": reasons,
                                   "in_words": in_words}
        out.append(h)
    return out
