"""The dashboard and a person's marks on steps, in a real browser (Playwright driving Debian's
Chromium) against a real `tracefix serve`: six agent sessions of two services exported over
OTLP/HTTP at known hours of one day, the charts' points counted per series, the time range
picked on the dashboard carried to the session list and picked there, and a step marked wrong
through the session page's form. Screenshots are kept as test artifacts (ui/dashboard.png is
docs/images/ui-dashboard.png)."""
from __future__ import annotations

import json
import random
import sys
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

import procs
import pytest
from browser import CHROMIUM
from test_ui_browser import ARTIFACTS, page  # noqa: F401  (the browser fixture)
import httpx

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
from agent_spans import request, session_spans  # noqa: E402

sync_api = pytest.importorskip("playwright.sync_api", reason="the browser test needs the `playwright` package")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (`make chromium`)")

TOKEN = "dashboard-test-token"
DAY = datetime(2026, 1, 5, tzinfo=timezone.utc)
HOUR_NS = 3600 * 10**9
# (service, hour of DAY it started at, ten minutes past): what the charts must show
SESSIONS = [("svc-a", 1), ("svc-a", 2), ("svc-a", 2), ("svc-a", 7), ("svc-b", 2), ("svc-b", 13)]
WHOLE_DAY = "since=2026-01-05T00:00:00Z&until=2026-01-06T00:00:00Z"


