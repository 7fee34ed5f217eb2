"""The web UI in a real browser: Playwright drives Debian's headless Chromium (`make chromium`;
never a browser of Playwright's own) through sign-in -> sessions -> session -> step -> thumbs
down -> diagnosis, with the page's console and CSP reports watched all along. Screenshots of
each page are kept as test artifacts (TRACEFIX_TEST_ARTIFACTS, else .tracefix/test-artifacts/ui)."""
from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from browser import CHROMIUM, watched

sync_api = pytest.importorskip("playwright.sync_api", reason="the browser test needs the `playwright` package "
                                                             "(in the dev extra)")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (`make chromium` installs it with "
                                                          "apt-get); the UI's browser test needs it")

ARTIFACTS = Path(os.environ.get("TRACEFIX_TEST_ARTIFACTS") or Path(__file__).parents[2] / ".tracefix" / "test-artifacts")


@pytest.fixture()
def page():
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            yield watched(context.new_page())
        finally:
            browser.close()


def test_click_through_sessions_session_step_feedback_and_diagnosis(ui_server, page):
    shots = ARTIFACTS / "ui"
    shots.mkdir(parents=True, exist_ok=True)
    expect = sync_api.expect

    page.goto(ui_server.url + "/")  # the token is asked for once
    expect(page).to_have_url(ui_server.url + "/login?next=%2F")
    page.fill("#token", ui_server.token)
    page.click("#sign-in")
    expect(page.locator("#sessions")).to_be_visible()
    cookie = next(c for c in page.context.cookies() if c["name"] == "tracefix_ui")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"

    page.fill("input[name=q]", "order 42")  # text search, then the session it finds
    page.press("input[name=q]", "Enter")
    expect(page.locator("#sessions tbody tr")).to_have_count(1)
    assert "<script>alert('task')</script>" in page.inner_text("#sessions")  # shown as text, never run
    page.screenshot(path=str(shots / "sessions.png"), full_page=True)
    page.click("#sessions a.sid")

    expect(page.locator("#timeline")).to_be_visible()
    assert page.locator("#timeline rect.step").count() == 6
    page.locator("#timeline rect.step").nth(3).click()  # a step of the timeline, in full
    expect(page.locator("#step-detail")).to_contain_text("Step 3")
    expect(page.locator("#step-output")).to_contain_text("again")
    page.screenshot(path=str(shots / "session-step.png"), full_page=True)

    page.fill("#feedback-comment", "refunded the wrong order")  # thumbs down: alert + diagnosis job
    page.click("#thumbs-down")
    expect(page.locator("#feedback")).to_contain_text("refunded the wrong order")

    polls = []  # the live state's requests: each asks for the unfinished jobs it shows, by id
    page.on("request", lambda r: "/api/v1/jobs" in r.url and polls.append(r.url))
    page.click("#to-diagnosis")
    expect(page.locator("#hypotheses table.hypotheses tbody tr").first).to_be_visible()
    jobs = page.locator("#start table.jobs")
    expect(jobs.locator("tr[data-job-id]")).to_have_count(1)  # the thumbs-down's diagnosis job
    page.fill("#replay-step", "1")
    page.fill("#replay-edit", "refund order 42, not 24")
    page.click("#start-replay")
    expect(jobs.locator("tr[data-job-id]")).to_have_count(2)
    expect(jobs.locator("tr[data-job-id]").first).to_contain_text("queued")  # no worker runs here
    # live state: the static script polls the jobs API with the cookie (CSP connect-src 'self')
    # (the page's CSP forbids eval, so Playwright's wait_for_function cannot run there: an attribute instead)
    expect(jobs).to_have_attribute("data-polled", re.compile(r"^[1-9]"))
    shown = jobs.locator("tr[data-job-id]").evaluate_all("rows => rows.map(r => r.dataset.jobId)")
    assert polls and all("job_id=" in url for url in polls), polls
    assert {parse_qs(urlsplit(url).query)["job_id"][0] for url in polls} <= set(shown)
    page.screenshot(path=str(shots / "diagnosis.png"), full_page=True)

    page.click("text=Alerts")
    expect(page.locator("#alerts")).to_contain_text("refunded the wrong order")
    page.click("text=Jobs")
    expect(page.locator("#jobs tr[data-job-id]")).to_have_count(2)
    page.screenshot(path=str(shots / "jobs.png"), full_page=True)

    assert page.problems == [], f"console errors or CSP violations: {page.problems}"


def test_the_diagnosis_page_shows_what_its_jobs_wrote_once_they_finish(quiet_server, page):
    """A replay job queued on the page's session: the page polls it, and once a worker has
    stored its result and finished it, the page shows the result by itself (issue 38: it
    said "reload the page for its results")."""
    import httpx

    expect = sync_api.expect
    api = httpx.Client(base_url=quiet_server.url, headers={"authorization": f"Bearer {quiet_server.token}"},
                       timeout=30)
    with api:
        [sid] = api.post("/api/v1/import", json=[{"messages": [
            {"role": "user", "content": "Refund order 42."},
            {"role": "assistant", "name": "Refunder", "content": "Refunded order 24."}]}]).json()["session_ids"]
        assert api.post("/api/v1/jobs", json={"session_id": sid, "kind": "replay"}).status_code in (200, 201, 202)

        page.goto(f"{quiet_server.url}/login?next=/diagnosis%3Fid%3D{sid}")
        page.fill("#token", quiet_server.token)
        page.click("#sign-in")
        jobs = page.locator("#start table.jobs")
        expect(jobs.locator(".job-state")).to_have_text("queued")
        expect(page.locator("#no-replay")).to_be_visible()
        expect(jobs).to_have_attribute("data-polled", re.compile(r"^[1-9]"))  # it polls while the job waits

        job = api.post("/api/v1/jobs/claim", json={"worker": "browser-test", "kind": "replay"}).json()
        assert job["session_id"] == sid
        stored = api.post(f"/api/v1/sessions/{sid}/replay", json={
            "session_id": sid, "created_at": "2026-11-23T00:00:00Z", "rounds": 1, "stages": {},
            "hypotheses": [{"id": "h-1", "step": 1, "agent": "Refunder", "verdict": "validated",
                            "verdict_reason": "1/1 replays succeeded", "reason": "refunded the wrong order",
                            "intervention": {"id": "iv-1", "step": 1, "kind": "add_message",
                                             "text": "refund order 42, not 24"},
                            "runs": [{"child_session_id": None, "success": True}]}]})
        assert stored.status_code == 201, stored.text
        finished = api.post(f"/api/v1/jobs/{job['job_id']}/finish", json={"worker": "browser-test", "state": "done"})
        assert finished.status_code == 200, finished.text

    # no reload by the test: the page's script shows the result
    expect(page.locator("#replays .verdict-validated")).to_be_visible(timeout=15_000)
    expect(page.locator("#no-replay")).to_have_count(0)
    expect(jobs.locator(".job-state")).to_have_text("done")
    assert "reload the page" not in page.inner_text("body")
    (ARTIFACTS / "ui").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "ui" / "diagnosis-updated.png"), full_page=True)
    assert page.problems == [], f"console errors or CSP violations: {page.problems}"
