"""`tracefix import / train / analyze` as a user runs them: real subprocesses on a DuckDB file
(`import` is the collector's verb, `train` and `analyze` the analysis's)."""
import json
import subprocess
import sys

import pytest

TRACEFIX = [sys.executable, "-m", "tracefix.cli"]


def run(*args, cwd, check=True):
    proc = subprocess.run([*TRACEFIX, *args], cwd=cwd, capture_output=True, text=True, timeout=240)
    if check and proc.returncode != 0:
        raise AssertionError(f"tracefix {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def conversation(i: int, correct: bool) -> dict:
    acct = f"ACC-{1000 + i}"
    history = [
        {"name": "Orchestrator", "role": "assistant", "content": f"PLAN: 1. look up {acct} 2. report its balance"},
        {"name": "Orchestrator", "role": "assistant", "content": f"AccountAgent: get the balance of {acct}"},
        {"name": "AccountAgent", "role": "assistant", "content": f"get_balance({acct})"},
        {"name": "Computer_terminal", "role": "user", "content": f'{{"account": "{acct}", "balance": {100 + i}}}'},
    ]
    if correct:
        history.append({"name": "Orchestrator", "role": "assistant", "content": f"FINAL ANSWER: {acct} holds {100 + i}"})
    else:
        history += [
            {"name": "AccountAgent", "role": "assistant", "content": "get_balance(ACC-0000)"},
            {"name": "Computer_terminal", "role": "user", "content": "Error: UnknownAccount ACC-0000"},
            {"name": "Orchestrator", "role": "assistant", "content": "FINAL ANSWER: the account does not exist"},
        ]
    return {"question": f"What is the balance of {acct}?", "ground_truth": str(100 + i),
            "is_correct": correct, "history": history}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("cli")


def test_import_train_analyze_roundtrip(workdir):
    db = str(workdir / "store" / "t.duckdb")
    good = workdir / "good.jsonl"
    good.write_text("\n".join(json.dumps(conversation(i, True)) for i in range(6)))
    bad = workdir / "bad.json"
    bad.write_text(json.dumps(conversation(42, False)))

    ids = json.loads(run("import", str(good), "--json", "--db", db, cwd=workdir).stdout)
    assert len(ids) == 6
    again = run("import", str(good), "--json", "--db", db, cwd=workdir)
    assert json.loads(again.stdout) == [] and again.stderr.count("already stored") == 6
    [bad_id] = run("import", str(bad), "--db", db, cwd=workdir).stdout.split()

    # no model yet: run-local detector only, and the result says so
    first = json.loads(run("analyze", bad_id, "--json", "--db", db, "--no-llm", cwd=workdir).stdout)
    assert first["detectors"] == ["isolation_forest"] and first["model_version"] is None
    assert any("no trained model" in n for n in first["notes"])
    assert [s["step"] for s in first["scores"]] == list(range(7))

    trained = run("train", "--db", db, "--epochs", "3", cwd=workdir)
    assert "epoch 3/3" in trained.stderr
    assert "trained on 6 session(s)" in trained.stdout
    models = list((workdir / "store" / "models").glob("hgt-1-*.pt"))
    assert len(models) == 1

    result = json.loads(run("analyze", bad_id, "--json", "--db", db, "--no-llm", cwd=workdir).stdout)
    assert result["detectors"] == ["isolation_forest", "hgt"]
    assert result["model_version"] == models[0].stem
    assert all("hgt" in s for s in result["scores"])
    top3 = [h["step"] for h in result["hypotheses"][:3]]
    assert 4 in top3 or 5 in top3  # the wrong lookup or the error it caused
    assert all(h["source"] in ("detectors", "ranker") for h in result["hypotheses"])
    assert result["ranker_version"] and all("ranker" in s for s in result["scores"])

    text = run("analyze", bad_id, "--db", db, "--no-llm", cwd=workdir).stdout
    assert "hypotheses:" in text and "1. step" in text and "isolation_forest" in text


def test_analyze_unknown_session_is_a_clear_error(workdir):
    proc = run("analyze", "s-nope", "--db", str(workdir / "store" / "t.duckdb"), cwd=workdir, check=False)
    assert proc.returncode != 0
    assert "s-nope" in proc.stderr


def test_import_bad_file_creates_nothing(workdir):
    db = str(workdir / "store2" / "t.duckdb")
    bad = workdir / "broken.jsonl"
    bad.write_text(json.dumps(conversation(1, True)) + "\n{broken\n")
    proc = run("import", str(bad), "--db", db, cwd=workdir, check=False)
    assert proc.returncode != 0 and "JSONL" in proc.stderr
    ok = workdir / "ok.json"
    ok.write_text(json.dumps(conversation(2, True)))
    assert len(json.loads(run("import", str(ok), "--json", "--db", db, cwd=workdir).stdout)) == 1


def test_text_timeline_of_a_long_session_lists_the_steps_near_the_evidence():
    from analysis_handmade import bank_session
    from tracefix.analysis.cli import MAX_LISTED_STEPS, render_text
    from tracefix.analysis.pipeline import analyze_document

    doc = bank_session(1)
    for i in range(12):  # a long session: many successful transfers, then the faulty one
        extra = bank_session(100 + i, wrong_instruction=(i == 11))["steps"]
        doc["steps"] += [{**s, "index": len(doc["steps"]) + j} for j, s in enumerate(extra)]
    result = analyze_document(doc, None)
    text = render_text(result)
    listed = [line for line in text.splitlines() if line[:7].strip().isdigit()]
    assert len(doc["steps"]) > MAX_LISTED_STEPS and len(listed) < len(doc["steps"])
    assert "routine steps not listed" in text
    top = result["hypotheses"][0]["step"]
    assert any(line.split()[0] == str(top) for line in listed)
    assert len(render_text(result, all_steps=True).splitlines()) > len(text.splitlines())
