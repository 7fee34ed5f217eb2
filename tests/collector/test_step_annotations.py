"""A person's marks on steps, through the real collector: `POST/GET /api/v1/sessions/{id}/annotations`
and `tracefix.feedback(..., step=N)`. A bad body is refused with the field at fault and nothing
stored; every accepted mark is listed, in the session document too; a negative mark raises the
alert and the diagnosis a session's thumbs-down raises, naming the step."""
from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import pytest

from collector_support import TOKEN
from test_ingest import _otlp_request, post


def _session(collector, steps: int = 3) -> str:
    sid = f"mark/{uuid.uuid4().hex[:8]}"  # a '/' in the id: the path carries it percent-encoded
    assert post(collector.match["http"] + "/v1/traces", _otlp_request(sid, steps))[0] == 200
    return sid


def _url(collector, sid: str) -> str:
    return f"{collector.match['http']}/api/v1/sessions/{quote(sid, safe='')}/annotations"


def _mark(collector, sid: str, body) -> tuple[int, dict]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    status, answer, _ = post(_url(collector, sid), raw, "application/json")
    return status, json.loads(answer)


def _listed(api, sid: str) -> list[dict]:
    return api._request("GET", f"/api/v1/sessions/{quote(sid, safe='')}/annotations")["annotations"]


@pytest.fixture(scope="module")
def marked(collector):
    return _session(collector)


# (body, status, the field the answer names, words of its message): what a client gets wrong
BAD_BODIES = [
    (b"{not json", 400, None, "not valid UTF-8 JSON"),
    ([{"step": 1, "score": -1}], 400, "", "must be a JSON object"),
    ({"score": -1}, 400, "step", "Field required"),
    ({"step": "1", "score": -1}, 400, "step", "valid integer"),
    ({"step": True, "score": -1}, 400, "step", "valid integer"),
    ({"step": 1.5, "score": -1}, 400, "step", "valid integer"),
    ({"step": -1, "score": -1}, 400, "step", "greater than or equal to 0"),
    ({"step": 1}, 400, "", "needs a 'label' or a 'score'"),
    ({"step": 1, "label": "   "}, 400, "label", "at least 1 character"),
    ({"step": 1, "label": "x" * 101}, 400, "label", "at most 100 characters"),
    ({"step": 1, "score": "-1"}, 400, "score", "valid number"),
    ({"step": 1, "score": -1, "comment": "c" * 2001}, 400, "comment", "at most 2000 characters"),
    (b'{"step": 1, "score": -1e400}', 422, None, "finite number"),
    ({"step": 3, "score": -1}, 422, None, "has no step 3 (it has 3"),
]


def test_bad_bodies_are_refused_with_the_field_at_fault_and_nothing_is_stored(collector, api, marked):
    for body, status, field, words in BAD_BODIES:
        got, answer = _mark(collector, marked, body)
        assert got == status, (body, answer)
        assert words in answer["error"], (body, answer)
        if field is not None:
            assert answer["detail"][0]["field"] == field, (body, answer)
        if status == 422:
            assert answer["parameter"] in ("score", "step")
    assert _listed(api, marked) == []
    status, answer = _mark(collector, "no-such-session", {"step": 0, "score": -1})
    assert status == 404 and answer["code"] == "unknown_session"


def test_every_accepted_mark_is_listed_and_in_the_document_beside_refused_ones(collector, api):
    sid = _session(collector)
    good = [{"step": i % 3, "label": f"label {i}", "score": 1, "comment": f"fine {i}"} for i in range(12)]
    bad = [{"step": 7, "score": 1}, {"step": 0}, {"step": "0", "score": 1}] * 4
    with ThreadPoolExecutor(6) as pool:  # accepted and refused marks arrive at once
        answers = list(pool.map(lambda body: _mark(collector, sid, body), [b for pair in zip(good, bad) for b in pair]))
    assert sorted(status for status, _ in answers) == [201] * 12 + [400] * 8 + [422] * 4
    listed = _listed(api, sid)
    assert sorted(m["comment"] for m in listed) == sorted(b["comment"] for b in good)
    assert {m["annotation_id"] for m in listed} == {a["annotation_id"] for s, a in answers if s == 201}
    assert all(m["negative"] is False and m["source"] == "api" for m in listed)
    doc = api.get_session(sid)
    assert sorted((m["step"], m["label"]) for m in doc["annotations"]) == sorted((b["step"], b["label"]) for b in good)


# labels a person may give alone; which of them say "wrong" (written here, not read from the code)
LABELS = [("wrong", True), ("  Incorrect ", True), ("thumbs-down", True), ("not bad", False), ("bad?", False),
          ("not wrong", False), ("correct", False), ("hallucination", False)]


def test_a_negative_mark_raises_an_alert_naming_the_step_and_queues_a_diagnosis(collector, api, webhook):
    sid = _session(collector)
    status, mark = _mark(collector, sid, {"step": 2, "label": "wrong tool", "score": -1,
                                          "comment": "debited the <!channel> account"})
    assert status == 201 and mark["negative"] and mark["alert_id"] and mark["job_id"]
    hits = webhook.wait_for(lambda j: j.get("session_id") == sid)
    assert len(hits) == 1
    alert = hits[0]["json"]
    assert alert["step"] == 2 and alert["label"] == "wrong tool"
    assert f"negative mark (wrong tool, -1) on step 2 of session {sid}" in alert["text"]
    assert "&lt;!channel&gt;" in alert["text"]  # escaped, as a feedback comment is
    assert [j["job_id"] for j in api.list_jobs(session_id=sid)] == [mark["job_id"]]
    for label, negative in LABELS:
        status, mark = _mark(collector, sid, {"step": 0, "label": label})
        assert status == 201 and mark["negative"] is negative, label
        assert bool(mark["alert_id"]) is negative, label
    status, mark = _mark(collector, sid, {"step": 1, "label": "wrong", "score": 0.5})
    assert mark["negative"] is False and mark["alert_id"] is None  # the score says it, not the label


def test_tracefix_feedback_marks_a_step(collector, api):
    import tracefix

    sid = _session(collector)
    mark = tracefix.feedback(sid, -1, "read the wrong balance", server=collector.match["http"], token=TOKEN, step=1,
                             label="misread")
    assert mark["step"] == 1 and mark["label"] == "misread" and mark["negative"]
    assert tracefix.feedback(sid, step=0, label="fine", server=collector.match["http"], token=TOKEN)["score"] is None
    assert [(m["step"], m["label"]) for m in _listed(api, sid)] == [(1, "misread"), (0, "fine")]
    with pytest.raises(tracefix.FeedbackError, match="has no step 9"):
        tracefix.feedback(sid, -1, server=collector.match["http"], token=TOKEN, step=9)
    with pytest.raises(ValueError, match="needs a label or a score"):
        tracefix.feedback(sid, step=0, server=collector.match["http"], token=TOKEN)
