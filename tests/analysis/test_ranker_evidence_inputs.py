"""The learned ranker reads the evidence detectors one input each (`evidence_<name>`), with a
weight of its own: training leaves out a detector its labelled data did not show worth
anything (analysis/evidence/base.py), the shipped models follow the registry's verdicts, and
a model fitted before a detector was registered still loads (that detector counts 0)."""
from __future__ import annotations

import json
import random

import pytest

from tracefix.analysis import evidence
from tracefix.analysis.evidence import Evidence
from tracefix.analysis.ranker import (EVIDENCE_INPUTS, EVIDENCE_PREFIX, FEATURE_NAMES, SHIPPED_MODEL, StepRanker,
                                      evidence_column, fit_ranker)
from tracefix.analysis.ranker_training import left_out_inputs


def _sessions(rng: random.Random, column: str, count: int = 12) -> list[tuple[list[list[float]], int]]:
    """Sessions of random inputs whose labelled step is the one where `column` is 1."""
    out = []
    for _ in range(count):
        n = rng.randrange(4, 9)
        X = [[rng.random() for _ in FEATURE_NAMES] for _ in range(n)]
        for row in X:
            row[FEATURE_NAMES.index(column)] = 0.0
        y = rng.randrange(n)
        X[y][FEATURE_NAMES.index(column)] = 1.0
        out.append((X, y))
    return out


def test_the_first_finding_of_a_detector_weighs_most():
    found = [Evidence(4, "b"), Evidence(1, "a"), Evidence(4, "again"), Evidence(9, "past the end")]
    assert evidence_column(found, 6) == [0.0, 0.5, 0.0, 0.0, 1.0, 0.0]
    assert evidence_column([], 3) == [0.0, 0.0, 0.0]


def test_one_input_per_registered_detector_and_no_lumped_verdict():
    assert EVIDENCE_INPUTS == tuple(EVIDENCE_PREFIX + name for name in evidence.NAMES)
    assert all(FEATURE_NAMES.count(name) == 1 for name in EVIDENCE_INPUTS)
    assert not any("heuristic" in name for name in FEATURE_NAMES)


def test_a_detector_left_out_of_training_gets_no_weight():
    name = EVIDENCE_INPUTS[0]
    sessions = _sessions(random.Random(3), name)
    kept = fit_ranker(sessions)
    assert kept.weight_of(name) > 0.5  # it alone tells the labelled step
    dropped = fit_ranker(sessions, left_out=(name,))
    assert dropped.weight_of(name) == 0.0 and dropped.trained_on["left_out"] == [name]
    with pytest.raises(ValueError, match="no ranker input"):
        fit_ranker(sessions, left_out=("evidence_no_such_detector",))


def test_a_model_fitted_before_a_detector_was_registered_still_loads():
    ranker = fit_ranker(_sessions(random.Random(5), EVIDENCE_INPUTS[0]))
    data = ranker.to_json()
    newest = EVIDENCE_INPUTS[-1]
    older = {**data, "features": [f for f in data["features"] if f["name"] != newest]}
    loaded = StepRanker.from_json(older)
    assert loaded.feature_names == FEATURE_NAMES and loaded.weight_of(newest) == 0.0
    row = [0.5] * len(FEATURE_NAMES)
    i = FEATURE_NAMES.index(newest)
    its_part = ranker.weights[i] * (row[i] - ranker.mean[i]) / ranker.scale[i]
    assert its_part != 0.0 and loaded.scores([row])[0] == pytest.approx(ranker.scores([row])[0] - its_part)
    # Only a detector's input may be missing: a step signal gone, or an input this version
    # does not compute, means the model is of another version.
    for features in ([f for f in data["features"] if f["name"] != FEATURE_NAMES[0]],
                     data["features"] + [{"name": "heuristic_rank", "mean": 0, "scale": 1, "weight": 0.7}]):
        with pytest.raises(ValueError, match="retrain"):
            StepRanker.from_json({**data, "features": features})


def test_shipped_rankers_read_only_the_detectors_their_labelled_data_showed_worth_something():
    models = json.loads(SHIPPED_MODEL.read_text())["models"]
    assert set(models) == {"message", "llm"}
    testbed_only = {EVIDENCE_PREFIX + d.name for d in evidence.REGISTRY if d.testbed_only}
    for kind, model in models.items():
        ranker = StepRanker.from_json(model)
        left_out = set(left_out_inputs(kind))
        assert set(model["trained_on"].get("left_out", [])) == left_out, kind
        assert all(ranker.weight_of(name) == 0.0 for name in left_out), kind
        assert left_out >= (testbed_only if kind == "message" else set()), kind
    # What earns on the testbed alone is read by the instrumented-session ranker only.
    assert all(StepRanker.from_json(models["llm"]).weight_of(name) != 0.0 for name in testbed_only)
