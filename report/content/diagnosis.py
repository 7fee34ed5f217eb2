"""The analysis and the replay results read for the report (docs/contracts.md §3, §5): each
step's scores, the detectors' frontier, the verdicts and their order, the step a tested
hypothesis edits, and its evidence.
"""
from __future__ import annotations

from tracefix.report.content.values import fields, fmt_score, hypotheses, listed, objects, one_line, whole

VERDICT_WORDS = {
    "validated": "validated",
    "partially_validated": "partially validated",
    "refuted": "refuted",
    "inconclusive": "inconclusive",
    "error": "error (no replay ran through)",
}
# Order in which verdicts make a hypothesis the report's headline.
VERDICT_STRENGTH = {"validated": 0, "partially_validated": 1, "inconclusive": 2, "refuted": 3, "error": 4}

EVIDENCE_SHOWN = ("detectors", "features", "path", "tool", "error", "symptoms", "hgt_expected")


def verdict_word(verdict) -> str:
    if not verdict:
        return "not tested"
    return VERDICT_WORDS.get(verdict, verdict) if isinstance(verdict, str) else str(verdict)


def score_by_step(analysis: dict | None) -> dict[int, dict]:
    return {step: s for s in objects(fields(analysis).get("scores")) if (step := whole(s.get("step"))) is not None}


def recovered_by(score: dict | None) -> int | None:
    """For an error step the run got past (its calls made again worked, or failed otherwise
    for good), the step that made them again: the analysis's `recovered_by`."""
    return whole(fields(score).get("recovered_by"))


def got_past_by_step(analysis: dict | None) -> dict[int, int]:
    """Every error step the run got past, with the step that made its calls again."""
    return {step: by for step, s in score_by_step(analysis).items() if (by := recovered_by(s)) is not None}


def _flat_steps(steps) -> list[int]:
    """A detector's frontier: step numbers, also when grouped in lists (contiguous groups)."""
    out = []
    for s in steps or []:
        if isinstance(s, (list, tuple)):
            out += _flat_steps(s)
        elif isinstance(s, (int, float)) or (isinstance(s, str) and s.isdigit()):
            out.append(int(s))
    return out


def frontier_steps(analysis: dict) -> set[int]:
    """The union of every detector's frontier (the steps the report highlights)."""
    return {s for steps in fields(analysis.get("frontier")).values() for s in _flat_steps(steps)}


def frontier_of(analysis: dict, detector: str) -> list[int]:
    return _flat_steps(fields(analysis.get("frontier")).get(detector))


def frontier_by_step(analysis: dict | None) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for detector in fields(fields(analysis).get("frontier")):
        for s in frontier_of(analysis, detector):
            out.setdefault(s, []).append(detector)
    return out


def replay_hypotheses(replay: dict | None) -> list[dict]:
    """Tested hypotheses, strongest verdict first (then by success count)."""
    hyps = hypotheses(replay)

    def key(h):
        verdict = h.get("verdict")
        return (VERDICT_STRENGTH.get(verdict, 9) if isinstance(verdict, str) else 9,
                -sum(1 for r in objects(h.get("runs")) if r.get("success")),
                whole(h.get("round"), 0), whole(h.get("step"), 0))
    return sorted(hyps, key=key)


def tested_step(hypothesis: dict) -> int | None:
    """The step a tested hypothesis's intervention edits: the intervention's own, else the
    hypothesis's."""
    iv = fields(hypothesis.get("intervention"))
    return whole(iv.get("step"), whole(hypothesis.get("step")))


def evidence_items(evidence: dict, escape=str) -> list[tuple[str, str]]:
    """The evidence fields a person reads first, as (label, text) pairs; ``escape`` is
    applied to every piece of recorded text (the HTML renderer passes html.escape)."""
    evidence = fields(evidence)
    items = []
    if evidence.get("detectors"):
        items.append(("detectors", ", ".join(escape(d) for d in listed(evidence["detectors"]))))
    feats = evidence.get("features") or {}
    if isinstance(feats, dict) and feats:
        items.append(("features", ", ".join(f"{escape(k)}={escape(fmt_score(v))}" for k, v in list(feats.items())[:8])))
    if evidence.get("path"):
        items.append(("dependency path", " → ".join(escape(s) for s in listed(evidence["path"]))))
    if evidence.get("tool"):
        items.append(("tool", escape(evidence["tool"])))
    if evidence.get("error"):
        items.append(("error", escape(one_line(evidence["error"], 240))))
    symptoms = objects(evidence.get("symptoms"))
    if symptoms:
        items.append(("symptoms", "; ".join(escape(f"step {s.get('step')}: {s.get('reason') or s.get('kind')}")
                                            for s in symptoms[:4])))
    expected = fields(evidence.get("hgt_expected"))
    surprises = [f"{attr} {v.get('actual')} (expected {v.get('expected')}, p={fmt_score(v.get('p_actual'))})"
                 for attr, v in expected.items() if isinstance(v, dict) and v.get("expected") != v.get("actual")]
    if surprises:
        items.append(("HGT surprise", escape("; ".join(surprises))))
    return items


def evidence_rest(evidence: dict) -> dict:
    return {k: v for k, v in fields(evidence).items() if k not in EVIDENCE_SHOWN and v not in (None, "", [], {})}


def before_label(iv: dict) -> str:
    return {"replace_output": "before: the original output at step t",
            "add_message": "before: the last input message at step t (the edit is added after it)",
            "replace_tool_result": "before: the original tool result"}.get(iv.get("kind"), "before (original)")


def after_label(iv: dict) -> str:
    return {"replace_output": "after: the output put in its place",
            "add_message": "after: the message added to the input of step t",
            "replace_tool_result": "after: the tool result put in its place"}.get(iv.get("kind"), "after (the edit)")
