"""DoVer's hypothesis verdicts (section 4.2), from the judged replays of one intervention.

- validated: at least 2 of 3 runs succeed;
- partially validated: fewer than 2 succeed, and at least 2 runs both fulfil the
  intervention and make more than 20% progress (one milestone of five);
- refuted: the same, except that their progress does not exceed 20%;
- inconclusive: everything else (mostly: the agents did not carry the intervention out);
- error (ours, not DoVer's): every run failed to run (crashed, timed out, broke the
  recorded prefix), so the replays say nothing about the hypothesis; the first error is
  the reason, so a broken setup is never read as evidence.

With a number of runs other than 3 the thresholds scale (2 of 3 becomes ceil(2n/3)).
A run whose progress could not be measured counts as no progress: it followed the
intervention and did not succeed, which is DoVer's refutation. When no run's success could
be judged at all, the verdict is inconclusive.
"""
from __future__ import annotations

import math

PROGRESS_THRESHOLD = 0.2
VERDICTS = ("validated", "partially_validated", "refuted", "inconclusive", "error")


def verdict(runs: list[dict]) -> tuple[str, str]:
    """(verdict, reason) for one hypothesis from its runs' `success`, `fulfilled`, `progress`."""
    n = len(runs)
    if n == 0:
        return "inconclusive", "no replay ran"
    errors = [r["error"] for r in runs if r.get("error")]
    if len(errors) == n:
        return "error", f"all {n} replay(s) failed to run; the first: {errors[0]}"
    if all(r.get("success") is None for r in runs):
        # Nothing judged success (no evaluator, ground truth or LLM judge, or every run
        # crashed): a hypothesis can be neither confirmed nor refuted.
        return "inconclusive", ("no replay's success could be judged (register an evaluator, record a ground "
                                "truth or configure an LLM judge)")
    needed = max(1, math.ceil(2 * n / 3))
    succeeded = sum(1 for r in runs if r.get("success") is True)
    if succeeded >= needed:
        return "validated", f"{succeeded}/{n} replays succeeded"
    fulfilled = [r for r in runs if r.get("fulfilled") is True]
    advanced = [r for r in fulfilled if (r.get("progress") or 0.0) > PROGRESS_THRESHOLD]
    stalled = [r for r in fulfilled if (r.get("progress") or 0.0) <= PROGRESS_THRESHOLD]
    if len(advanced) >= needed:
        return ("partially_validated",
                f"{succeeded}/{n} succeeded; {len(advanced)}/{n} fulfilled the intervention "
                f"with progress > {PROGRESS_THRESHOLD:.0%}")
    if len(stalled) >= needed:
        return ("refuted",
                f"{succeeded}/{n} succeeded; {len(stalled)}/{n} fulfilled the intervention "
                f"without progress > {PROGRESS_THRESHOLD:.0%}")
    detail = f"; {len(errors)} run(s) errored (first: {errors[0]})" if errors else ""
    if runs and all(r.get("fulfilled") is None for r in runs if not r.get("error")):
        detail += "; whether the edit was carried out is unknown without an LLM judge"
    return ("inconclusive",
            f"{succeeded}/{n} succeeded; only {len(fulfilled)}/{n} fulfilled the intervention{detail}")


def nothing_replayed(result: dict) -> str | None:
    """Why a replay result tested nothing (no run of any hypothesis ran through: every one
    crashed, was refused or there was no hypothesis), or None when some run did. Such a
    result is a failure of the replay, never a diagnosis."""
    if any(not run.get("error") for h in result["hypotheses"] for run in h.get("runs") or []):
        return None
    return "no replay ran through: " + ("; ".join(f"step {h['step']}: {h['verdict_reason']}"
                                                  for h in result["hypotheses"]) or "no hypothesis to test")
