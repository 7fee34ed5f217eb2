import numpy as np
import pytest

from analysis_handmade import bank_session
from tracefix.analysis.detectors import HGTDetector, IsolationForestDetector
from tracefix.analysis.features import FEATURE_NAMES, feature_matrix
from tracefix.analysis.graph import build_graph
from tracefix.analysis.units import build_units


def graph_of(doc):
    return build_graph(build_units(doc))


def test_isolation_forest_is_deterministic_and_flags_the_failing_calls():
    doc = bank_session(3, wrong_instruction=True)
    X = feature_matrix(graph_of(doc))
    assert X.shape == (len(doc["steps"]), len(FEATURE_NAMES))
    a = IsolationForestDetector().fit_score(X)
    b = IsolationForestDetector().fit_score(X)
    assert np.array_equal(a, b)
    assert int(np.argmax(a)) in (4, 5, 6)


def test_how_long_the_steps_took_does_not_move_the_anomaly_scores():
    """The same session recorded on a loaded machine (every step 0.3-4x as long) is the same
    session: the IsolationForest scores its steps as before."""
    import copy
    import random

    doc = bank_session(3, wrong_instruction=True)
    slow = copy.deepcopy(doc)
    rng = random.Random(7)
    for step in slow["steps"]:
        step["duration_ms"] = (step.get("duration_ms") or 1.0) * rng.uniform(0.3, 4.0) + rng.uniform(0, 50)
    a = IsolationForestDetector().fit_score(feature_matrix(graph_of(doc)))
    b = IsolationForestDetector().fit_score(feature_matrix(graph_of(slow)))
    assert np.array_equal(a, b)


def test_isolation_forest_needs_fit_before_score():
    with pytest.raises(RuntimeError, match="before fit"):
        IsolationForestDetector().score(np.zeros((3, 2)))


@pytest.fixture(scope="module")
def tiny_hgt():
    graphs = [graph_of(bank_session(s)) for s in range(12)]
    return HGTDetector(epochs=6, hidden=32, heads=4, seed=1).fit(graphs)


def test_hgt_save_load_roundtrip_scores_identically(tiny_hgt, tmp_path):
    path = tiny_hgt.save(tmp_path)
    assert path.name == f"{tiny_hgt.version}.pt" and tiny_hgt.version.startswith("hgt-1-")
    loaded = HGTDetector.load(path)
    assert loaded.version == tiny_hgt.version
    g = graph_of(bank_session(99, wrong_instruction=True))
    assert np.allclose(tiny_hgt.score(g), loaded.score(g), atol=1e-5)
    assert len(tiny_hgt.history) == 6 and tiny_hgt.history[-1]["loss"] < tiny_hgt.history[0]["loss"]


def test_hgt_is_more_surprised_by_a_faulty_run_than_a_normal_one(tiny_hgt):
    normal = tiny_hgt.score(graph_of(bank_session(50)))
    faulty = tiny_hgt.score(graph_of(bank_session(50, wrong_instruction=True)))
    assert faulty.max() > normal.max()
    assert int(np.argmax(faulty)) >= 4  # the surprise sits where the run deviates


def test_hgt_rejects_odd_heads():
    with pytest.raises(ValueError, match="divisible"):
        HGTDetector(hidden=30, heads=4)
