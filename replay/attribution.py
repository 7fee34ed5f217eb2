"""Failure attribution per failed trial: a hypothesis (step, agent, reason) to test by replay.

Seeded by the analysis' anomaly-ranked hypotheses that fall inside the trial (their
evidence packet goes to the LLM); without an LLM, the top-ranked analysis hypothesis in
the trial stands as it is. A trial the analysis says nothing about falls back to its
highest-scoring step, then to its first step with an error.
"""
from __future__ import annotations

import hashlib

from tracefix.analysis.roles import coordinators
from tracefix.collector.document import session_task
from tracefix.replay import prompts


def hypothesis_id(session_id: str, round_: int, step: int, salt: str = "") -> str:
    digest = hashlib.sha1(f"{session_id}|{round_}|{step}|{salt}".encode()).hexdigest()
    return "h-" + digest[:10]


def in_trial(step: int | None, trial: dict) -> bool:
    return step is not None and trial["start"] <= step <= trial["end"]


def analysis_hypotheses_in(trial: dict, analysis: dict | None) -> list[dict]:
    found = [h for h in (analysis or {}).get("hypotheses", []) if in_trial(h.get("step"), trial)]
    return sorted(found, key=lambda h: (h.get("rank", 1e9), -(h.get("score") or 0.0)))


def _top_scored_step(trial: dict, analysis: dict | None) -> int | None:
    best, best_score = None, None
    for s in (analysis or {}).get("scores", []):
        if not in_trial(s.get("step"), trial):
            continue
        score = max(v for v in (s.get("isolation_forest"), s.get("hgt"), 0.0) if isinstance(v, (int, float)))
        if best_score is None or score > best_score:
            best, best_score = s["step"], score
    return best


def _first_error_step(trial: dict, steps_by_index: dict[int, dict]) -> int | None:
    for k in range(trial["start"], trial["end"] + 1):
        step = steps_by_index.get(k) or {}
        if step.get("error") or any(c.get("error") for c in step.get("tool_calls") or []):
            return k
    return None


def upstream_instruction(doc: dict, step: int) -> dict | None:
    """For a worker's step, the orchestrator's instruction that started the worker's turn:
    DoVer edits there (the message-passing layer) when a sub-agent went wrong."""
    by_index = {s["index"]: s for s in doc.get("steps") or []}
    worker = (by_index.get(step) or {}).get("agent") or ""
    coordinating = coordinators([s.get("agent") for s in by_index.values()])
    if worker in coordinating:
        return None
    for k in range(step - 1, -1, -1):
        s = by_index.get(k) or {}
        if s.get("agent") in coordinating:
            return s if not s.get("tool_calls") else None
    return None


def evidence_packet(h: dict) -> dict:
    """What the LLM (and the intervention templates) see of an analysis hypothesis."""
    return {"step": h.get("step"), "agent": h.get("agent"), "rank": h.get("rank"), "score": h.get("score"),
            "rationale": h.get("rationale"), **(h.get("evidence") or {})}


def fallback_hypotheses(doc: dict, trial: dict, analysis: dict | None, round_: int, per_trial: int = 1) -> list[dict]:
    steps_by_index = {s["index"]: s for s in doc.get("steps") or []}
    seeded = analysis_hypotheses_in(trial, analysis)[:per_trial]
    out = [{"step": h["step"], "agent": h.get("agent") or steps_by_index.get(h["step"], {}).get("agent"),
            "reason": h.get("rationale") or "ranked anomalous by the analysis detectors",
            "source": "analysis", "evidence": evidence_packet(h)} for h in seeded]
    if not out:
        step, why = _top_scored_step(trial, analysis), "highest anomaly score in the trial"
        if step is None:
            step, why = _first_error_step(trial, steps_by_index), "first step with an error in the trial"
        if step is not None:
            out.append({"step": step, "agent": steps_by_index.get(step, {}).get("agent"), "reason": why,
                        "source": "fallback", "evidence": {"step": step}})
    for h in out:
        h.update(id=hypothesis_id(doc["session_id"], round_, h["step"], h["source"]), round=round_,
                 trial=trial["index"])
    return out


def llm_hypothesis(llm, doc: dict, trial: dict, analysis: dict | None, previous: list[dict], round_: int) -> dict | None:
    steps = [s for s in doc.get("steps") or [] if in_trial(s["index"], trial)]
    seeded = analysis_hypotheses_in(trial, analysis)
    # The ground truth guides attribution (as in DoVer); only interventions must never state it.
    outcome = {"outcome": doc.get("outcome"), "output": doc.get("output"), "ground_truth_answer": doc.get("ground_truth"),
               "feedback": [f.get("comment") for f in doc.get("feedback") or [] if f.get("comment")]}
    system, user = prompts.attribution(session_task(doc), trial, steps, previous,
                                       [evidence_packet(h) for h in seeded[:5]], outcome)
    answer = llm.complete_json("attribution", system, user)
    step = answer.get("mistake_step_index")
    if step is None and answer.get("is_succeed") is True:
        return None
    try:
        step = int(step)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"attribution answer has no step index: {answer!r}") from exc
    if not in_trial(step, trial):
        raise ValueError(f"attribution step {step} lies outside trial {trial['start']}..{trial['end']}")
    seed = next((h for h in seeded if h.get("step") == step), None)
    by_index = {s["index"]: s for s in doc.get("steps") or []}
    return {"id": hypothesis_id(doc["session_id"], round_, step, "llm"), "round": round_, "trial": trial["index"],
            "step": step, "agent": answer.get("mistake_agent") or by_index[step].get("agent"),
            "reason": answer.get("mistake_reason") or "", "source": "llm",
            "evidence": evidence_packet(seed) if seed else {"step": step},
            "trial_summary": answer.get("trial_summary")}


def attribute(doc: dict, trials: list[dict], analysis: dict | None, llm=None, *, round_: int = 1,
              per_trial: int = 1) -> tuple[list[dict], str, list[str]]:
    """(hypotheses, stage label, notes). One hypothesis per failed trial (more with per_trial)."""
    hypotheses, notes, used_llm, previous = [], [], False, []
    for trial in trials:
        if not trial.get("failed"):
            continue
        found: list[dict] = []
        if llm is not None:
            try:
                h = llm_hypothesis(llm, doc, trial, analysis, previous, round_)
                used_llm = True
                found = [h] if h else []
            except Exception as exc:  # fall back for this trial, keep going
                notes.append(f"attribution, trial {trial['index'] + 1}: LLM answer unusable ({exc}); used analysis ranking")
        if not found:
            found = fallback_hypotheses(doc, trial, analysis, round_, per_trial)
        elif per_trial > 1:  # widen with the analysis' next candidates
            extra = [h for h in fallback_hypotheses(doc, trial, analysis, round_, per_trial)
                     if h["step"] != found[0]["step"]]
            found += extra[: per_trial - 1]
        hypotheses += found
        previous.append({"trial_index": trial["index"], "start": trial["start"], "end": trial["end"],
                         "is_succeed": False, "trial_summary": (found[0].get("trial_summary") if found else None)})
    label = "llm" if used_llm and not notes else ("llm+fallback" if used_llm else "fallback")
    return hypotheses, label, notes
