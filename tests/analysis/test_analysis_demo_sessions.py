"""Transition units, the transition graph, features and localization on real demo sessions
(recorded through instrumentation -> tracefix serve -> the store; see conftest.py)."""
import time

import numpy as np

from tracefix.analysis.features import FEATURE_NAMES, feature_matrix
from tracefix.analysis.graph import build_graph, hetero_view
from tracefix.analysis.pipeline import analyze_document
from tracefix.analysis.units import build_units


def faulted(corpus, kind: str) -> tuple[dict, dict]:
    """(ground-truth label, session document) of the corpus's session with that fault."""
    label = next(t for t in corpus.truth if t["kind"] == kind)
    return label, corpus.docs[label["session"]]


def clean_doc(corpus):
    return corpus.docs[corpus.clean_ids[2]]  # t03: look up two customers, then transfer


def test_demo_sessions_arrive_with_outcomes(demo_corpus):
    clean = [demo_corpus.docs[s] for s in demo_corpus.clean_ids]
    assert all(d["outcome"] == "success" for d in clean)
    assert len(demo_corpus.truth) == 7
    assert sum(demo_corpus.docs[t["session"]]["outcome"] == "failure" for t in demo_corpus.truth) >= 6


def test_units_of_a_clean_demo_session(demo_corpus):
    doc = clean_doc(demo_corpus)
    units = build_units(doc)
    assert [u.index for u in units] == list(range(len(doc["steps"])))
    assert units[0].agent == "Orchestrator" and units[0].phase == "plan"
    assert units[-1].agent == "Orchestrator" and units[-1].phase == "answer"
    assert {"plan", "instruct", "act", "answer"} <= {u.phase for u in units}
    acting = [u for u in units if u.phase == "act"]
    assert acting and all(u.tool and u.agent in ("AccountAgent", "PaymentsAgent") for u in acting)
    assert all(u.status == "ok" for u in units)
    assert all(not u.unsupported and not u.misattributed for u in units)
    lookup = next(u for u in units if u.tool == "get_accounts")
    assert any(a.startswith("acc-") for a in lookup.artifacts_produced)  # ids from the tool result (ids read in lower case)


def test_artifact_edges_follow_an_account_id_from_report_to_instruction(demo_corpus):
    doc = clean_doc(demo_corpus)
    graph = build_graph(build_units(doc))
    n = len(graph)
    temporal = [e for e in graph.edges if e.type == "temporal"]
    assert [(e.src, e.dst) for e in temporal] == [(i, i + 1) for i in range(n - 1)]
    transfer = next(u for u in graph.units if u.tool == "transfer")
    instruction = transfer.index - 1
    account_edges = [e for e in graph.in_edges(instruction, ["artifact"]) if e.label.startswith("acc-")]
    assert account_edges, "the instruction's account ids come from earlier steps"
    assert all(graph.units[e.src].agent == "AccountAgent" for e in account_edges)
    assert any(e.label in transfer.artifacts_consumed for e in graph.in_edges(transfer.index, ["artifact"]))


def test_loops_and_repeated_errors_become_dependency_edges(demo_corpus):
    _, vague = faulted(demo_corpus, "vague_instruction")
    graph = build_graph(build_units(vague))
    loops = [e for e in graph.edges if e.type == "loop"]
    assert any(graph.units[e.src].agent == "Orchestrator" for e in loops)  # the instruction re-sent verbatim

    label, missing = faulted(demo_corpus, "missing_argument")
    graph = build_graph(build_units(missing))
    errors = [u.index for u in graph.units if u.status == "error"]
    assert errors[0] == label["step"]
    assert any(e.type == "same_error" and e.src == errors[0] for e in graph.edges)
    assert "missing required argument" in graph.units[errors[0]].error_signature


