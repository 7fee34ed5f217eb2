"""Every per-session route reaches a session whatever its id holds: `/`, dot segments,
percent signs, unicode. Clients send the id as one percent-encoded path segment."""
from __future__ import annotations

from urllib.parse import quote

import pytest
from collector_support import WebhookReceiver, http, strict_json

import procs

WEIRD_IDS = ["a/b", "a/../b", "%2F", "a%2Fb", "..", ".", "/leading", "trailing/", "a//b", "a?b#c&d=e",
             "séance/✓ 1", "x", "x/spans", "x/analysis/report"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A collector of its own: ids like '.' are stored once per database."""
    receiver = WebhookReceiver()
    serve = procs.start_serve(tmp_path_factory.mktemp("ids") / "ids.duckdb", "--webhook", receiver.url,
                              "--diagnose", "off")
    from tracefix.collector.access import HttpAccess

    api = HttpAccess(serve.match["http"])
    docs = [{"session_id": sid, "messages": [{"role": "user", "content": f"task of {sid}"}]} for sid in WEIRD_IDS]
    assert api.import_sessions(docs) == WEIRD_IDS
    yield serve, api, receiver
    serve.stop()
    receiver.close()


@pytest.mark.parametrize("sid", WEIRD_IDS)
def test_every_per_session_route_reaches_the_id(served, sid):
    serve, api, _ = served
    doc = api.get_session(sid)
    assert doc is not None and doc["session_id"] == sid and doc["task"] == f"task of {sid}"
    spans = api.get_spans(sid)
    assert spans and {s["session_id"] for s in spans} == {sid}
    api.save_analysis(sid, {"session_id": sid, "marker": f"analysis of {sid}"})
    assert api.get_analysis(sid)["marker"] == f"analysis of {sid}"
    api.save_replay(sid, {"session_id": sid, "marker": f"replay of {sid}"})
    assert api.get_replay(sid)["marker"] == f"replay of {sid}"
    status, body, _ = http("GET", f"{serve.match['http']}/api/v1/sessions/{quote(sid, safe='')}/report?format=md",
                           token=None)
    assert status == 200 or (status == 404 and "report renderer" in strict_json(body)["error"]), body[:300]
    if status == 200:
        assert f"Session `{sid}`" in body.decode()


def test_an_unencoded_slash_still_means_a_sub_route(served):
    serve, api, _ = served
    base = serve.match["http"] + "/api/v1/sessions/"
    status, body, _ = http("GET", base + "x/spans", token=None)  # the spans of 'x'
    assert status == 200 and {s["session_id"] for s in strict_json(body)["spans"]} == {"x"}
    status, body, _ = http("GET", base + "x%2Fspans", token=None)  # the session 'x/spans'
    assert status == 200 and strict_json(body)["session_id"] == "x/spans"
    status, body, _ = http("GET", base + quote("no/such/ü", safe=""), token=None)
    assert status == 404 and strict_json(body)["error"] == "unknown session 'no/such/ü'"


def test_alert_link_of_a_slashed_id_opens_its_report(served):
    serve, api, receiver = served
    fb = api.add_feedback("a/../b", -1, "wrong")
    assert fb["alert_id"]
    (alert,) = api.list_alerts("a/../b")
    link = alert["payload"]["link"]
    assert link == f"{serve.match['http']}/api/v1/sessions/a%2F..%2Fb/report"
    status, body, _ = http("GET", link + "?format=md", token=None)
    assert status in (200, 404) and b"unknown session" not in body
    hits = receiver.wait_for(lambda j: j.get("alert_id") == fb["alert_id"])
    assert hits and hits[0]["json"]["link"] == link
