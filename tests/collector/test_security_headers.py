"""Every answer carries `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`
and a Content-Security-Policy; the HTML report's policy lets its own inline styles and
data: images draw and nothing else load, run or frame it (checked in headless Chromium)."""
from __future__ import annotations

import subprocess
import sys
import uuid
from urllib.parse import quote

import procs
import pytest
from browser import CHROMIUM, console_messages, drawing, screenshot
from collector_support import http
from test_ingest import _otlp_request


def csp(headers) -> dict[str, list[str]]:
    """A Content-Security-Policy header as {directive: [sources]}."""
    policy = {}
    for part in (headers["content-security-policy"] or "").split(";"):
        words = part.split()
        if words:
            policy[words[0]] = words[1:]
    return policy


def assert_secured(headers, where: str) -> None:
    assert headers["x-content-type-options"] == "nosniff", where
    assert headers["referrer-policy"] == "no-referrer", where
    assert csp(headers)["frame-ancestors"] == ["'none'"], where


def test_every_kind_of_answer_carries_the_security_headers(collector):
    base = collector.match["http"]
    sid = f"hdr-{uuid.uuid4().hex[:8]}"
    answers = {
        "traces 200": http("POST", base + "/v1/traces", _otlp_request(sid, 1), content_type="application/x-protobuf"),
        "healthz": http("GET", base + "/healthz", token=None),
        "list": http("GET", base + "/api/v1/sessions"),
        "document": http("GET", f"{base}/api/v1/sessions/{sid}"),
        "401": http("GET", base + "/api/v1/sessions", token="wrong"),
        "422": http("GET", base + "/api/v1/sessions?limit=-1"),
        "404 session": http("GET", base + "/api/v1/sessions/no-such-session"),
        "404 route": http("GET", base + "/no/such/route"),
        "405": http("DELETE", base + "/api/v1/feedback"),
        "400 body": http("POST", base + "/api/v1/feedback", b"not json"),
    }
    assert [k for k, (status, _, _) in answers.items() if status >= 500] == []
    assert answers["traces 200"][0] == 200 and answers["document"][0] == 200
    for where, (_, _, headers) in answers.items():
        assert_secured(headers, where)
        if headers["content-type"] == "application/json":  # data: nothing to load at all
            assert csp(headers)["default-src"] == ["'none'"], where


HOSTILE = {"session_id": f"csp/{uuid.uuid4().hex[:6]}", "task": "refund <script>alert(1)</script>",
           "messages": [{"role": "user", "content": "refund order 42 <img src=x onerror=alert(2)>"},
                        {"role": "assistant", "name": "Refunder", "content": "refund(24) </style><script>alert(3)</script>"},
                        {"role": "tool", "name": "refund", "content": "Error: order 24 not found"},
                        {"role": "assistant", "name": "Refunder", "content": "FINAL ANSWER: refunded"}],
           "outcome": "failure"}


@pytest.fixture(scope="module")
def report_server(tmp_path_factory):
    """A collector without a token (the browser sends none) holding one analyzed session."""
    pytest.importorskip("tracefix.report.render")
    folder = tmp_path_factory.mktemp("csp")
    serve = procs.start_serve(folder / "csp.duckdb", "--diagnose", "off")
    try:
        from tracefix.collector.access import HttpAccess

        HttpAccess(serve.match["http"]).import_sessions([HOSTILE])
        analyzed = subprocess.run([sys.executable, "-m", "tracefix.cli", "analyze", HOSTILE["session_id"],
                                   "--server", serve.match["http"], "--no-llm"],
                                  capture_output=True, text=True, timeout=300)
        assert analyzed.returncode == 0, analyzed.stderr[-2000:]
        yield serve, f"{serve.match['http']}/api/v1/sessions/{quote(HOSTILE['session_id'], safe='')}/report"
    finally:
        serve.stop()


def test_report_policy_allows_inline_styles_and_data_images_only(report_server):
    _, url = report_server
    status, body, headers = http("GET", url, token=None)
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b"data:image/png;base64," in body, "the analyzed report embeds its plots"
    assert_secured(headers, "report")
    policy = csp(headers)
    assert policy["default-src"] == ["'none'"]  # scripts, fonts, frames, fetches: none
    assert "script-src" not in policy
    assert policy["style-src"] == ["'unsafe-inline'"] and policy["img-src"] == ["data:"]
    assert policy["base-uri"] == ["'none'"] and policy["form-action"] == ["'none'"]
    status, _, headers = http("GET", url + "?format=md", token=None)
    assert status == 200 and headers["content-type"].startswith("text/markdown")
    assert_secured(headers, "markdown report")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (`make chromium` installs it with apt-get)")
def test_served_report_renders_under_its_policy_in_chromium(report_server, tmp_path):
    """A style or plot the policy blocked would log `Refused to ...` on the console."""
    _, url = report_server
    png = tmp_path / "served.png"
    log = screenshot(url, png, tmp_path / "profile")
    assert console_messages(log) == [], log[-3000:]
    colors, drawn = drawing(png)
    assert colors > 200 and drawn > 0.15, (colors, drawn)
