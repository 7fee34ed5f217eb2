"""The report's one-paragraph summary (what most likely went wrong, what fix was verified,
what was refuted) and how the diagnosis was made: each stage and whether an LLM ran it.
"""
from __future__ import annotations

import re

from tracefix.report.content.diagnosis import ranked_causes, replay_hypotheses, verdict_word
from tracefix.report.content.session import task_text
from tracefix.report.content.values import brief, fields, hypotheses, listed, objects, plural

STAGE_NAMES = {
    "segmentation": "trial segmentation",
    "attribution": "failure attribution",
    "intervention": "intervention writing",
    "judging": "judging replays",
    "fulfilment": "judging whether an edit was followed",
    "progress": "judging progress",
}
HOW_WORDS = {"llm": "LLM", "fallback": "deterministic fallback", "template": "deterministic template",
             "evaluator": "the agent's evaluator", "heuristic": "heuristic", "milestones": "milestones",
             "ground_truth": "ground truth", "none": "not needed", "unknown": "unknown without an LLM judge"}


STEP_PREFIX = re.compile(r"^\s*step \d+ \([^)]*\):\s*", re.I)


def sentence(text) -> str:
    """A reason quoted after our own "step k (agent) —": without its own "Step k (agent):"
    prefix and without a full stop that ours would double."""
    return brief(STEP_PREFIX.sub("", str(text or "")), 220).rstrip(" .")


def notes(analysis: dict | None, replay: dict | None) -> list[str]:
    """The notes of both results, as text."""
    return [str(n) for result in (analysis, replay) for n in listed(fields(result).get("notes"))]


def how_word(how) -> str:
    return " + ".join(HOW_WORDS.get(part, part) for part in str(how).split("+"))


def ranked_by(analysis: dict) -> str:
    """What ordered the analysis's hypotheses (docs/contracts.md §3): the LLM analyst, the
    learned step ranker (`ranker_version`), else the detectors' heuristics."""
    if analysis.get("llm_used"):
        return "LLM analyst"
    if analysis.get("ranker_version"):
        return f"learned step ranker {analysis['ranker_version']} over the detectors' signals"
    return "detectors and dependency paths (no ranker, no LLM analyst)"


def stage_rows(analysis: dict | None, replay: dict | None) -> list[tuple[str, str]]:
    """(stage, how it ran) for every stage of the diagnosis."""
    rows = []
    if analysis:
        detectors = ", ".join(map(str, listed(analysis.get("detectors")))) or "none"
        rows.append(("anomaly scoring", f"detectors ({detectors}); no LLM"))
        rows.append(("hypothesis ranking", ranked_by(analysis) + ("" if analysis.get("llm_used") else "; no LLM")))
    else:
        rows.append(("analysis", "not run"))
    stages = fields(fields(replay).get("stages"))
    if replay:
        for key, how in stages.items():
            label = STAGE_NAMES.get(key, key.replace("_", " "))
            rows.append((label, how_word(how)))
        tested = hypotheses(replay)
        rows.append(("replay", f"{plural(len(tested), 'intervention')}, "
                               + plural(sum(len(objects(h.get('runs'))) for h in tested), 'run')))
    else:
        rows.append(("replay", "not run"))
    return rows


def summary(doc: dict, analysis: dict | None, replay: dict | None) -> str:
    """One paragraph: what most likely went wrong, what fix was verified, what was refuted."""
    parts = []
    task = brief(task_text(doc), 140)
    complaint = next((fb.get("comment") for fb in doc.get("feedback") or [] if fb.get("comment")), None)
    head = f"The session “{task}” ended with outcome {doc.get('outcome') or 'unknown'}"
    if complaint:
        head += f"; the user reported “{brief(complaint, 140)}”"
    parts.append(head + ".")

    tested = replay_hypotheses(replay)
    refuted = [h for h in tested if h.get("verdict") == "refuted"]
    inconclusive = [h for h in tested if h.get("verdict") == "inconclusive"]
    errored = [h for h in tested if h.get("verdict") == "error"]
    causes = ranked_causes(analysis, replay)  # the one order the table, the graph and the trace show
    top = causes[0] if causes else None

    if top is not None and top.verified:
        best = top.tested[0]
        iv = fields(best.get("intervention"))
        parts.append(
            f"Most likely root cause: step {top.step} ({top.agent or 'unknown agent'})"
            + (f" — {sentence(top.why)}" if top.why else "") + ".")
        parts.append(
            f"Fix {verdict_word(best.get('verdict'))} by replay: {iv.get('category') or iv.get('kind') or 'an edit'} "
            f"at step {iv.get('step', top.step)}, “{brief(iv.get('text'), 160)}” "
            f"({best.get('verdict_reason') or 'see runs'}).")
    elif top is not None and top.verdict != "refuted":
        parts.append(
            f"Most likely root cause (not verified by replay): step {top.step} ({top.agent or 'unknown agent'})"
            + (f" — {sentence(top.why)}" if top.why else "") + ".")
        if not tested:
            parts.append("No intervention was replayed, so no fix is verified.")
        else:
            parts.append("No replayed intervention fixed the session.")
    elif top is not None:
        parts.append("No root cause is left: the replays refuted every suspected step.")
    else:
        parts.append("No failure hypothesis is available yet (the session was not analyzed).")
    if refuted:
        parts.append("Refuted: " + "; ".join(f"step {h.get('step')} ({h.get('agent') or '?'})" for h in refuted) + ".")
    if inconclusive:
        parts.append("Inconclusive: " + "; ".join(f"step {h.get('step')} ({h.get('agent') or '?'})"
                                                  for h in inconclusive) + ".")
    if errored:
        parts.append("Not tested, every replay failed to run: "
                     + "; ".join(f"step {h.get('step')} ({brief(h.get('verdict_reason'), 160)})" for h in errored) + ".")
    fallback = [STAGE_NAMES.get(k, k) for k, v in fields(fields(replay).get("stages")).items()
                if "fallback" in str(v).split("+")]
    if analysis and not analysis.get("llm_used"):
        parts.append(f"The hypotheses were ranked by the {ranked_by(analysis)}.")
    if fallback:
        parts.append("Deterministic fallbacks (no LLM) were used for " + ", ".join(fallback) + ".")
    return " ".join(parts)
