"""analyze_document on degenerate sessions: nothing crashes, shapes stay those of contracts §3."""
import json
import os

import pytest

from analysis_handmade import bank_session
from tracefix.analysis.detectors import HGTDetector
from tracefix.analysis.pipeline import NO_MODEL_NOTE, analyze_document, latest_model_path, load_model


@pytest.fixture(scope="module")
def small_model():
    from tracefix.analysis.graph import build_graph
    from tracefix.analysis.units import build_units

    return HGTDetector(epochs=2, hidden=16, heads=2).fit([build_graph(build_units(bank_session(s))) for s in range(4)])


@pytest.mark.parametrize("doc", [
    {"steps": []},
    {"steps": [{"index": 0}]},
    {"steps": [{"index": 0, "kind": "llm", "agent": "X", "output_message": {"content": None}},
               {"index": 1, "kind": "message", "content": "hi"}]},
    {"steps": [{"index": 0, "kind": "llm", "tool_calls": [
        {"name": "t", "arguments": "not json", "result": None, "error": "Boom: 1"}]}]},
    {"steps": [{"index": 0, "kind": "llm", "output_message": {"content": "balance " + "9" * 400}}]},
], ids=["empty", "bare-step", "mixed-kinds", "bad-arguments", "number-no-float-holds"])
@pytest.mark.parametrize("with_model", [False, True])
def test_degenerate_sessions_analyze_without_crashing(doc, with_model, small_model):
    result = analyze_document(doc, small_model if with_model else None)
    json.dumps(result)  # storable as is
    assert len(result["scores"]) == len(doc["steps"])
    assert (NO_MODEL_NOTE in result["notes"]) is (not with_model)
    assert {h["step"] for h in result["hypotheses"]} <= set(range(len(doc["steps"])))
    for key in ("session_id", "created_at", "model_version", "detectors", "notes", "llm_used",
                "scores", "frontier", "graph", "hypotheses"):
        assert key in result


@pytest.mark.parametrize("tool_calls", ["nope", ["nope"], [{"function": "f"}], {"function": {"name": "f"}}, [None, 5]])
def test_an_imported_log_with_calls_of_any_shape_analyzes(tool_calls):
    """An imported log is the user's file: what its assistant messages carry as tool calls
    is read where it is shaped like a call and skipped where it is not."""
    from tracefix.collector.imports import documents_from_text

    log = {"messages": [{"role": "user", "content": "pay acc-1"},
                        {"role": "assistant", "content": "calling", "tool_calls": tool_calls},
                        {"role": "assistant", "content": "paid", "tool_calls": [
                            {"function": {"name": "pay", "arguments": '{"to": "acc-1"}'}}]}]}
    [doc] = documents_from_text(json.dumps(log))
    result = analyze_document(doc, None)
    assert len(result["scores"]) == 3
    assert [h["step"] for h in result["hypotheses"]]


def test_newest_model_file_wins_and_is_cached(small_model, tmp_path):
    assert load_model(tmp_path) is None
    first = small_model.save(tmp_path)
    assert latest_model_path(tmp_path) == first
    loaded = load_model(tmp_path)
    assert loaded.version == small_model.version and load_model(tmp_path) is loaded
    broken = tmp_path / "hgt-1-broken.pt"
    broken.write_bytes(b"not a model")
    later = first.stat().st_mtime + 10
    os.utime(broken, (later, later))  # newer than the good file, whatever the clock resolution
    with pytest.raises(Exception):
        load_model(tmp_path)  # the newest file is unreadable: the caller reports it