def test_features_mark_errors_unsupported_values_and_unacted_claims(demo_corpus):
    label, doc = faulted(demo_corpus, "missing_argument")
    graph = build_graph(build_units(doc))
    X = feature_matrix(graph)
    assert X.shape == (len(doc["steps"]), len(FEATURE_NAMES))
    col = FEATURE_NAMES.index
    assert X[label["step"], col("error")] == 1.0 and X[label["step"], col("first_error")] == 1.0
    assert X[:, col("macro_error_ratio")].max() > 0

    label, doc = faulted(demo_corpus, "wrong_argument")
    X = feature_matrix(build_graph(build_units(doc)))
    assert X[label["step"], col("unsupported_values")] >= 1  # an account the instruction never named

    label, doc = faulted(demo_corpus, "skipped_action")
    X = feature_matrix(build_graph(build_units(doc)))
    assert X[label["step"], col("unacted_claim")] == 1.0
    assert X[:, col("unacted_claim")].sum() == 1.0


def test_hetero_view_has_typed_context_nodes_and_reverse_edges(demo_corpus, demo_model):
    graph = build_graph(build_units(clean_doc(demo_corpus)))
    data = hetero_view(graph, demo_model.vocab, masked=[3])
    assert set(data.node_types) == {"step", "agent", "tool", "error", "artifact"}
    assert data["step"].num_nodes == len(graph)
    assert ("agent", "rev_by", "step") in data.edge_types and ("step", "rev_next", "step") in data.edge_types
    by_agent = data["step", "by", "agent"].edge_index
    assert 3 not in by_agent[0].tolist()  # a masked step hides its agent
    assert data["agent"].num_nodes == 3


def test_localization_on_faulted_demo_sessions(demo_corpus, demo_model):
    """Loose bound: the injected step is in the top 3 for most failed sessions, and the
    first hypothesis beats the recency baseline (last error step)."""
    hits, top1, recency = 0, 0, 0
    failed = [t for t in demo_corpus.truth if demo_corpus.docs[t["session"]]["outcome"] == "failure"]
    for label in failed:
        doc = demo_corpus.docs[label["session"]]
        result = analyze_document(doc, demo_model)
        assert result["detectors"] == ["isolation_forest", "hgt"]
        steps = [h["step"] for h in result["hypotheses"]]
        hits += label["step"] in steps[:3]
        top1 += steps[0] == label["step"]
        errors = [u.index for u in build_units(doc) if u.status == "error"]
        recency += (errors[-1] if errors else len(doc["steps"]) - 1) == label["step"]
    assert hits / len(failed) >= 0.6
    assert top1 > recency


def test_thumbs_down_in_serve_stores_hypotheses(demo_corpus, demo_model):
    """The collector's diagnosis worker runs analyze_session with the model trained above."""
    label, doc = faulted(demo_corpus, "missing_argument")
    access = demo_corpus.access
    access.add_feedback(doc["session_id"], -1.0, "the transfer never happened")
    deadline = time.monotonic() + 90
    stored = None
    while time.monotonic() < deadline:
        stored = access.get_analysis(doc["session_id"])
        if stored:
            break
        time.sleep(0.2)
    assert stored, "no analysis stored after the thumbs-down"
    assert stored["model_version"] == demo_model.version, stored.get("notes")
    assert stored["hypotheses"][0]["step"] == label["step"]
    assert np.isfinite([s["hgt"] for s in stored["scores"]]).all()


def test_cli_analyze_through_a_running_server(demo_corpus, demo_model):
    """`tracefix analyze --server`: HTTP access, and the model found next to the server's db."""
    import json
    import subprocess
    import sys

    label, doc = faulted(demo_corpus, "wrong_argument")
    proc = subprocess.run([sys.executable, "-m", "tracefix.cli", "analyze", doc["session_id"], "--json", "--no-llm",
                           "--server", demo_corpus.server_url], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["model_version"] == demo_model.version
    assert result["hypotheses"][0]["step"] == label["step"]
    assert demo_corpus.access.get_analysis(doc["session_id"])["model_version"] == demo_model.version


def test_cli_train_through_a_running_server(demo_corpus, tmp_path):
    """`tracefix train --server`: training sessions over HTTP, a progress line per epoch."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "tracefix.cli", "train", "--server", demo_corpus.server_url,
                           "--epochs", "2", "--out", str(tmp_path)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "epoch 1/2" in proc.stderr and "epoch 2/2" in proc.stderr
    successes = sum(d["outcome"] == "success" for d in demo_corpus.docs.values())
    assert f"trained on {successes} session(s)" in proc.stdout
    assert len(list(tmp_path.glob("hgt-1-*.pt"))) == 1
