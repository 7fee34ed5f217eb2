"""Repair memory across rounds (AgentTether III-C): what was tried, what it fixed, what is left.

A later round builds on the earlier ones instead of starting over:

- a trial with a validated intervention is fixed: it is not intervened on again;
- a refuted hypothesis was wrong: its step is not tried again;
- an inconclusive or partially validated one was not carried out (or only helped): the
  trial moves on to a step not tried yet (the analysis' next candidate, or the
  orchestrator instruction that fed a worker step, DoVer's preferred place for an edit);
  when none is left, the same step is tried again with a firmer edit, and the memory
  notes say what was already tried, so the edit does not simply repeat.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RepairMemory:
    tried: list[dict] = field(default_factory=list)  # {round, trial, step, agent, intervention, verdict}

    def record(self, round_: int, hypothesis: dict) -> None:
        self.tried.append({"round": round_, "trial": hypothesis.get("trial"), "step": hypothesis["step"],
                           "agent": hypothesis.get("agent"),
                           "intervention": (hypothesis.get("intervention") or {}).get("text"),
                           "verdict": hypothesis.get("verdict")})

    def fixed_trials(self) -> set:
        return {t["trial"] for t in self.tried if t["verdict"] == "validated"}

    def refuted_steps(self) -> set[int]:
        return {t["step"] for t in self.tried if t["verdict"] == "refuted"}

    def notes_for(self, step: int) -> list[str]:
        """What the intervention writer should know about earlier attempts at this step."""
        return [f"round {t['round']}: at step {t['step']} tried {t['intervention']!r} -> {t['verdict']}"
                for t in self.tried if t["step"] == step]

    def tried_steps(self) -> set[int]:
        return {t["step"] for t in self.tried}

    def plan_round(self, candidates: list[dict]) -> list[dict]:
        """Of this round's candidate hypotheses, one per unresolved trial (as in DoVer): a step
        not tried yet when there is one, else a retry of one that was not refuted."""
        fixed, refuted, tried = self.fixed_trials(), self.refuted_steps(), self.tried_steps()
        usable = [h for h in candidates if h.get("trial") not in fixed and h["step"] not in refuted]
        chosen: dict = {}
        for h in usable:
            if h["step"] not in tried and h.get("trial") not in chosen:
                chosen[h.get("trial")] = h
        for h in usable:
            chosen.setdefault(h.get("trial"), h)
        return sorted(chosen.values(), key=lambda h: (h.get("trial") is None, h.get("trial"), h["step"]))

    def summary(self) -> dict:
        fixed = self.fixed_trials()
        unresolved = sorted({t["trial"] for t in self.tried if t["trial"] not in fixed}, key=lambda x: (x is None, x))
        return {"tried": self.tried, "fixed": sorted(t for t in fixed if t is not None), "unresolved": unresolved}
