"""An edit works only where the causal chain allows: replays of a silent wrong transfer
(task t02: the PaymentsAgent's transfer at step 6 goes to the wrong account, the app reports
success) with the same right content placed before, at and after the faulty step."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tracefix.replay.pipeline import diagnose

RIGHT = "The money goes into ACC-1002, Alice Chen's savings account."


@pytest.fixture(scope="module")
def wrong_transfer(lab):
    subprocess.run([sys.executable, "-m", "tracefix.cli", "demo-run", "--base-url", lab.follow_url, "--tasks", "t02",
                    "--otlp-endpoint", lab.serve_url], check=True, timeout=120, capture_output=True, env=lab.env)
    (fault,) = [json.loads(line) for line in lab.ground_truth.read_text().splitlines()
                if '"t02"' in line and '"replay": false' in line]
    assert fault["step"] == 6 and fault["kind"] == "wrong_argument"
    return fault["session"]


def _verdict(lab, session, step, tmp_path):
    with lab.access() as access:
        result = diagnose(access, session, allowed_modules=["tracefix.demo"], llm=False, runs=3, concurrency=2,
                          otlp_endpoint=lab.serve_url, workdir=tmp_path, save=False, replay_key=lab.replay_key,
                          hypotheses=[{"step": step, "intervention": {"text": RIGHT}}])
    return result["hypotheses"][0]


@pytest.mark.parametrize("step, where", [(5, "the orchestrator's instruction before the slip"),
                                         (6, "the faulty call itself")])
def test_the_right_value_before_or_at_the_slip_validates(lab, wrong_transfer, tmp_path, step, where):
    h = _verdict(lab, wrong_transfer, step, tmp_path)
    assert h["verdict"] == "validated", (where, h["verdict_reason"])


def test_the_same_edit_after_the_wrong_transfer_cannot_undo_it(lab, wrong_transfer, tmp_path):
    h = _verdict(lab, wrong_transfer, 7, tmp_path)  # the worker's report: the money already moved
    assert h["verdict"] in ("refuted", "inconclusive"), h["verdict_reason"]
    assert not any(run["success"] for run in h["runs"])
