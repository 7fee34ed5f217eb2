"""A person's marks on steps, read as evidence outside the learned model.

A negative mark (collector.marks.is_negative: a thumbs-down on one step) says where a person
saw the run go wrong. No labelled data teaches the ranker what such a mark is worth, so it is
not one of the ranker's inputs: it is applied after every ranking (detectors, learned ranker,
LLM analyst), and a marked step ranks first, with the mark quoted as the reason. Several
marked steps rank in step order (a failure starts at its earliest wrong step); the
detectors' order follows them.
"""
from __future__ import annotations

from typing import Any

from .graph import TransitionGraph
from .hypotheses import MAX_HYPOTHESES

PERSON = "person"  # the hypothesis `source` of a step a person marked
OUTSIDE_THE_MODEL = ("a person's mark ranks its step first, outside the learned ranker "
                     "(no labelled data teaches the ranker what such a mark is worth)")


def negative_marks(doc: dict, n_steps: int) -> dict[int, list[dict]]:
    """The negative marks on the document's steps, by step (steps the analysis has only)."""
    out: dict[int, list[dict]] = {}
    for mark in doc.get("annotations") or []:
        step = mark.get("step")
        if mark.get("negative") and isinstance(step, int) and 0 <= step < n_steps:
            out.setdefault(step, []).append(mark)
    return dict(sorted(out.items()))


def mark_words(mark: dict) -> str:
    """One mark as the report quotes it: label, score and comment, whichever it has."""
    parts = []
    if mark.get("label"):
        parts.append(f"label {mark['label']!r}")
    if mark.get("score") is not None:
        parts.append(f"score {mark['score']:g}")
    text = ", ".join(parts) or "a mark"
    return text + (f": \u201c{mark['comment']}\u201d" if mark.get("comment") else "")


def apply_marks(doc: dict, graph: TransitionGraph, hypotheses: list[dict[str, Any]],
                notes: list[str]) -> list[dict[str, Any]]:
    """`hypotheses` with each step a person marked negative first (source "person", the marks
    under `evidence.marks`, the reason in the rationale), then the others in their order."""
    marked = negative_marks(doc, len(graph))
    if not marked:
        return hypotheses
    by_step = {h["step"]: h for h in hypotheses}
    first = []
    for step, marks in marked.items():
        u = graph.units[step]
        before = by_step.get(step)
        h = {**before, "evidence": dict(before["evidence"])} if before else {
            "step": step, "agent": u.agent, "score": 0.0,
            "evidence": {"detectors": [], "features": {}, "path": [step], "symptoms": [], "signals": [],
                         "group": [step], "tool": u.tool, "error": u.error_text, "phase": u.phase}}
        said = "; ".join(mark_words(m) for m in marks)
        h["source"] = PERSON
        h["rationale"] = (f"Step {step} ({u.agent}, {u.phase}): marked wrong by a person ({said}); {OUTSIDE_THE_MODEL}."
                          + (f" The detectors ranked it {before['rank']}: {before['rationale']}" if before else
                             " The detectors did not propose it."))
        h["evidence"]["marks"] = [{k: m.get(k) for k in ("label", "score", "comment", "source", "created_at")}
                                  for m in marks]
        first.append(h)
        notes.append(f"step {step} ranks first: a person marked it ({said})")
    rest = [h for h in hypotheses if h["step"] not in marked]
    out = (first + rest)[:max(MAX_HYPOTHESES, len(first))]
    for rank, h in enumerate(out, start=1):
        h["rank"] = rank
    return out
