"""The learned step ranker: it learns a generic signal from labelled logs, `tracefix train
--ranker` writes a JSON model that `analyze` then uses, and the shipped model loads."""
from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from tracefix.analysis.pipeline import analyze_document
from tracefix.analysis.ranker import FEATURE_NAMES, fit_ranker, load_rankers, order_by, session_kind, shipped_rankers
from tracefix.analysis.ranker_training import cross_validate, fold_of, labelled_sessions, session_inputs
from tracefix.collector.imports import conversation_to_document

SPEAKERS = ["Solver", "Checker", "Runner"]


def _log(rng: random.Random, n: int, decisive: int) -> dict:
    """A conversation whose decisive step is the one that states a value nobody gave it,
    hedged ("probably"), which the final answer then repeats; the others restate the task."""
    value = str(rng.randrange(1000, 9999))
    history = [{"role": "user", "name": "user", "content": "How many widgets are left in store 12?"}]
    for k in range(1, n):
        if k == decisive:
            text = f"The count is probably {value}, I assume the ledger says so."
        elif k == n - 1:
            text = f"Final answer: {value}" if decisive < k else "Final answer: unknown"
        else:
            text = rng.choice(["Let us look at the store records.", "Checking the records for store 12 now.",
                               "The records need to be read first.", "I will verify the count."])
        history.append({"role": "assistant", "name": SPEAKERS[k % len(SPEAKERS)], "content": text})
    return {"question": history[0]["content"], "history": history, "mistake_step": decisive}


@pytest.fixture(scope="module")
def labelled_file(tmp_path_factory):
    rng = random.Random(7)
    path = tmp_path_factory.mktemp("labelled") / "logs.jsonl"
    with path.open("w") as f:
        for _ in range(16):
            n = rng.randrange(6, 12)
            f.write(json.dumps(_log(rng, n, rng.randrange(1, n - 1))) + "\n")
    return path


def test_ranker_learns_a_generic_signal_under_cross_validation(labelled_file):
    items = labelled_sessions([labelled_file])
    assert len(items) == 16 and all(session_kind(it["doc"]) == "message" for it in items)
    inputs = [session_inputs(it["doc"])[0] for it in items]
    assert all(len(row) == len(FEATURE_NAMES) for X in inputs for row in X)
    rankings = cross_validate(items, inputs, folds=4, seeds=(0,))
    top1 = sum(r[0] == it["step"] for r, it in zip(rankings, items)) / len(items)
    first_turn = sum(it["step"] == 1 for it in items) / len(items)
    assert top1 >= 0.8 > first_turn, (top1, first_turn)


def test_leave_one_out_ranks_each_session_by_a_ranker_fitted_on_all_the_others(labelled_file):
    items = labelled_sessions([labelled_file])[:8]
    inputs = [session_inputs(it["doc"])[0] for it in items]
    assert fold_of(items, len(items), seed=0) == fold_of(items, len(items), seed=5) == list(range(len(items)))
    rankings = cross_validate(items, inputs, folds=len(items), seeds=(0,))
    for i in (0, 5):
        others = [(inputs[j], items[j]["step"]) for j in range(len(items)) if j != i]
        assert rankings[i] == order_by(fit_ranker(others).scores(inputs[i]))


