"""A person's thumbs-down on one step, read by the diagnosis: on a real demo session (the banking
app, instrumented, exporting to the corpus's real `tracefix serve`), a step the analysis did
not rank first is marked wrong through the API; the diagnosis job that mark queues ranks that
step first, and the report says why (a person marked it; evidence outside the learned ranker)."""
from __future__ import annotations

import json
import urllib.request
from urllib.parse import quote

import procs

from tracefix.analysis.pipeline import analyze_document


def _call(base: str, method: str, path: str, body=None):
    request = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    return json.loads(text) if path.endswith(("annotations", "analysis")) or "/jobs" in path else text


def test_a_step_a_person_marked_wrong_ranks_first_and_the_report_says_why(demo_corpus):
    label = demo_corpus.run_faulted([("t03", "wrong_argument", 0)], seed=11)[0]  # a session of its own
    sid = label["session"]
    doc = demo_corpus.documents([sid])[sid]
    before = analyze_document(doc)["hypotheses"]  # what the detectors and the ranker say alone
    marked = next(s for s in range(len(doc["steps"])) if s != before[0]["step"] and s != label["step"])
    base, path = demo_corpus.server_url, f"/api/v1/sessions/{quote(sid, safe='')}"

    mark = _call(base, "POST", f"{path}/annotations", {"step": marked, "label": "wrong", "score": -1,
                                                         "comment": "debited the account the customer did not name"})
    assert mark["negative"] and mark["job_id"]  # the diagnosis a thumbs-down queues
    procs.wait_for(lambda: _call(base, "GET", f"/api/v1/jobs?job_id={mark['job_id']}")["jobs"][0]["state"] == "done",
                   "the diagnosis the mark queued", timeout=120)

    analysis = _call(base, "GET", f"{path}/analysis")
    first = analysis["hypotheses"][0]
    assert (first["step"], first["source"]) == (marked, "person")
    assert first["evidence"]["marks"][0]["comment"] == "debited the account the customer did not name"
    assert "marked wrong by a person" in first["rationale"] and "outside the learned ranker" in first["rationale"]
    assert before[0]["step"] in [h["step"] for h in analysis["hypotheses"][1:]]  # the detectors' pick follows

    report = _call(base, "GET", f"{path}/report?format=md")
    assert f"A person marked step {marked} wrong: the analysis ranks a step a person marked first" in report
    assert "no labelled data teaches the ranker what such a mark is worth" in report
    assert f"step {marked} (marked wrong): “wrong”, score -1.0: “debited the account" in report
    html = _call(base, "GET", f"{path}/report")
    assert f"A person marked step {marked} wrong" in html and "marked by a person" in html
