"""The analysis and the replay results read for the report (docs/contracts.md §3, §5): each
step's scores, the detectors' frontier, the verdicts and their order, the step a tested
hypothesis edits, and its evidence.
"""
from __future__ import annotations

from dataclasses import dataclass, field

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
VERIFIED = ("validated", "partially_validated")
RANKING_RULE = ("ordered by what the replays showed (a verified fix first, more successful replays first), "
                "then by the analysis's rank; a step whose replays were all refuted comes last")

# why a step a person marked wrong heads the analysis's ranking (analysis.marks), as the report says it
PERSON_SOURCE = "person"
PERSON_RULE = ("A person marked step {steps} wrong: the analysis ranks a step a person marked first. The mark "
               "is evidence outside the learned ranker, since no labelled data teaches the ranker what such a "
               "mark is worth")


def person_marked(analysis: dict | None) -> list[int]:
    """The steps the analysis put first because a person marked them wrong."""
    return [step for h in hypotheses(analysis) if h.get("source") == PERSON_SOURCE
            and (step := whole(h.get("step"))) is not None]


EVIDENCE_SHOWN = ("marks", "detectors", "scores", "features", "path", "tool", "error", "symptoms", "signals",
                  "ranker", "hgt_expected")


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
        return (VERDICT_STRENGTH.get(verdict, 9) if isinstance(verdict, str) else 9, -successes(h),
                whole(h.get("round"), 0), whole(h.get("step"), 0))
    return sorted(hyps, key=key)


def successes(hypothesis: dict) -> int:
    return sum(1 for r in objects(hypothesis.get("runs")) if r.get("success"))


@dataclass
class Cause:
    """One suspected step: the analysis's hypothesis on it ({} where only the replay proposed
    it) and the replay's tests of it, strongest verdict first."""
    step: int
    analysed: dict = field(default_factory=dict)
    tested: list[dict] = field(default_factory=list)

    @property
    def verdict(self) -> str | None:
        verdict = self.tested[0].get("verdict") if self.tested else None
        return verdict if isinstance(verdict, str) else None

    @property
    def verified(self) -> bool:
        return self.verdict in VERIFIED

    @property
    def agent(self):
        return self.analysed.get("agent") or next((t.get("agent") for t in self.tested if t.get("agent")), None)

    @property
    def why(self):
        """Why the step is suspected: the verified replay's reason, else the analysis's rationale."""
        reason = self.tested[0].get("reason") if self.verified else None
        return reason or self.analysed.get("rationale") or next((t.get("reason") for t in self.tested
                                                                 if t.get("reason")), None)


def ranked_causes(analysis: dict | None, replay: dict | None) -> list[Cause]:
    """The report's one order of the suspected steps (RANKING_RULE): its headline is the first,
    the graph stars it, the trace marks them in this order and the ranked table lists them so."""
    causes: dict[int, Cause] = {}
    analysis_rank: dict[int, int] = {}
    for position, h in enumerate(hypotheses(analysis), start=1):
        if (step := whole(h.get("step"))) is not None and step not in causes:
            causes[step] = Cause(step, analysed=h)
            analysis_rank[step] = whole(h.get("rank"), position)
    for h in replay_hypotheses(replay):
        if (step := whole(h.get("step"))) is not None:
            causes.setdefault(step, Cause(step)).tested.append(h)
    proposed_by_replay = 1 << 30  # after every ranked step, in the replay's order

    def key(cause: Cause) -> tuple:
        rank = analysis_rank.get(cause.step, proposed_by_replay)
        if cause.verified:
            return (0, VERDICT_STRENGTH[cause.verdict or ""], -successes(cause.tested[0]), rank)
        return (2 if cause.verdict == "refuted" else 1, 0, 0, rank)
    return sorted(causes.values(), key=key)  # stable: steps only the replay proposed keep its order


def cause_label(cause: Cause) -> str:
    """What the report calls its first cause (the graph's star, its caption)."""
    return "verified root cause" if cause.verified else "top hypothesis"


def tested_in_order(analysis: dict | None, replay: dict | None) -> list[dict]:
    """The replay's tested hypotheses in the report's one order (`ranked_causes`); one on no
    readable step last."""
    stepless = [h for h in replay_hypotheses(replay) if whole(h.get("step")) is None]
    return [t for cause in ranked_causes(analysis, replay) for t in cause.tested] + stepless


def trial_number(hypothesis: dict) -> str:
    """The trial a tested hypothesis lies in, counted from 1 as the trace's "Trial n" headings
    are (the stored index counts from 0)."""
    index = whole(hypothesis.get("trial"))
    return "?" if index is None else str(index + 1)


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
    marks = objects(evidence.get("marks"))
    if marks:  # a person's marks on the step (analysis.marks): what puts it first
        items.append(("marked by a person", "; ".join(escape(", ".join(
            [*([f"label {m['label']!r}"] if m.get("label") else []),
             *([f"score {fmt_score(m['score'], 1)}"] if m.get("score") is not None else [])])
            + (f": {one_line(m['comment'], 240)}" if m.get("comment") else "")) for m in marks[:4])))
    if evidence.get("detectors"):
        items.append(("detectors", ", ".join(escape(d) for d in listed(evidence["detectors"]))))
    ranker = fields(evidence.get("ranker"))
    if ranker:
        in_words = [str(w) for w in listed(ranker.get("in_words")) if w]
        items.append(("learned ranker", escape(f"score {fmt_score(ranker.get('score'))}"
                                               + (f": {'; '.join(in_words)}" if in_words else ""))))
    scores = fields(evidence.get("scores"))
    if scores:
        items.append(("detector scores", ", ".join(f"{escape(k)} {escape(fmt_score(v))}" for k, v in scores.items())))
    feats = evidence.get("features") or {}
    if isinstance(feats, dict) and feats:
        items.append(("features", ", ".join(f"{escape(k)}={escape(fmt_score(v))}" for k, v in list(feats.items())[:8])))
    if evidence.get("path"):
        items.append(("dependency path", " → ".join(escape(s) for s in listed(evidence["path"]))))
    if evidence.get("tool"):
        items.append(("tool", escape(evidence["tool"])))
    if evidence.get("error"):
        items.append(("error", escape(one_line(evidence["error"], 240))))
    signals = [str(w) for w in listed(evidence.get("signals")) if isinstance(w, str) and w]
    if signals:
        items.append(("signals", escape("; ".join(signals[:6]))))
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
