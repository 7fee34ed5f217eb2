"""feedback() against the real collector (`tracefix serve`), with spans sent over OTLP/gRPC."""
from __future__ import annotations

import json
import time
import urllib.request

import pytest

import procs
import tracefix
from tracefix import FeedbackError

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def collector(tmp_path_factory):
    proc = procs.start_serve(tmp_path_factory.mktemp("collector") / "tracefix.duckdb", "--token", TOKEN,
                             "--diagnose", "off")
    yield proc
    proc.stop()


def get_session(http: str, session_id: str) -> dict | None:
    request = urllib.request.Request(f"{http}/api/v1/sessions/{session_id}",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def test_feedback_reaches_the_collector_for_a_session_exported_over_grpc(collector):
    http, grpc = collector.match["http"], collector.match["grpc"]

    @tracefix.tool
    def close_account(account_id: str) -> dict:
        return {"closed": account_id}

    handle = tracefix.init(endpoint=f"http://{grpc}", protocol="grpc", service_name="feedback-test",
                           headers={"authorization": f"Bearer {TOKEN}"})
    try:
        with tracefix.session("support", entrypoint="app:support", inputs={"ticket": 7}) as s:
            close_account("ACC-1")
        session_id = s.id
    finally:
        handle.shutdown()
    deadline = time.monotonic() + 15
    while get_session(http, session_id) is None:
        assert time.monotonic() < deadline, "the collector never stored the session"
        time.sleep(0.1)

    answer = tracefix.feedback(session_id, -1, "closed the wrong account", server=http, token=TOKEN)
    assert answer["score"] == -1.0
    doc = get_session(http, session_id)
    assert [f["comment"] for f in doc["feedback"]] == ["closed the wrong account"]


def test_feedback_errors_say_what_went_wrong(collector, monkeypatch):
    http = collector.match["http"]
    with pytest.raises(FeedbackError, match="HTTP 401"):
        tracefix.feedback("s-any", 1, server=http)  # no token
    monkeypatch.setenv("TRACEFIX_SERVER", http)
    monkeypatch.setenv("TRACEFIX_TOKEN", TOKEN)
    with pytest.raises(FeedbackError, match="HTTP 404.*unknown session"):
        tracefix.feedback("s-never-recorded", 1)
    with pytest.raises(FeedbackError, match="cannot reach the collector"):
        tracefix.feedback("s-any", 1, server="http://127.0.0.1:9")
    with pytest.raises(ValueError):
        tracefix.feedback("", 1)
