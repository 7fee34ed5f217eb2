"""A session whose stored JSON values hold lone UTF-16 surrogates (JSON's `"\\ud800"` is
valid text and decodes to one; the fuzz test stores such values) is answered by every read
route of a real `tracefix serve` with 200 in valid UTF-8, each lone surrogate as U+FFFD.

A str holding a lone surrogate has no UTF-8 form: answering one failed the route (400
'surrogates not allowed'), and the streamed pages wrote it as bytes that are not UTF-8."""
from __future__ import annotations

import json
import uuid
from urllib.parse import quote

import pytest
from collector_support import http, strict_json
from test_partial_success import make_request, make_span, otlp_json
from test_ingest import _otlp_request, post

# OTLP/JSON refuses an unpaired surrogate in a protobuf string, and the store refuses a message
# holding one (test_partial_success), but the JSON values an attribute holds (a session's
# inputs and output, a tool call's arguments and result) are kept as sent and decoded when
# read: the placeholder is swapped for escapes in the export's text (escaped twice, once per
# JSON level)
LONE = "LONESURROGATE"


def lone_surrogate_export(sid: str) -> bytes:
    trace = uuid.uuid4().bytes
    call = {"id": "call-1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    chat = make_span(trace, 0, "chat", {
        "gen_ai.operation.name": "chat", "tracefix.session.id": sid, "tracefix.step": 0,
        "gen_ai.input.messages": json.dumps([{"role": "user", "content": "look it up"}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": None, "tool_calls": [call]}])})
    tool = make_span(trace, 1, "execute_tool lookup", {
        "gen_ai.operation.name": "execute_tool", "tracefix.session.id": sid, "tracefix.step": 0,
        "gen_ai.tool.name": "lookup", "gen_ai.tool.call.id": "call-1",
        "gen_ai.tool.call.arguments": json.dumps({"query": LONE}), "gen_ai.tool.call.result": json.dumps([LONE])})
    root = make_span(trace, 2, "agent run", {
        "tracefix.session.id": sid, "tracefix.session.root": True,
        "tracefix.inputs": json.dumps({"task": f"find {LONE}"}),
        "tracefix.session.output": json.dumps({"reply": LONE})})
    text = otlp_json(make_request([chat, tool, root], service="surrogate-app")).decode()
    assert text.count(LONE) == 4
    # a lone high surrogate, a lone low one, and a pair spelled as two escapes (a real character)
    return text.replace(LONE, r"\\ud800 \\udfff \\ud83d\\ude00").encode()


def test_every_read_route_answers_a_stored_lone_surrogate_as_utf8(collector):
    base = collector.match["http"]
    sid = f"surrogate-{uuid.uuid4().hex[:8]}"
    status, answer, _ = post(base + "/v1/traces", lone_surrogate_export(sid), "application/json")
    assert status == 200, answer[:300]
    one = f"{base}/api/v1/sessions/{quote(sid, safe='')}"

    def read(url: str, replaced: bool | None = True):
        status, body, headers = http("GET", url)
        assert status == 200, (url, body[:300])
        text = body.decode("utf-8")  # strict: the bytes of a surrogate (surrogatepass) are not UTF-8
        assert replaced is None or ("\ufffd" in text) == replaced, url  # None: a page that may not hold it
        assert "\ud800" not in text, url
        return strict_json(text)

    seen = "\ufffd \ufffd \U0001F600"  # lone ones replaced, the pair joined into its character
    listed = read(f"{base}/api/v1/sessions?service=surrogate-app&limit=1000")
    assert {row["session_id"]: row["task"] for row in listed["sessions"]}[sid] == f"find {seen}"
    page = read(one)
    assert page["inputs"] == {"task": f"find {seen}"} and page["output"] == {"reply": seen}
    assert page["steps"][0]["tool_calls"][0]["arguments"] == {"query": seen}
    read(one + "?content=keys")
    read(one + "/spans", replaced=False)  # attributes as sent: the escapes are still text there
    step = read(one + "/steps/0")["step"]
    assert step["tool_calls"][0]["result"] == [seen]
    for stored in read(one + "/messages", replaced=False)["messages"]:
        read(f"{one}/messages/{stored['key']}", replaced=False)
    training, offset = {}, 0
    while offset is not None:  # every page of it (the shared collector holds every test's sessions)
        page = read(f"{base}/api/v1/training_sessions?criterion=all&offset={offset}", replaced=None)
        training.update({doc["session_id"]: doc for doc in page["sessions"]})
        offset = page["page"]["next_offset"]
    assert training[sid]["output"] == {"reply": seen}
    for fmt in ("html", "md"):
        status, body, _ = http("GET", f"{one}/report?format={fmt}")
        assert status in (200, 404), (fmt, body[:300])  # 404: the report renderer is not installed
        assert "\ud800" not in body.decode("utf-8")


# request bodies whose JSON holds a lone surrogate (`{sid}`: a stored session), and the field
# the 400 names; the escape in a raw string is what a client sends on the wire
SURROGATE_BODIES = [
    ("/api/v1/feedback", r'{"session_id": "{sid}", "score": -1, "comment": "bad \ud800"}', "comment"),
    ("/api/v1/feedback", r'{"session_id": "\udc00", "score": 1}', "session_id"),
    ("/api/v1/jobs", r'{"session_id": "{sid}", "kind": "diagnosis", "reason": "\ud800"}', "reason"),
    ("/api/v1/jobs", r'{"session_id": "{sid}", "kind": "replay", "steps": [0], "edit": "x\uDBFF"}', "edit"),
    ("/api/v1/jobs", r'{"session_id": "\ud800"}', "session_id"),
    ("/api/v1/sessions/{sid}/analysis", r'{"notes": ["ok", "\ud800"]}', "notes.1"),
    ("/api/v1/sessions/{sid}/analysis", r'{"\ud800": 1}', r"\ud800"),
    ("/api/v1/sessions/{sid}/replay", r'{"hypotheses": [{"runs": [{"output": {"text": "\udfff"}}]}]}',
     "hypotheses.0.runs.0.output.text"),
    ("/api/v1/import", r'[{"session_id": "{sid}-imported", "messages": [{"role": "user", "content": "\ud800"}]}]',
     "0.messages.0.content"),
]


@pytest.mark.parametrize("path,body,field", SURROGATE_BODIES)
def test_a_lone_surrogate_in_a_request_body_is_a_400_naming_the_field_and_nothing_is_stored(
        collector, api, path, body, field):
    base = collector.match["http"]
    sid = f"body-surrogate-{uuid.uuid4().hex[:8]}"
    assert post(base + "/v1/traces", _otlp_request(sid, 2))[0] == 200
    status, answer, _ = http("POST", base + path.replace("{sid}", sid), body.replace("{sid}", sid).encode())
    assert status == 400, answer[:300]
    error = strict_json(answer)
    assert error["code"] == "invalid_body" and "not valid Unicode text" in error["error"]
    assert error["detail"][0]["field"] == field
    # refused before the store was touched: nothing of the request is there
    assert api.get_session(sid)["feedback"] == [] and api.list_jobs(session_id=sid) == []
    assert api.get_analysis(sid) is None and api.get_replay(sid) is None
    assert api.get_session(f"{sid}-imported") is None


def test_a_surrogate_pair_spelled_as_two_escapes_is_text_and_accepted(collector, api):
    base = collector.match["http"]
    sid = f"body-pair-{uuid.uuid4().hex[:8]}"
    assert post(base + "/v1/traces", _otlp_request(sid, 2))[0] == 200
    status, answer, _ = http("POST", base + "/api/v1/feedback",
                             f'{{"session_id": "{sid}", "score": 1, "comment": "\\ud83d\\ude00"}}'.encode())
    assert status == 201, answer[:300]
    assert api.get_session(sid)["feedback"][0]["comment"] == "\U0001F600"
