"""Ranked failure hypotheses from the detectors' frontiers and the dependency graph.

A failure surfaces late (an error, a wrong final answer) but usually starts earlier: the
step that invented a wrong value, gave a wrong instruction, or misread a result. So besides
each frontier group's peak step, we walk back from every symptom along dependency edges
(the bad artifact to the step that first produced it, a repeated error to its first
occurrence) and propose the origin. Each hypothesis keeps its evidence separate per
detector, the features that made its step stand out, and the dependency path from the
symptom back to it; `evidence_packet` prunes that to what an analyst needs.
"""
from __future__ import annotations

from typing import Any, Sequence

from .features import FEATURE_NAMES
from .frontier import union_groups
from .graph import ARTIFACT, LOOP, SAME_ERROR, TransitionGraph
from .units import extract_artifacts

# How much each kind of evidence adds to a step's detector score (both in [0, 1]).
ORIGIN_WEIGHT = 0.6  # the step a symptom's dependency path leads back to
FRONTIER_WEIGHT = 0.2  # flagged by at least one detector's frontier
MAX_HYPOTHESES = 5


def _normalized(scores: Sequence[float]) -> list[float]:
    lo, hi = min(scores), max(scores)
    if hi - lo < 1e-12:
        return [0.0] * len(scores)
    return [(float(s) - lo) / (hi - lo) for s in scores]


def combined_scores(scores_by_detector: dict[str, Sequence[float]], n: int) -> list[float]:
    """Mean of the detectors' min-max normalized scores per step."""
    if not scores_by_detector or n == 0:
        return [0.0] * n
    norm = [_normalized(s) for s in scores_by_detector.values()]
    return [sum(col[k] for col in norm) / len(norm) for k in range(n)]


def symptom_steps(graph: TransitionGraph, failed: bool) -> list[int]:
    """Where the failure shows: the first step of each distinct error, and the final step of
    a failed run (its wrong or missing answer)."""
    out: list[int] = []
    seen: set[str] = set()
    for u in graph.units:
        if u.status == "error" and u.error_signature not in seen:
            seen.add(u.error_signature or "")
            out.append(u.index)
    if failed and graph.units and graph.units[-1].index not in out:
        out.append(graph.units[-1].index)
    return out


def suspicious_artifacts(graph: TransitionGraph, step: int) -> set[str]:
    """The values a symptom step is likely wrong about: those its error message names, else
    every value it consumed."""
    u = graph.units[step]
    consumed = u.artifacts_consumed
    if u.error_text:
        named = extract_artifacts(u.error_text) & consumed
        if named:
            return named
    return set(consumed)


def trace_back(graph: TransitionGraph, symptom: int, max_hops: int = 50) -> list[int]:
    """Dependency path from `symptom` back to where its trouble started: [symptom, ..., origin].

    Follows, most specific first: a repeated error to its previous occurrence, a repeated
    call to the previous identical call, then the suspicious artifact to the latest step
    that produced it (and that step's own source of the same value), always moving back in
    time.
    """
    path = [symptom]
    current = symptom
    wanted = suspicious_artifacts(graph, symptom)
    for _ in range(max_hops):
        ins = graph.in_edges(current, (SAME_ERROR, LOOP, ARTIFACT))
        prev = [e for e in ins if e.type == SAME_ERROR] or [e for e in ins if e.type == LOOP]
        if not prev and wanted:
            prev = [e for e in ins if e.type == ARTIFACT and e.label in wanted]
        if not prev:
            break
        # The latest source: the value's most recent hand-over, walked one hop at a time.
        edge = max(prev, key=lambda e: e.src)
        if edge.type == ARTIFACT:
            wanted = {edge.label}
        current = edge.src
        path.append(current)
    return path


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
                    limit: int = MAX_HYPOTHESES) -> list[dict[str, Any]]:
    """Ranked hypotheses (docs/contracts.md section 3, `hypotheses`), source "detectors"."""
    n = len(graph)
    if n == 0:
        return []
    base = combined_scores(scores_by_detector, n)
    candidates: dict[int, dict[str, Any]] = {}

    def candidate(step: int) -> dict[str, Any]:
        return candidates.setdefault(step, {"step": step, "group": [step], "paths": [], "origin_of": []})

    for group in union_groups(frontier):
        peak = max(group["steps"], key=lambda s: (base[s], -s))
        candidate(peak)["group"] = group["steps"]
    for symptom in symptom_steps(graph, failed):
        path = trace_back(graph, symptom)
        c = candidate(path[-1])
        c["paths"].append(path)
        c["origin_of"].append(symptom)

    flagged = {s for steps in frontier.values() for s in steps}
    for step, c in candidates.items():
        c["score"] = base[step] + (ORIGIN_WEIGHT if c["origin_of"] else 0.0) + \
            (FRONTIER_WEIGHT if step in flagged else 0.0)
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
                "features": top_features(features, c["step"]),
                "path": path,
                "group": c["group"],
                "tool": u.tool,
                "error": u.error_text,
                "phase": u.phase,
            },
        })
    return out


def _rationale(graph: TransitionGraph, c: dict, detectors: list[str]) -> str:
    u = graph.units[c["step"]]
    parts = []
    if detectors:
        parts.append(f"is anomalous to {' and '.join(detectors)}")
    if c["origin_of"]:
        parts.append("is where the dependency path from the symptom at step"
                     f"{'s' if len(c['origin_of']) > 1 else ''} "
                     f"{', '.join(map(str, c['origin_of']))} leads back")
    if u.error_text:
        parts.append(f"failed with {u.error_text!r}")
    if not parts:
        parts.append("peaks within its frontier group")
    return f"Step {u.index} ({u.agent}, {u.phase}) " + "; ".join(parts) + "."


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
