"""An alert's Slack-compatible `text` carries what senders wrote (the session id, the feedback
comment, the task) as text, never as Slack markup: a thumbs-down sent with the ingest token
must not make a collector-signed alert ping @channel or show an attacker's link under the
collector's words. A real `tracefix serve` posts to a real webhook receiver on loopback."""
from __future__ import annotations

import json
import re
import uuid
from urllib.parse import quote

import pytest
from collector_support import TOKEN, WebhookReceiver, http
from test_access_cli import tracefix
from test_ingest import SYSTEM, post
from test_partial_success import make_request, make_span

import procs

EVIL = "https://evil.example/login"
# written for this test, not taken from the collector: Slack's control sequences
# (https://api.slack.com/reference/surfaces/formatting), a forged report line, markup already escaped
COMMENTS = [
    f"<!channel> <{EVIL}|Open the tracefix report>",
    "<!here|here> <!everyone> <@U024BE7LH> <#C024BE7LR|general> <!subteam^SAZ94GDB8>",
    f"looks fine\nReport: {EVIL}",
    f"&lt;!channel&gt; and &amp;lt;{EVIL}|x&gt; <{EVIL}>",
    f"unterminated <!channel and <{EVIL}|tail",
]
TASK = f"<!channel> pay <{EVIL}|the invoice> & <@U024BE7LH>\nReport: {EVIL}"


def hostile_session_id() -> str:
    return f"s<!here>|<{EVIL}|x>&-{uuid.uuid4().hex[:8]}"


def record_session(http_url: str, sid: str, task: str) -> None:
    trace = uuid.uuid4().bytes
    span = make_span(trace, 0, "chat m", {
        "gen_ai.operation.name": "chat", "tracefix.session.id": sid, "tracefix.step": 0,
        "gen_ai.input.messages": json.dumps([SYSTEM, {"role": "user", "content": task}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "done"}])})
    assert post(http_url + "/v1/traces", make_request([span]).SerializeToString())[0] == 200


def slack_markup(text: str) -> list[str]:
    """What Slack would read as markup in `text`: <...> sequences (mentions, links) and any
    `&` that is not one of its three escapes."""
    return re.findall(r"<[^>]*>?", text) + re.findall(r"&(?!amp;|lt;|gt;)", text)


def assert_escaped(alert: dict, base: str, sid: str, comment: str) -> None:
    text = alert["text"]

    assert slack_markup(text) == [], text
    assert "<!channel>" not in text and "<!here>" not in text and f"<{EVIL}" not in text
    # the collector's own link, on the one line that says Report
    link = f"{base}/api/v1/sessions/{quote(sid, safe='')}/report"
    assert alert["link"] == link
    assert [line for line in text.splitlines() if line.startswith("Report:")] == [f"Report: {link}"], text
    # nothing lost: Slack shows the escaped parts as the sender wrote them (line breaks as spaces)
    shown = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    for part in (sid, " ".join(comment.split("\n")), " ".join(TASK.split("\n"))):
        assert part in shown, (part, shown)
    # the payload's own fields are data, as sent
    assert alert["comment"] == comment and alert["session_id"] == sid


@pytest.mark.parametrize("comment", COMMENTS)
def test_user_text_reaches_the_webhook_escaped_and_the_report_link_stays(collector, webhook, comment):
    base = collector.match["http"]
    sid = hostile_session_id()
    record_session(base, sid, TASK)
    status, body, _ = http("POST", base + "/api/v1/feedback",
                           json.dumps({"session_id": sid, "score": -1, "comment": comment}).encode(), token=TOKEN)
    assert status == 201, body
    hits = webhook.wait_for(lambda j: j.get("session_id") == sid)
    assert len(hits) == 1
    assert_escaped(hits[0]["json"], base, sid, comment)


def test_an_alert_recorded_on_the_file_goes_out_escaped_with_the_collector_link(tmp_path):
    """`tracefix feedback` on the file records the alert without a collector; the first
    collector with a webhook completes its link and sends it."""
    db = tmp_path / "offline.duckdb"
    sid = hostile_session_id()
    serve = procs.start_serve(db, "--diagnose", "off")
    try:
        record_session(serve.match["http"], sid, TASK)
    finally:
        assert serve.stop() == 0
    comment = COMMENTS[0]
    fb = tracefix("feedback", sid, "--down", "--comment", comment, "--db", str(db))
    assert fb.returncode == 0, fb.stderr
    receiver = WebhookReceiver()
    serve = procs.start_serve(db, "--webhook", receiver.url, "--diagnose", "off")
    try:
        (hit,) = receiver.wait_for(lambda j: j.get("session_id") == sid)
        assert_escaped(hit["json"], serve.match["http"], sid, comment)
    finally:
        serve.stop()
        receiver.close()
