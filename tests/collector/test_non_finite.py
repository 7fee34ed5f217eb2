"""NaN and ±Infinity: refused as feedback before anything is written, and harmless when a
store already holds them (an older version, another writer): every route still answers
strict JSON and the webhook gets strict JSON, non-finite numbers as null."""
from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest
from collector_support import TOKEN, WebhookReceiver, http, strict_json
from test_alerts import wait_until
from test_ingest import _otlp_request, post

import procs


@pytest.fixture()
def seeded(collector):
    sid = f"nf-{uuid.uuid4().hex[:8]}"
    assert post(collector.match["http"] + "/v1/traces", _otlp_request(sid, 2))[0] == 200
    return sid


# JSON bodies as a client could send them: Python's NaN/Infinity tokens and a literal too
# large for a double (422: a number, not finite), and strings float() reads as non-finite
# (400: a string is no number, the body is validated strictly)
NON_FINITE_SCORES = ["NaN", "-Infinity", "1e400", "-1e400"]
STRING_SCORES = ['"nan"', '"NaN"', '"Infinity"', '"-inf"']


@pytest.mark.parametrize("score", NON_FINITE_SCORES + STRING_SCORES)
def test_non_finite_feedback_is_refused_and_writes_nothing(collector, api, seeded, score):
    body = f'{{"session_id": {json.dumps(seeded)}, "score": {score}, "comment": "x"}}'.encode()
    status, resp, _ = http("POST", collector.match["http"] + "/api/v1/feedback", body)
    if score in STRING_SCORES:
        assert status == 400, resp
        assert strict_json(resp)["detail"][0]["field"] == "score"
    else:
        assert status == 422, resp
        assert "finite" in strict_json(resp)["error"]
    assert api.get_session(seeded)["feedback"] == []
    assert api.list_alerts(seeded) == [] and api.list_jobs(session_id=seeded) == []
    # and the session's routes still answer
    listed = {s["session_id"] for s in api.list_sessions(limit=1000)}
    assert seeded in listed