def api(serve) -> httpx.Client:
    return httpx.Client(base_url=serve.match["http"], headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    serve = procs.start_serve(tmp_path_factory.mktemp("dashboard") / "store.duckdb", "--token", TOKEN,
                              "--diagnose", "off")
    rng = random.Random(3)
    t0 = int(DAY.timestamp()) * 10**9
    ids = []
    for n, (service, hour) in enumerate(SESSIONS):
        sid = f"dash-{n}-{service}"
        body = request(session_spans(sid, 2, rng, growing=False, window=2, t0=t0 + hour * HOUR_NS + 600 * 10**9),
                       service=service).SerializeToString()
        post = urllib.request.Request(serve.match["http"] + "/v1/traces", data=body, method="POST", headers={
            "Content-Type": "application/x-protobuf", "Authorization": f"Bearer {TOKEN}"})
        urllib.request.urlopen(post, timeout=30).read()
        ids.append(sid)
    with api(serve) as client:  # one thumbs-down: hour 2 of svc-a
        client.post("/api/v1/feedback", json={"session_id": ids[1], "score": -1}).raise_for_status()
    serve.ids = ids
    yield serve
    serve.stop()


def sign_in(page, base: str, target: str) -> None:
    page.goto(base + target)
    page.fill("#token", TOKEN)
    page.click("#sign-in")


def dots(page, chart: str, group: str) -> list[int]:
    """The intervals a series has a point in, as the page draws them."""
    return sorted(int(b) for b in page.locator(
        f'#chart-{chart} g.series[data-group="{group}"] circle.point').evaluate_all(
        "els => els.map(e => e.dataset.bucket)"))


def tooltips(page, chart: str, group: str) -> list[str]:
    return page.locator(f'#chart-{chart} g.series[data-group="{group}"] circle.point title').evaluate_all(
        "els => els.map(e => e.textContent)")


def test_charts_have_a_point_per_hour_with_sessions_and_the_range_is_shared_with_the_list(served, page):
    expect = sync_api.expect
    base = served.match["http"]
    sign_in(page, base, f"/dashboard?{WHOLE_DAY}")
    expect(page.locator("#chart-sessions")).to_be_visible()
    assert page.locator("figure.chart").count() == 8
    for chart in ("sessions", "failure_rate", "thumbs_down_rate", "tokens", "latency_p50", "latency_p95",
                  "tool_error_rate"):
        assert dots(page, chart, "svc-a") == [1, 2, 7], chart  # one point per hour with sessions or calls
        assert dots(page, chart, "svc-b") == [2, 13], chart
    assert page.locator("#chart-cost circle.point").count() == 0  # no price known for the bench's model: no point
    assert tooltips(page, "sessions", "svc-a") == [
        "svc-a · 2026-01-05 01:00: 1", "svc-a · 2026-01-05 02:00: 2", "svc-a · 2026-01-05 07:00: 1"]
    assert tooltips(page, "thumbs_down_rate", "svc-a")[1] == "svc-a · 2026-01-05 02:00: 50%"
    page.screenshot(path=str(ARTIFACTS / "ui" / "dashboard.png"), full_page=True)

    page.click('#groupings a:text("agent")')  # the same charts per agent
    expect(page.locator('#chart-sessions g.series[data-group="Orchestrator"]')).to_have_count(1)
    assert dots(page, "sessions", "Orchestrator") == [1, 2, 7, 13]

    page.fill("#range-since", "2026-01-05T00:00:00Z")  # the first six hours: quarter-hours now
    page.fill("#range-until", "2026-01-05T06:00:00Z")
    page.click("#range-apply")
    expect(page.locator("h1")).to_contain_text("2026-01-05 06:00")
    assert dots(page, "sessions", "Orchestrator") == [4, 8]
    page.click("#range-other")  # the session list of the same range
    expect(page.locator("#sessions tbody tr")).to_have_count(4)
    assert sorted(page.locator("#sessions a.sid").all_inner_texts()) == sorted(served.ids[:3] + [served.ids[4]])
    assert page.input_value("#range-since") == "2026-01-05T00:00:00Z"

    page.select_option("#range-preset", "all")  # picked on the list: every session again
    page.fill("#range-since", "")
    page.fill("#range-until", "")
    page.click("#range-apply")
    expect(page.locator("#sessions tbody tr")).to_have_count(6)
    page.fill("#range-since", "2026-01-05T12:00:00Z")
    page.click("#range-apply")
    expect(page.locator("#sessions tbody tr")).to_have_count(1)
    page.click("#range-other")
    expect(page.locator("#chart-sessions")).to_be_visible()
    assert dots(page, "sessions", "svc-b") and not page.locator('#chart-sessions g[data-group="svc-a"]').count()
    assert page.problems == []


def test_the_dashboard_api_answers_the_series_the_page_draws(served):
    with api(served) as client:
        chart = client.get(f"/api/v1/dashboard/sessions?{WHOLE_DAY}").json()
        assert chart["bucket_s"] == pytest.approx(3600, abs=1e-6) and chart["buckets"] == 24
        assert {s["group"]: [(p["bucket"], p["value"]) for p in s["points"]] for s in chart["series"]} == {
            "svc-a": [(1, 1.0), (2, 2.0), (7, 1.0)], "svc-b": [(2, 1.0), (13, 1.0)]}
        rate = client.get(f"/api/v1/dashboard/thumbs_down_rate?{WHOLE_DAY}&by=tool").json()
        assert rate["series"][0]["group"] == "transfer"
        assert [(p["bucket"], p["value"]) for p in rate["series"][0]["points"]] == [
            (1, 0.0), (2, 1 / 3), (7, 0.0), (13, 0.0)]
        bad = client.get("/api/v1/dashboard/revenue")
        assert bad.status_code == 422 and bad.json()["parameter"] == "chart"
        assert client.get("/api/v1/dashboard/sessions?by=planet").json()["parameter"] == "by"


def test_a_step_marked_wrong_on_the_session_page(served, page):
    expect = sync_api.expect
    base, sid = served.match["http"], served.ids[3]
    sign_in(page, base, f"/session?id={quote(sid, safe='')}&step=1")
    expect(page.locator("#step-marks")).to_contain_text("No mark yet")
    page.fill("#mark-label", "wrong tool")
    page.select_option("#mark-score", "-1")
    page.fill("#mark-comment", "moved the money <b>twice</b>")
    page.click("#mark-save")
    expect(page.locator("#step-marks .mark")).to_have_count(1)
    expect(page.locator("#step-marks")).to_contain_text("moved the money <b>twice</b>")  # text, not markup
    assert "#step-marks" in page.url and "step=1" in page.url
    page.screenshot(path=str(ARTIFACTS / "ui" / "step-mark.png"), full_page=True)
    with api(served) as client:
        marks = client.get(f"/api/v1/sessions/{quote(sid, safe='')}/annotations").json()["annotations"]
        assert [(m["step"], m["label"], m["score"], m["source"], m["negative"]) for m in marks] == [
            (1, "wrong tool", -1.0, "ui", True)]
        alerts = client.get("/api/v1/alerts", params={"session_id": sid}).json()["alerts"]
        assert alerts[0]["payload"]["step"] == 1
    assert page.locator("#steps tbody tr").nth(1).locator(".marked").count() == 1  # the step list shows it
    assert page.locator("#steps tbody tr").nth(0).locator(".marked").count() == 0
    page.goto(f"{base}/session?id={quote(sid, safe='')}&step=0")  # the mark stays on its step
    expect(page.locator("#step-marks")).to_contain_text("No mark yet")
    assert page.problems == []
    assert json.dumps(marks)  # answered as JSON throughout
