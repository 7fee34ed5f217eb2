"""`tracefix replay`'s printout counts trials from 1, as the report's "Trial n" headings do, and
cuts a run's long error between words (issue 38: "trial 0", and error lines cut mid-word)."""
from __future__ import annotations

import re

from tracefix.replay.cli import render

ERROR = ("RuntimeError: the replayed request for step 3 matched no recorded response because the "
         "conversation's fingerprint changed after the edit")


def result() -> dict:
    hypothesis = {"round": 1, "source": "fallback", "step": 4, "agent": "Checker", "trial": 1,
                  "reason": "highest anomaly score in the trial", "verdict": "error", "verdict_reason": "no run",
                  "intervention": {"kind": "add_message", "category": "correction", "source": "template",
                                   "text": "check the order"},
                  "runs": [{"success": None, "error": ERROR}]}
    return {"session_id": "s-1", "rounds": 1, "stages": {"segmentation": "fallback"}, "hypotheses": [hypothesis],
            "trials": [{"index": 0, "start": 0, "end": 2}, {"index": 1, "start": 3, "end": 5, "failed": True}]}


def test_trials_are_counted_from_one():
    text = render(result())
    assert re.findall(r"^trial (\d+):", text, re.M) == ["1", "2"], text
    assert text.index("trial 2: steps 3-5") < text.index("hypothesis (round 1, fallback): step 4")


def test_a_long_run_error_is_cut_between_words():
    line = next(line for line in render(result()).splitlines() if "run 1:" in line)
    shown = re.search(r"error \((.*)\)", line).group(1)
    assert shown.endswith(" …") and len(shown) <= 80, shown
    head = shown[:-2]
    assert ERROR.startswith(head) and ERROR[len(head)] == " ", shown
