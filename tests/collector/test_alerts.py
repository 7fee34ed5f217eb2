"""A thumbs-down raises an alert: a real webhook receiver gets it (once), a diagnosis job is queued."""
from __future__ import annotations

import json
import time
import uuid

import procs
from collector_support import WebhookReceiver, free_port, tracer_provider
from test_ingest import _otlp_request, post, record_agent_session


def wait_until(predicate, timeout: float = 20.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def raise_alert(http_url: str, sid: str) -> str:
    """Record a session and a thumbs-down on it through the collector's own routes; the alert's id."""
    assert post(http_url + "/v1/traces", _otlp_request(sid, 1), token=None)[0] == 200
    status, body, _ = post(http_url + "/api/v1/feedback",
                           json.dumps({"session_id": sid, "score": -1, "comment": "bad"}).encode(),
                           "application/json", token=None)
    assert status == 201
    return json.loads(body)["alert_id"]


def test_thumbs_down_posts_slack_compatible_alert_and_queues_diagnosis(collector, api, webhook):
    sid = f"alert-{uuid.uuid4().hex[:8]}"
    provider = tracer_provider(collector, "grpc")
    record_agent_session(provider.get_tracer("t"), sid)
    provider.force_flush(10_000)
    provider.shutdown()

    fb = api.add_feedback(sid, -1, "wrong account debited")
    assert fb["alert_id"] and fb["job_id"]
    hits = webhook.wait_for(lambda j: j.get("session_id") == sid)
    assert len(hits) == 1
    alert = hits[0]["json"]
    assert "wrong account debited" in alert["text"] and sid in alert["text"]
    assert alert["comment"] == "wrong account debited"
    assert alert["final_answer"] == "transferred"
    assert alert["task"] == "Move 5 EUR from ACC-1 to ACC-2"
    assert alert["link"] == f"{collector.match['http']}/api/v1/sessions/{sid}/report"
    assert hits[0]["headers"]["Idempotency-Key"] == fb["alert_id"]

    jobs = api.list_jobs(session_id=sid)
    assert [j["job_id"] for j in jobs] == [fb["job_id"]]
    assert jobs[0]["state"] in ("queued", "running", "done", "failed")
    delivered = wait_until(lambda: api.list_alerts(sid)[0]["deliveries"][0]["state"] == "delivered")
    assert delivered
    assert api.get_session(sid)["feedback"][0]["comment"] == "wrong account debited"
    assert sid in [s["session_id"] for s in api.list_sessions(feedback="negative", limit=1000)]


def test_positive_feedback_raises_no_alert(collector, api, webhook):
    sid = f"happy-{uuid.uuid4().hex[:8]}"
    assert post(collector.match["http"] + "/v1/traces", _otlp_request(sid, 1))[0] == 200
    fb = api.add_feedback(sid, 1, "great")
    assert fb["alert_id"] is None and fb["job_id"] is None
    assert api.list_jobs(session_id=sid) == []
    assert sid in [s["session_id"] for s in api.list_sessions(feedback="positive", limit=1000)]


def test_evaluation_span_event_is_feedback(collector, api, webhook):
    sid = f"evt-{uuid.uuid4().hex[:8]}"
    provider = tracer_provider(collector, "http")
    with provider.get_tracer("t").start_as_current_span("session", attributes={"tracefix.session.id": sid}) as span:
        span.add_event("gen_ai.evaluation.result", {"gen_ai.evaluation.score.value": -2.0,
                                                     "gen_ai.evaluation.explanation": "user said no"})
    provider.force_flush(10_000)
    provider.shutdown()
    doc = api.get_session(sid)
    assert [(f["score"], f["comment"]) for f in doc["feedback"]] == [(-2.0, "user said no")]
    assert webhook.wait_for(lambda j: j.get("session_id") == sid and j.get("comment") == "user said no")
    assert len(api.list_jobs(session_id=sid)) == 1


def test_webhook_down_then_up_is_delivered_exactly_once_across_a_restart(tmp_path):
    port = free_port()
    hook = f"http://127.0.0.1:{port}/hook"
    db = tmp_path / "alerts.duckdb"
    args = ("--webhook", hook, "--alert-retry-max", "0.5", "--diagnose", "off")
    serve = procs.start_serve(db, *args)
    receiver = None
    try:
        sid = "down-then-up"
        alert_id = raise_alert(serve.match["http"], sid)
        from tracefix.collector.access import HttpAccess

        api = HttpAccess(serve.match["http"])
        assert wait_until(lambda: api.list_alerts(sid)[0]["deliveries"][0]["attempts"] >= 2), "it retries"
        assert api.list_alerts(sid)[0]["deliveries"][0]["state"] == "pending"
        serve.stop()  # restart while the alert is still undelivered: the outbox keeps it
        serve = procs.start_serve(db, *args)
        receiver = WebhookReceiver(port)
        hits = receiver.wait_for(lambda j: j.get("alert_id") == alert_id)
        assert len(hits) == 1
        api = HttpAccess(serve.match["http"])
        assert wait_until(lambda: api.list_alerts(sid)[0]["deliveries"][0]["state"] == "delivered")
        time.sleep(1.0)  # longer than the retry cap: a duplicate would have arrived by now
        assert len([r for r in receiver.received if r["json"].get("alert_id") == alert_id]) == 1
        serve.stop()
        serve = procs.start_serve(db, *args)  # and a restart after delivery sends nothing again
        time.sleep(0.8)
        assert len([r for r in receiver.received if r["json"].get("alert_id") == alert_id]) == 1
    finally:
        serve.stop()
        if receiver:
            receiver.close()
