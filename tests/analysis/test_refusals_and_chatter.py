"""Two ways real agents talk that must not move the blame, on real warehouse and bank
sessions recorded from the demo sim through `tracefix serve`: a tool that says no politely,
with no error word (read from its effect: nothing came back and the same call, asked again,
got the same answer; evidence/refused_requests.py), and a worker's harmless acknowledgement
between a hand-over and the action it led to. The polite words and the chatter are this file's
own templates (the analysis never sees them), with adversarial cases beside them: a read
asked twice that answered a record both times, and a polite answer that did bring a record."""
from __future__ import annotations

import copy
import json

import pytest

from tracefix.analysis.evidence import findings
from tracefix.analysis.graph import build_graph
from tracefix.analysis.pipeline import analyze_document
from tracefix.analysis.units import build_units

POLITE = ("We'd rather not go ahead with that for {ref} today.", "Thanks! Let's leave {ref} as it is for now.",
          "Happy to look at {ref} again some other time.")
CHATTER = ("Sure thing, give me a moment.", "Okay!", "Will do.", "Alright, on my way.")

# (task, kind, from step): a refund sent without its amount, a reserve of the wrong item, and a
# parcel asked about twice (the second note names the first parcel again)
WAREHOUSE_FAULTS = [("w04@3", "missing_argument", 5), ("w01@3", "wrong_argument", 5), ("w10@5", "wrong_instruction", 4)]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    from demo_corpus import DemoCorpus

    with DemoCorpus(tmp_path_factory.mktemp("warehouse-corpus"), sim_seed=3, domain="warehouse") as corpus:
        truth = corpus.run_faulted(WAREHOUSE_FAULTS, seed=3)
        docs = corpus.documents([t["session"] for t in truth])
    return {t["task"]: (t, docs[t["session"]]) for t in truth}


def _top(doc: dict) -> int:
    return analyze_document(doc, None, ranker=None)["hypotheses"][0]["step"]


def _refused(doc: dict) -> list:
    return findings(build_graph(build_units(doc)))["refused_requests"]


def _said_politely(doc: dict, step: int, n: int = 0) -> dict:
    """`doc` with the refusal of the call at `step` said in polite words wherever it appears,
    with no error field and no error object around it."""
    doc = copy.deepcopy(doc)
    call = doc["steps"][step]["tool_calls"][0]
    refusal = str(call["error"] or call["result"])
    arguments = json.loads(call["arguments"]) if isinstance(call["arguments"], str) else call["arguments"] or {}
    ref = next((v for v in arguments.values() if isinstance(v, str)), "that one")
    polite = POLITE[n % len(POLITE)].format(ref=ref)
    bare = refusal.split(": ", 1)[1] if refusal.split(": ", 1)[0].isidentifier() else refusal
    text = json.dumps(doc)
    for words in (refusal, bare):
        text = text.replace(json.dumps(words)[1:-1], json.dumps(polite)[1:-1])
    doc = json.loads(text)
    for s in doc["steps"]:
        for c in s["tool_calls"]:
            if polite in str(c.get("error") or ""):
                c["result"], c["error"] = polite, None
        for m in s.get("input_messages") or []:
            if m.get("role") == "tool" and polite in str(m.get("content")):
                m["content"] = polite
    return doc


def test_a_refusal_in_polite_words_is_read_from_its_effect(warehouse, demo_corpus):
    bank = [(t, demo_corpus.docs[t["session"]]) for t in demo_corpus.truth if t["kind"] == "missing_argument"]
    for n, (label, doc) in enumerate([warehouse["w04@3"], *bank]):
        assert _top(doc) == label["step"], label  # as recorded
        polite = _said_politely(doc, label["step"], n)
        said = json.dumps(polite["steps"]).lower()
        assert "unable" not in said and "missing" not in said and '"error": "' not in said
        assert [e.step for e in _refused(polite)][:1] == [label["step"]], label
        assert _top(polite) == label["step"], label


def test_a_polite_answer_that_brought_a_record_the_second_time_is_no_refusal(warehouse):
    label, doc = warehouse["w04@3"]
    polite = _said_politely(doc, label["step"])
    again = next(s for s in polite["steps"][label["step"] + 1:] if s["tool_calls"])
    again["tool_calls"][0]["result"] = "All set: reference rf_77 covers 33.80 for that order."
    assert not [e for e in _refused(polite) if e.step == label["step"]]


def test_a_read_asked_twice_that_answered_a_record_both_times_is_no_refusal(warehouse):
    label, doc = warehouse["w10@5"]
    asked = [s for s in doc["steps"] if s["tool_calls"] and s["tool_calls"][0]["name"] == "parcel_status"]
    assert len(asked) == 2 and asked[0]["tool_calls"][0]["result"] == asked[1]["tool_calls"][0]["result"]
    assert _refused(doc) == []
    assert _top(doc) == label["step"]


def _with_chatter(doc: dict) -> tuple[dict, list[int]]:
    """`doc` with an acknowledgement before each action that follows a hand-over, and for each
    new step the recorded step it is (None: the acknowledgement)."""
    doc = copy.deepcopy(doc)
    steps, was = [], []
    for k, step in enumerate(doc["steps"]):
        before = doc["steps"][k - 1] if k else None
        if before and before["agent"] != step["agent"] and not before["tool_calls"] and step["tool_calls"]:
            said = {"role": "assistant", "content": CHATTER[len(steps) % len(CHATTER)]}
            steps.append({**copy.deepcopy(step), "span_id": f"ack{k}", "tool_calls": [], "output_message": said})
            step["input_messages"] = [*step["input_messages"], said]
            was.append(None)
        steps.append(step)
        was.append(k)
    for i, step in enumerate(steps):
        step["index"] = i
    doc["steps"] = steps
    return doc, was


def test_an_acknowledgement_between_a_hand_over_and_its_action_takes_no_blame(warehouse, demo_corpus):
    # and a misread account type whose transfer then fails: the failing value is walked back
    # through the hand-over the worker acknowledged, not stopped at the acknowledgement
    misread = demo_corpus.run_faulted([("t12@10", "misread_tool_result", 0)], seed=10)
    docs = {**demo_corpus.docs, **demo_corpus.documents([t["session"] for t in misread])}
    bank = [(t, docs[t["session"]]) for t in [*demo_corpus.truth, *misread]]
    compared = 0
    for label, doc in [warehouse["w01@3"], *bank]:
        chatty, was = _with_chatter(doc)
        if doc["outcome"] != "failure" or _top(doc) != label["step"] or None not in was:
            continue  # not failed, missed as recorded, or no action right after a hand-over: nothing to compare
        assert was[_top(chatty)] == label["step"], label
        compared += 1
    assert compared >= 5
