"""The optional LLM analyst over real HTTP: the scripted LLM server in-process, with a
scripted analyst model registered on it (the sim's extension point for product LLMs)."""
import json

import pytest

from analysis_handmade import bank_session
from tracefix.analysis.pipeline import analyze_document
from tracefix.analysis.llm import ProductLLM


def second_candidate_analyst(body, ctx):
    """Reads the evidence packets and confirms the second candidate, as an analyst might."""
    user = json.loads(body["messages"][-1]["content"])
    assert body["messages"][0]["content"].startswith("tracefix-stage: analysis")
    step = user["candidates"][1]["step"]
    return {"role": "assistant", "content": json.dumps({
        "turning_point": step, "root_cause": f"step {step} handed over a wrong account id",
        "recovery_hints": ["use the account id from the lookup"]})}


def rambling_analyst(body, ctx):
    """Answers in prose, not the JSON object the stage asks for."""
    return {"role": "assistant", "content": "I think something went wrong somewhere in the middle."}


@pytest.fixture(scope="module")
def sim_base_url():
    from tracefix.demo.sim import SimConfig, SimServer
    from tracefix.demo.sim_models import register_model

    register_model("test-analyst", second_candidate_analyst)
    register_model("rambling-analyst", rambling_analyst)
    server = SimServer(SimConfig(seed=1))
    yield server.start()
    server.stop()


def test_analyst_confirmation_reorders_and_labels_the_turning_point(sim_base_url):
    doc = bank_session(7, wrong_instruction=True)
    plain = analyze_document(doc, None)
    llm = ProductLLM(base_url=sim_base_url, model="test-analyst")
    result = analyze_document(doc, None, llm=llm)
    assert result["llm_used"] is True and llm.requests == 1
    chosen = plain["hypotheses"][1]["step"]
    top = result["hypotheses"][0]
    assert top["step"] == chosen and top["source"] == "llm" and top["rank"] == 1
    assert "wrong account" in top["rationale"]
    assert top["evidence"]["recovery_hints"] == ["use the account id from the lookup"]
    assert sorted(h["step"] for h in result["hypotheses"]) == sorted(h["step"] for h in plain["hypotheses"])
    assert [h["rank"] for h in result["hypotheses"]] == list(range(1, len(result["hypotheses"]) + 1))


def test_unusable_analyst_answer_keeps_the_detector_ranking(sim_base_url):
    doc = bank_session(7, wrong_instruction=True)
    llm = ProductLLM(base_url=sim_base_url, model="rambling-analyst")
    result = analyze_document(doc, None, llm=llm)
    assert result["llm_used"] is False
    assert all(h["source"] in ("detectors", "ranker") for h in result["hypotheses"])
    assert any("LLM analyst unavailable" in n for n in result["notes"])
    assert [h["step"] for h in result["hypotheses"]] == [h["step"] for h in analyze_document(doc, None)["hypotheses"]]


def test_scripted_sim_analyst_confirms_a_turning_point_from_the_packets(sim_base_url):
    """The demo's `sim-analyst` answers the analysis stage, so `tracefix demo --llm sim` runs it."""
    doc = bank_session(7, wrong_instruction=True)
    plain = analyze_document(doc, None)
    result = analyze_document(doc, None, llm=ProductLLM(base_url=sim_base_url, model="sim-analyst"))
    assert result["llm_used"] is True
    top = result["hypotheses"][0]
    assert top["source"] == "llm" and top["step"] in {h["step"] for h in plain["hypotheses"][:3]}
    assert top["rationale"].startswith(f"{top['agent']} at step {top['step']}")
    assert top["evidence"]["recovery_hints"]