def test_analyze_session_notes_an_unreadable_model_and_stores_the_result(tmp_path):
    from tracefix.collector.imports import documents_from_text
    from tracefix.analysis.pipeline import analyze_session
    from tracefix.collector.access import connect

    conversation = {"task": "Move $10 from ACC-1001 to ACC-1002", "messages": [
        {"name": "Orchestrator", "role": "assistant", "content": "PaymentsAgent: transfer $10 from ACC-1001 to ACC-1002"},
        {"name": "PaymentsAgent", "role": "assistant", "content": "transfer(ACC-1001, ACC-9999, 10)"},
        {"name": "Computer_terminal", "role": "user", "content": "Error: UnknownAccount ACC-9999"},
        {"name": "Orchestrator", "role": "assistant", "content": "FINAL ANSWER: done"}]}
    models = tmp_path / "models"
    models.mkdir()
    (models / "hgt-1-broken.pt").write_bytes(b"junk")
    with connect(db=str(tmp_path / "t.duckdb")) as access:
        [sid] = access.import_sessions(documents_from_text(json.dumps(conversation)))
        result = analyze_session(access, sid, llm=False)  # models folder next to the db file
        assert result["detectors"] == ["isolation_forest"]
        assert any("could not be loaded" in n for n in result["notes"])
        assert access.get_analysis(sid)["hypotheses"] == json.loads(json.dumps(result["hypotheses"]))
        assert result["hypotheses"][0]["step"] == 1  # the step that used the unknown account
        with pytest.raises(KeyError, match="s-missing"):
            analyze_session(access, "s-missing", llm=False)


def test_ablation_options_leave_out_the_forest_and_reweigh_the_evidence():
    from tracefix.analysis.hypotheses import EvidenceWeights
    from tracefix.collector.imports import documents_from_text

    [doc] = documents_from_text(json.dumps({"task": "Move $10 from ACC-1001 to ACC-1002", "messages": [
        {"name": "Orchestrator", "role": "assistant", "content": "PaymentsAgent: transfer $10 from ACC-1001 to ACC-1002"},
        {"name": "PaymentsAgent", "role": "assistant", "content": "transfer(ACC-1001, ACC-9999, 10)"},
        {"name": "Computer_terminal", "role": "user", "content": "Error: UnknownAccount ACC-9999"},
        {"name": "Orchestrator", "role": "assistant", "content": "FINAL ANSWER: done"}]}))
    default = analyze_document(doc, None)
    assert default["detectors"] == ["isolation_forest"] and default["hypotheses"][0]["score"] == 1.0

    graph_only = analyze_document(doc, None, isolation_forest=False, ranker=None)
    assert graph_only["detectors"] == [] and graph_only["frontier"] == {}
    assert all("isolation_forest" not in row for row in graph_only["scores"])
    assert graph_only["hypotheses"][0]["step"] == 1  # the graph evidence alone still finds the unknown account

    nothing = EvidenceWeights(detectors=0.0, origins=(0.0,), frontier=0.0, unsupported=0.0, unacted_claim=0.0,
                              final_answer=0.0)
    assert {h["score"] for h in analyze_document(doc, None, weights=nothing, ranker=None)["hypotheses"]} == {0.0}


def test_the_cycle_collector_is_paused_while_scoring_and_back_after_it():
    """Scoring runs without Python's cycle collector (a full collection would walk every
    object of the process); it is back on afterwards, also after a failure, while another
    thread still scores it stays off, and an application that turned it off keeps it off."""
    import gc
    import threading

    from tracefix.analysis import pipeline

    seen = []

    class Probe(dict):  # a session document that reports the collector's state when read
        def get(self, key, default=None):
            if key == "steps":
                seen.append(gc.isenabled())
            return super().get(key, default)

    assert gc.isenabled()
    analyze_document(Probe(bank_session(0)))
    assert seen and not any(seen) and gc.isenabled()

    with pytest.raises(TypeError):
        analyze_document({"steps": 7})
    assert gc.isenabled()

    inside, leave = threading.Event(), threading.Event()

    def hold():
        with pipeline.cycle_collection_paused():
            inside.set()
            leave.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    inside.wait(10)
    with pipeline.cycle_collection_paused():
        pass
    assert not gc.isenabled()  # the other thread is still scoring
    leave.set()
    other.join()
    assert gc.isenabled()

    gc.disable()
    try:
        analyze_document(bank_session(1))
        assert not gc.isenabled()
    finally:
        gc.enable()
