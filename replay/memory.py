"""Repair memory across rounds (AgentTether III-C): what was tried, what it fixed, what is left.

A later round builds on the earlier ones instead of starting over:

- a trial with a validated intervention is fixed: it is not intervened on again;
- a refuted hypothesis was wrong: its step is not tried again; the trial moves on to the
  analysis' next candidate;
- an inconclusive or partially validated one was not carried out (or only helped):
  the same step is tried again with a firmer edit, and the memory notes say what was
  already tried, so the edit does not simply repeat.
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

    def plan_round(self, candidates: list[dict]) -> list[dict]:
        """Of this round's candidate hypotheses, those worth replaying given what is known."""
        fixed, refuted = self.fixed_trials(), self.refuted_steps()
        chosen, seen_trials = [], set()
        for h in candidates:
            if h.get("trial") in fixed or h["step"] in refuted:
                continue
            if h.get("trial") in seen_trials:
                continue  # one hypothesis per trial per round, as in DoVer
            seen_trials.add(h.get("trial"))
            chosen.append(h)
        return chosen

    def summary(self) -> dict:
        fixed = self.fixed_trials()
        unresolved = sorted({t["trial"] for t in self.tried if t["trial"] not in fixed}, key=lambda x: (x is None, x))
        return {"tried": self.tried, "fixed": sorted(t for t in fixed if t is not None), "unresolved": unresolved}
