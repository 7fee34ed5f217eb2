"""The evidence detectors (analysis/evidence/): one module per rule, every module registered
exactly once, and the registry is what the graph heuristics read and what the ranker reads,
one input per detector: leaving a detector out of it switches that rule off."""
from __future__ import annotations

import dataclasses
import importlib
import inspect
from pathlib import Path

import pytest

from tracefix.analysis import evidence
from tracefix.analysis.graph import build_graph
from tracefix.analysis.hypotheses import EvidenceWeights
from tracefix.analysis.pipeline import analyze_document
from tracefix.analysis.ranker import EVIDENCE_PREFIX, FEATURE_NAMES, ranker_inputs
from tracefix.analysis.units import build_units

FOLDER = Path(evidence.__file__).parent
NOT_DETECTORS = {"__init__", "base"}  # the registry and the types it holds


def test_registry_lists_every_detector_module_once():
    modules = sorted(p.stem for p in FOLDER.glob("*.py") if p.stem not in NOT_DETECTORS)
    assert len(evidence.NAMES) == len(set(evidence.NAMES))
    assert sorted(evidence.NAMES) == modules
    weights = {f.name for f in dataclasses.fields(EvidenceWeights)}
    for detector in evidence.REGISTRY:
        module = importlib.import_module(f"tracefix.analysis.evidence.{detector.name}")
        assert (module.__doc__ or "").strip(), f"{detector.name} says nothing of what it detects"
        assert inspect.isfunction(module.evidence) and list(inspect.signature(module.evidence).parameters) == ["graph"]
        assert detector.evidence is module.evidence and detector.summary
        assert detector.weight in weights, f"{detector.name} adds an evidence weight that does not exist"


def test_an_unknown_detector_name_is_refused():
    with pytest.raises(ValueError, match="no evidence detector"):
        evidence.without("unacted_claim")  # the weight's name, not the detector's


def _step(index: int, agent: str, text: str = "", calls=(), seen: str = "(context)") -> dict:
    return {"index": index, "kind": "llm", "agent": agent,
            "input_messages": [{"role": "user", "content": seen}],
            "output_message": {"role": "assistant", "content": text},
            "input_tokens": 100, "output_tokens": 20, "error": None,
            "tool_calls": [{"id": f"c{index}_{i}", "name": name, "arguments": args, "result": result, "error": None}
                           for i, (name, args, result) in enumerate(calls)]}


def _claim_without_acting() -> tuple[dict, int]:
    """The clerk says the refund went through without calling the refund tool; only the
    unacted-claim detector speaks for that step (no tool failed, no value was made up)."""
    lookup = {"order": "ord_77", "total": 42}
    steps = [
        _step(0, "Lead", "Clerk: look up ord_77 and refund it"),
        _step(1, "Clerk", calls=[("lookup_order", {"order": "ord_77"}, lookup)], seen="look up ord_77 and refund it"),
        _step(2, "Lead", "Clerk: now refund ord_77 in full", seen=str(lookup)),
        _step(3, "Clerk", "The refund is complete.", seen="now refund ord_77 in full"),
        _step(4, "Lead", "Final answer: ord_77 was refunded 42", seen=f"{lookup} The refund is complete."),
    ]
    return {"session_id": "unacted", "task": "Refund order ord_77", "outcome": "failure", "steps": steps}, 3


def _made_up_id() -> tuple[dict, int]:
    """The lead hands on an account no step showed it; the transfer goes through with it.
    Only the invented-values detector speaks for the hand-over."""
    steps = [
        _step(0, "Lead", "Teller: look up the account of Dana Reyes", seen="Pay Dana Reyes 30"),
        _step(1, "Teller", calls=[("find_account", {"name": "Dana Reyes"}, {"account": "ac-5501", "name": "Dana Reyes"})],
              seen="look up the account of Dana Reyes"),
        _step(2, "Teller", "Dana Reyes holds ac-5501", seen="ac-5501"),
        _step(3, "Lead", "Teller: pay 30 to ac-9913", seen="Dana Reyes holds ac-5501"),
        _step(4, "Teller", calls=[("pay", {"account": "ac-9913", "amount": 30}, {"paid": 30, "account": "ac-9913"})],
              seen="pay 30 to ac-9913"),
        _step(5, "Teller", "Paid 30 to ac-9913", seen="paid 30 ac-9913"),
        _step(6, "Lead", "Final answer: paid Dana Reyes 30", seen="Paid 30 to ac-9913"),
    ]
    return {"session_id": "invented", "task": "Pay Dana Reyes 30", "outcome": "failure", "steps": steps}, 3


@pytest.mark.parametrize("make, name", [(_claim_without_acting, "unacted_claims"), (_made_up_id, "invented_values")])
def test_switching_a_detector_off_changes_the_ranking_of_the_session_only_it_explains(make, name):
    doc, culprit = make()
    graph = build_graph(build_units(doc))
    explaining = [d.name for d in evidence.REGISTRY if any(e.step == culprit for e in d.evidence(graph))]
    assert explaining == [name]  # the session is one only this detector explains

    on = analyze_document(doc, None, ranker=None)
    off = analyze_document(doc, None, ranker=None, evidence=evidence.without(name))
    assert on["hypotheses"][0]["step"] == culprit
    assert culprit not in [h["step"] for h in off["hypotheses"]]
    # The learned ranker reads each detector as an input of its own: this one's names the
    # culprit, and is all zeros with the detector off; no other detector's input names it.
    units = build_units(doc)
    scores = {"isolation_forest": [row["isolation_forest"] for row in on["scores"]]}
    inputs_on = ranker_inputs(doc, units, scores, evidence.findings(graph))
    inputs_off = ranker_inputs(doc, units, scores, evidence.findings(graph, evidence.without(name)))
    column = FEATURE_NAMES.index(EVIDENCE_PREFIX + name)
    assert inputs_on[culprit][column] == 1.0 and all(row[column] == 0.0 for row in inputs_off)
    naming = [n for n in evidence.NAMES if inputs_on[culprit][FEATURE_NAMES.index(EVIDENCE_PREFIX + n)] > 0]
    assert naming == [name]
    # ... and the shipped ranker (an instrumented session: the ranker that reads the testbed-only
    # detectors) puts the culprit first only with it.
    assert analyze_document(doc, None)["hypotheses"][0]["step"] == culprit
    assert analyze_document(doc, None, evidence=evidence.without(name))["hypotheses"][0]["step"] != culprit
    # Any other detector switched off leaves the culprit on top.
    for other in evidence.NAMES:
        if other != name:
            kept = analyze_document(doc, None, ranker=None, evidence=evidence.without(other))
            assert kept["hypotheses"][0]["step"] == culprit, other