def tracefix(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*procs.TRACEFIX, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TRACEFIX_SERVER": "", "TRACEFIX_TOKEN": ""})


def test_cli_feedback_refuses_a_non_finite_score_clearly(collector, api, seeded, tmp_path):
    through_server = tracefix("feedback", seeded, "--score", "nan", "--server", collector.match["http"],
                              "--token", TOKEN)
    assert through_server.returncode != 0
    assert "finite" in through_server.stderr and "Traceback" not in through_server.stderr
    assert api.get_session(seeded)["feedback"] == []

    db = tmp_path / "file.duckdb"
    serve = procs.start_serve(db, "--diagnose", "off")
    try:
        assert post(serve.match["http"] + "/v1/traces", _otlp_request("on-file", 1), token=None)[0] == 200
    finally:
        assert serve.stop() == 0
    on_file = ["--db", str(db)]
    for score in ("nan", "inf", "-inf"):
        refused = tracefix("feedback", "on-file", "--score", score, *on_file)
        assert refused.returncode != 0, refused.stdout
        assert "finite" in refused.stderr and "Traceback" not in refused.stderr
    shown = json.loads(tracefix("show", "on-file", "--json", *on_file).stdout)
    assert shown["feedback"] == []


def _poison(db, webhook_url: str) -> None:
    """Write non-finite numbers where a store can hold them, with DuckDB directly."""
    import duckdb

    con = duckdb.connect(str(db))
    try:
        con.execute("UPDATE sessions SET score = 'nan'::DOUBLE WHERE session_id = 'poisoned'")
        con.execute("UPDATE sessions SET score = '-inf'::DOUBLE WHERE session_id = 'poisoned/2'")
        for i, value in enumerate(("nan", "inf", "-inf")):
            con.execute(f"INSERT INTO feedback VALUES ('fb-old-{i}', 'poisoned', '{value}'::DOUBLE, 'old', 'api', {i + 1})")
        # an alert an older collector recorded with -Infinity in its payload, already fanned out
        # to a pending delivery, and one still waiting for its fan-out
        payload = '{"text": "old", "alert_id": "%s", "session_id": "poisoned", "score": -Infinity, "link": "/x"}'
        con.execute("INSERT INTO alerts VALUES ('al-old-1', 'fb-old-2', 'poisoned', ?, true, 3)", [payload % "al-old-1"])
        con.execute("INSERT INTO deliveries VALUES ('al-old-1', ?, 'pending', 0, 0, NULL, NULL)", [webhook_url])
        con.execute("INSERT INTO alerts VALUES ('al-old-2', 'fb-old-2', 'poisoned', ?, false, 4)", [payload % "al-old-2"])
        con.execute("""INSERT INTO analyses VALUES ('poisoned', '{"session_id": "poisoned", "scores": [{"step": 0,
                       "isolation_forest": NaN, "hgt": Infinity}], "hypotheses": []}', 1)""")
        con.execute("""INSERT INTO replays VALUES ('poisoned', '{"session_id": "poisoned", "score": -Infinity}', 1)""")
        con.execute("""UPDATE spans SET attributes = '{"x": NaN, "y": -Infinity}' WHERE session_id = 'poisoned'""")
    finally:
        con.close()


def test_a_store_holding_non_finite_values_serves_every_route(tmp_path):
    db = tmp_path / "poisoned.duckdb"
    serve = procs.start_serve(db, "--diagnose", "off")
    try:
        for sid in ("poisoned", "poisoned/2"):
            assert post(serve.match["http"] + "/v1/traces", _otlp_request(sid, 2), token=None)[0] == 200
    finally:
        assert serve.stop() == 0
    receiver = WebhookReceiver()
    _poison(db, receiver.url)

    serve = procs.start_serve(db, "--webhook", receiver.url, "--diagnose", "off")
    try:
        base = serve.match["http"]
        routes = ["/healthz", "/api/v1/sessions", "/api/v1/sessions?feedback=any",
                  "/api/v1/sessions?feedback=negative", "/api/v1/sessions/poisoned", "/api/v1/sessions/poisoned%2F2",
                  "/api/v1/sessions/poisoned/spans", "/api/v1/sessions/poisoned/analysis",
                  "/api/v1/sessions/poisoned/replay", "/api/v1/training_sessions?criterion=all",
                  "/api/v1/training_sessions?criterion=positive", "/api/v1/jobs", "/api/v1/alerts",
                  "/api/v1/alerts?session_id=poisoned"]
        answers = {}
        for route in routes:
            status, body, headers = http("GET", base + route, token=None)
            assert status == 200, (route, body[:300])
            assert headers["content-type"] == "application/json"
            answers[route] = strict_json(body)
        listed = {s["session_id"]: s for s in answers["/api/v1/sessions"]["sessions"]}
        assert listed["poisoned"]["score"] is None and listed["poisoned/2"]["score"] is None
        doc = answers["/api/v1/sessions/poisoned"]
        assert [f["score"] for f in doc["feedback"]] == [None, None, None]
        assert answers["/api/v1/sessions/poisoned/analysis"]["scores"][0]["hgt"] is None
        assert answers["/api/v1/sessions/poisoned/replay"]["score"] is None
        alerts = answers["/api/v1/alerts?session_id=poisoned"]["alerts"]
        assert {a["alert_id"]: a["payload"]["score"] for a in alerts} == {"al-old-1": None, "al-old-2": None}

        for fmt in ("html", "md"):
            status, body, _ = http("GET", f"{base}/api/v1/sessions/poisoned/report?format={fmt}", token=None)
            assert status in (200, 404), body[:300]  # 404: the report renderer is not installed

        # both old alerts reach the webhook, as strict JSON
        def old_alerts_received():
            hits = [r for r in receiver.received if r["json"].get("session_id") == "poisoned"]
            return hits if {h["json"]["alert_id"] for h in hits} == {"al-old-1", "al-old-2"} else None

        hits = wait_until(old_alerts_received)
        assert hits, receiver.received
        for hit in hits:
            assert strict_json(hit["body"])["score"] is None
    finally:
        serve.stop()
        receiver.close()


def test_store_refuses_non_finite_feedback_without_a_server(tmp_path):
    from tracefix.collector.store import Store

    store = Store(tmp_path / "direct.duckdb")
    try:
        store.import_sessions([{"session_id": "direct", "messages": [{"role": "user", "content": "hi"}]}])
        for score in (float("nan"), float("inf"), float("-inf"), "nan"):
            with pytest.raises(ValueError, match="finite"):
                store.add_feedback("direct", score)
        assert store.get_session("direct")["feedback"] == [] and store.list_alerts() == []
        assert store.add_feedback("direct", -1)["alert_id"]
    finally:
        store.close()
