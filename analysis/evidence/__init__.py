"""The evidence detectors: the rules that say where in a failed session the failure started,
one module each, registered in REGISTRY.

Each module's docstring says what generic failure it detects; its `evidence(graph)` reads the
session's transition units and returns per-step evidence (base.Evidence). The graph
heuristics (hypotheses.rank_hypotheses) add up the evidence of the detectors they are given,
REGISTRY by default, and the learned ranker reads each detector's findings as an input of its
own (ranker.py's `evidence_<name>`, with its own weight), so switching a detector off is
leaving it out of that tuple: `without`.
The readings the detectors rely on (values a step was shown, records in tool results, what
counts as a failed call) are filled into the units by units.build_units and stay there, as
the IsolationForest reads them too (features.py).

Symptom detectors (failures that show, walked back to their origin by symptoms.explain):
tool_errors, refused_requests, failure_claims, final_answer, unfounded_answer. Silent detectors (a step
that went wrong without anything failing there): invented_values, task_conflicts,
answer_conflicts, omitted_records, misattributed_values, restated_fields (one bonus per
step between them), unacted_claims, repeated_handovers.
"""
from __future__ import annotations

from typing import Iterable

from ..graph import TransitionGraph
from ..symptoms import Symptom
from . import (answer_conflicts, failure_claims, final_answer, invented_values, misattributed_values, omitted_records,
               refused_requests, repeated_handovers, restated_fields, task_conflicts, tool_errors, unacted_claims,
               unfounded_answer)
from .base import Evidence, EvidenceDetector

# In the order the heuristics credit them (a step's reasons in a report follow it).
REGISTRY: tuple[EvidenceDetector, ...] = tuple(EvidenceDetector.of(module) for module in (
    tool_errors, refused_requests, failure_claims, final_answer, unfounded_answer,
    invented_values, task_conflicts, answer_conflicts, omitted_records, misattributed_values, restated_fields,
    unacted_claims, repeated_handovers,
))
NAMES: tuple[str, ...] = tuple(d.name for d in REGISTRY)


def without(*names: str) -> tuple[EvidenceDetector, ...]:
    """REGISTRY less the named detectors (an ablation)."""
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        raise ValueError(f"no evidence detector {', '.join(unknown)} (known: {', '.join(NAMES)})")
    return tuple(d for d in REGISTRY if d.name not in names)


def findings(graph: TransitionGraph, detectors: Iterable[EvidenceDetector] = REGISTRY) -> dict[str, list[Evidence]]:
    """Each detector's evidence in the session, by name: read once, then weighed by the graph
    heuristics (hypotheses.rank_hypotheses) and given to the learned ranker, one input each."""
    return {d.name: d.evidence(graph) for d in detectors}


def find_symptoms(graph: TransitionGraph, failed: bool, detectors: Iterable[EvidenceDetector] = REGISTRY,
                  found_by: dict[str, list[Evidence]] | None = None) -> list[Symptom]:
    """The symptom detectors' symptoms in step order, each walked back (from `found_by`, the
    detectors' findings, when already read). The final answer is one only in a failed run,
    and once: as an unfounded answer when that detector finds it."""
    found = [e.symptom for d in detectors if d.reads_symptoms
             for e in (found_by[d.name] if found_by is not None else d.evidence(graph)) if e.symptom is not None]
    answers = [s for s in found if s.kind == "final_answer"]
    out = sorted((s for s in found if s.kind != "final_answer"), key=lambda s: s.step)
    if failed and answers:
        out.append(max(answers, key=lambda s: s.carries_no_finding))
    return out


__all__ = ["Evidence", "EvidenceDetector", "NAMES", "REGISTRY", "find_symptoms", "findings", "without"]