def test_train_ranker_cli_writes_a_model_analyze_uses(labelled_file, tmp_path):
    out = tmp_path / "models" / "ranker.json"
    proc = subprocess.run([sys.executable, "-m", "tracefix.cli", "train", "--ranker", "--labelled",
                           str(labelled_file), "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "ranker for message sessions" in proc.stdout
    data = json.loads(out.read_text())  # a JSON list of weights: nothing in it is executed
    assert data["format"].startswith("tracefix-step-ranker/") and set(data["models"]) == {"message"}
    rankers = load_rankers(out)

    rng = random.Random(99)
    log = _log(rng, 9, 4)
    doc = conversation_to_document({k: v for k, v in log.items() if k != "mistake_step"})
    doc["outcome"] = "failure"
    result = analyze_document(doc, None, ranker=rankers["message"])
    assert result["ranker_version"] == rankers["message"].version
    top = result["hypotheses"][0]
    assert top["step"] == 4
    assert top["evidence"]["ranker"]["reasons"], "the ranker says which inputs raised the step"
    # ... and in words a reader knows: the step guesses and first says the final answer's value.
    in_words = " ".join(top["evidence"]["ranker"]["in_words"])
    assert "guess" in in_words or "final answer" in in_words, in_words
    assert "_" not in in_words, in_words
    assert [h["rank"] for h in result["hypotheses"]] == list(range(1, len(result["hypotheses"]) + 1))
    assert all("ranker" in row for row in result["scores"])

    without = analyze_document(doc, None, ranker=None)
    assert without["ranker_version"] is None and all("ranker" not in row for row in without["scores"])


def test_train_ranker_refuses_unlabelled_input(tmp_path):
    bad = tmp_path / "unlabelled.jsonl"
    bad.write_text(json.dumps({"history": [{"role": "user", "content": "hi"}]}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "tracefix.cli", "train", "--ranker", "--labelled", str(bad),
                           "--out", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "mistake_step" in proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_shipped_rankers_load_for_both_session_kinds():
    rankers = shipped_rankers()
    assert set(rankers) == {"message", "llm"}
    for ranker in rankers.values():
        assert ranker.feature_names == FEATURE_NAMES and ranker.trained_on["sessions"] > 0


def test_coordinating_speaker_is_read_from_the_conversation_shape():
    from tracefix.analysis.roles import coordinating_speaker

    # A hub that thinks, instructs and reads two workers' results: named like nothing.
    hub = ["kestrel", "kestrel", "lark", "kestrel", "kestrel", "wren", "kestrel", "lark", "kestrel"]
    assert coordinating_speaker(["user"] + hub, [False] + [True] * len(hub)) == "kestrel"
    # A two-party exchange where the hub speaks twice per worker turn: still the hub.
    pair = ["kestrel", "kestrel", "lark", "kestrel", "kestrel", "lark", "kestrel", "kestrel", "lark"]
    assert coordinating_speaker(pair, [True] * len(pair)) == "kestrel"
    # Peers taking turns evenly, or a group chat: nobody coordinates.
    even = ["lark", "wren"] * 5
    assert coordinating_speaker(even, [True] * len(even)) is None
    chat = ["lark", "wren", "owl", "wren", "lark", "owl", "lark", "wren"]
    assert coordinating_speaker(chat, [True] * len(chat)) is None
    # Tool outputs and humans between turns are not agents handing work on.
    assert coordinating_speaker(["user", "kestrel", "tool", "lark", "kestrel", "tool", "wren", "kestrel"],
                                [False, True, False, True, True, False, True, True]) is None


def test_a_log_with_tool_calls_is_ranked_like_an_instrumented_session():
    """The 'message' ranker learned from conversations in words only; a log that records its
    tool calls and results carries the evidence the 'llm' ranker was trained on."""
    chat = conversation_to_document({"question": "Sum 2 and 3", "history": [
        {"role": "user", "content": "Sum 2 and 3"}, {"role": "assistant", "name": "Solver", "content": "5"}]})
    assert session_kind(chat) == "message"
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
    with_calls = conversation_to_document({"task": "Sum 2 and 3", "messages": [
        {"role": "user", "content": "Sum 2 and 3"}, {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "5"}, {"role": "assistant", "content": "5"}]})
    assert session_kind(with_calls) == "llm"


def test_first_acts_and_verbatim_repeats_are_signals():
    """The first program, guess and error of a session are marked; a step that says again
    what an earlier one said is marked as a repeat (its first copy is not)."""
    from tracefix.analysis.step_signals import SIGNAL_NAMES, step_signal_matrix
    from tracefix.analysis.units import build_units

    doc = conversation_to_document({"question": "Count the rows", "history": [
        {"role": "user", "content": "Count the rows"},
        {"role": "assistant", "name": "Lark", "content": "I assume the file has a header."},
        {"role": "assistant", "name": "Wren", "content": "```python\nprint(len(rows))\n```"},
        {"role": "assistant", "name": "Wren", "content": "```python\nprint(len(rows))\n```"},
        {"role": "assistant", "name": "Lark", "content": "Probably 12, I think."}]})
    rows = step_signal_matrix(doc, build_units(doc))
    column = {name: [row[SIGNAL_NAMES.index(name)] for row in rows] for name in
              ("first_code", "first_hedging", "repeats_earlier", "has_code")}
    assert column["has_code"] == [0, 0, 1, 1, 0]
    assert column["first_code"] == [0, 0, 1, 0, 0]
    assert column["first_hedging"] == [0, 1, 0, 0, 0]
    assert column["repeats_earlier"] == [0, 0, 0, 1, 0]


def test_recorded_hgt_surprise_is_a_ranker_input(tmp_path):
    """A labelled session may carry the HGT's per-step surprise from when it was recorded: the
    ranker then learns from it (here it is the only thing that tells the decisive step)."""
    rng = random.Random(3)
    path = tmp_path / "with_hgt.jsonl"
    with path.open("w") as f:
        for _ in range(12):
            n = rng.randrange(6, 10)
            decisive = rng.randrange(1, n - 1)
            history = [{"role": "user", "name": "user", "content": "Count the widgets."}]
            history += [{"role": "assistant", "name": SPEAKERS[k % 3], "content": "Checking the records now."}
                        for k in range(1, n)]
            hgt = [rng.uniform(0.0, 0.3) for _ in range(n)]
            hgt[decisive] = 0.9
            f.write(json.dumps({"history": history, "mistake_step": decisive, "hgt": hgt}) + "\n")
    items = labelled_sessions([path])
    assert all(it["model"] is not None for it in items)
    inputs = [session_inputs(it["doc"], it["model"])[0] for it in items]
    rankings = cross_validate(items, inputs, folds=3, seeds=(0,))
    assert sum(r[0] == it["step"] for r, it in zip(rankings, items)) / len(items) >= 0.9
    # Without the recorded surprise the same sessions carry no signal at all.
    blind = cross_validate(items, [session_inputs(it["doc"])[0] for it in items], folds=3, seeds=(0,))
    assert sum(r[0] == it["step"] for r, it in zip(blind, items)) / len(items) < 0.5
    with pytest.raises(ValueError, match="recorded HGT surprise"):
        session_inputs(items[0]["doc"], type(items[0]["model"])([0.1]))
