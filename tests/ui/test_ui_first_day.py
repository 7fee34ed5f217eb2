"""What a new user met on the web UI's first day (issue 38, item 4), against a real `tracefix
serve`: steps that said the same thing each show it, a browser's unknown path is an HTML page
(the API's stay JSON), a thumbs-down says what it did, replay sessions are hidden from the
session list until asked for, long error lines are cut between words, evidence is written in
words."""
from __future__ import annotations

import html as html_text
import json
import re
from urllib.parse import quote

import httpx
import pytest
from ui_client import csrf_of, signed_in

BROWSER = {"accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


@pytest.fixture(scope="module")
def client(quiet_server):
    c = signed_in(quiet_server.url, quiet_server.token)
    yield c
    c.close()


def step_cells(page: str) -> dict[int, str]:
    """The steps table's "what it did" cell of each row, as text."""
    table = page[page.index('id="steps"'):]
    rows = re.findall(r'class="step-link">(\d+)</a></td>.*?<td class="task">(.*?)</td>', table, re.S)
    return {int(n): " ".join(html_text.unescape(re.sub(r"<[^>]+>", " ", cell)).split()) for n, cell in rows}


def test_steps_that_said_the_same_thing_each_show_it(quiet_server, client):
    """The hostile session's tool says "Error: order 24 not found" at steps 2 and 4: one stored
    message (content-addressed), two steps. Both rows show it (before: step 2's was blank)."""
    cells = step_cells(client.get(f"/session?id={quote(quiet_server.hostile)}").text)
    assert sorted(cells) == [0, 1, 2, 3, 4, 5]
    assert cells[2] == cells[4] == "Error: order 24 not found", cells
    assert all(cells.values()), cells


def test_a_browsers_unknown_path_is_the_uis_404_page_and_the_apis_stay_json(quiet_server, client):
    page = client.get("/no/such/page", headers=BROWSER)
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html"), page.text[:300]
    assert 'id="problem"' in page.text and "/no/such/page" in page.text and 'href="/"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    with httpx.Client(base_url=quiet_server.url, timeout=30) as anonymous:  # nothing to sign in for
        assert anonymous.get("/elsewhere", headers=BROWSER).status_code == 404
        assert anonymous.get("/elsewhere", headers=BROWSER).headers["content-type"].startswith("text/html")
    # a client of the API, and the API's own paths in a browser, keep the API's JSON answers
    for path, headers in [("/no/such/page", {"accept": "application/json"}), ("/no/such/page", {}),
                          ("/api/v1/no-such-thing", BROWSER), ("/v1/no-such-signal", BROWSER)]:
        r = client.get(path, headers=headers)
        assert r.status_code == 404 and r.headers["content-type"] == "application/json", (path, r.text[:200])
        assert r.json()["code"] == "not_found"
    assert client.get("/healthz", headers=BROWSER).json()["status"] == "ok"  # the API's route still answers


def test_a_thumbs_down_says_it_was_saved_and_what_it_started(quiet_server, client):
    before = client.get(f"/session?id={quote(quiet_server.calm)}")
    assert 'id="feedback-saved"' not in before.text
    r = client.post("/session/feedback", data={"csrf": csrf_of(before.text), "id": quiet_server.calm,
                                               "vote": "down", "comment": "the summary is wrong"})
    assert r.status_code == 303
    after = client.get(r.headers["location"]).text
    saved = re.search(r'<p class="saved" id="feedback-saved"[^>]*>(.*?)</p>', after, re.S)
    assert saved, after[:3000]
    said = " ".join(re.sub(r"<[^>]+>", "", saved.group(1)).split())
    assert said.startswith("Your thumbs-down is saved; it raised an alert") and "a diagnosis is queued" in said
    r = client.post("/session/feedback", data={"csrf": csrf_of(after), "id": quiet_server.calm, "vote": "up"})
    up = client.get(r.headers["location"]).text
    assert "Your thumbs-up is saved." in up and "raised an alert" not in up


def record_replay_child(url: str, token: str, session_id: str, parent: str) -> None:
    """A session a replay ran, as the replay's instrumentation exports it: its root names the
    parent session."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
        endpoint=f"{url}/v1/traces", headers={"authorization": f"Bearer {token}"}, timeout=10)))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span(f"session {session_id}", attributes={
            "tracefix.session.id": session_id, "tracefix.session.root": True,
            "tracefix.parent_session.id": parent}):
        with tracer.start_as_current_span("chat m", attributes={
                "gen_ai.operation.name": "chat", "tracefix.step": 0, "tracefix.session.id": session_id,
                "gen_ai.input.messages": json.dumps([{"role": "user", "content": "Summarise the ledger."}]),
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "Revenue up 4%."}])}):
            pass
    provider.shutdown()


def test_the_session_list_hides_replay_sessions_until_asked(quiet_server, client):
    child = "s-replay-child-of-calm"
    record_replay_child(quiet_server.url, quiet_server.token, child, quiet_server.calm)
    assert client.get(f"/api/v1/sessions/{child}").json()["parent_session_id"] == quiet_server.calm
    listed = client.get("/").text
    assert quiet_server.calm[:18] in listed and child not in listed
    assert 'id="show-replays"' in listed and "checked" not in listed[listed.index('id="show-replays"'):][:40]
    shown = client.get("/?replays=shown").text
    assert child in shown and quiet_server.calm[:18] in shown and 'title="replay of ' in shown
    assert re.search(r'id="show-replays"\s+checked', shown)
    total = lambda page: int(re.search(r"(\d+) matching", page).group(1))  # noqa: E731
    assert total(shown) == total(listed) + 1


def test_long_error_lines_are_cut_between_words(quiet_server, client):
    error = ("replay of step 3 stopped: the recorded response for the refund call could not be matched, "
             "because the request's fingerprint differed from every recorded one (messages, tools or model "
             "changed) and live LLM calls were not allowed")
    sid = quiet_server.hostile
    result = {"session_id": sid, "created_at": "2026-11-23T00:00:00Z", "rounds": 1, "stages": {},
              "hypotheses": [{"id": "h-1", "step": 1, "agent": "Refunder", "verdict": "error",
                              "intervention": {"id": "iv-1", "step": 1, "kind": "add_message", "text": "use order 42"},
                              "runs": [{"child_session_id": None, "success": None, "error": error}]}]}
    stored = httpx.post(f"{quiet_server.url}/api/v1/sessions/{quote(sid, safe='')}/replay", json=result,
                        headers={"authorization": f"Bearer {quiet_server.token}"})
    assert stored.status_code == 201, stored.text
    page = client.get(f"/diagnosis?id={quote(sid)}").text
    cell = re.search(r"<td>(replay of step 3 stopped[^<]*)</td>", page).group(1)
    shown = html_text.unescape(cell)
    assert shown.endswith("…") and len(shown) <= 120, shown
    head = shown[:-1]
    assert error.startswith(head) and error[len(head)] == " ", f"cut inside a word: {shown!r}"


def test_a_long_token_is_still_cut_where_the_limit_falls():
    from tracefix.ui.views import brief

    assert brief("x" * 50, 20) == "x" * 19 + "…"
    assert brief("short words stay", 20) == "short words stay"
    assert brief("a " + "y" * 40, 20) == "a " + "y" * 17 + "…"  # no boundary in the second half


def test_one_delivery_attempt_is_one_attempt():
    from tracefix.ui.pages import environment

    alert = {"created_at": "2026-11-23T00:00:00Z", "session_id": "s-1", "payload": {"score": -1.0},
             "deliveries": [{"state": "failed", "webhook": "https://hooks.example/a", "attempts": 1},
                            {"state": "delivered", "webhook": "https://hooks.example/b", "attempts": 3}]}
    page = environment().get_template("alerts.html").render(alerts=[alert], total=1, offset=0, csrf="x",
                                                           login_needed=False, path="/alerts")
    counts = re.findall(r"(\d+ attempts?)\b", page)
    assert counts == ["1 attempt", "3 attempts"], counts


def test_the_diagnosis_page_writes_evidence_in_words_and_keeps_the_raw_packet_behind_a_toggle(quiet_server, client):
    """Evidence as the analysis stores it (contracts §3): the page says it in words, as the
    report does, in the report's order; the packet itself is folded away in <details>."""
    sid = quiet_server.calm
    evidence = {"detectors": ["isolation_forest"], "scores": {"isolation_forest": 0.41},
                "features": {"error": 1.0, "new_values_z": 2.5}, "path": [2, 1], "tool": "ledger_lookup",
                "error": "KeyError: 'Q3'", "signals": ["the same call failed twice"], "group": [1, 2],
                "ranker": {"score": 2.31, "reasons": {"new_values_z": 0.8},
                           "in_words": ["introduces values nobody showed before"]}}
    analysis = {"session_id": sid, "created_at": "2026-11-23T00:00:00Z", "detectors": ["isolation_forest"],
                "llm_used": False, "ranker_version": "ranker-1", "notes": [],
                "hypotheses": [{"rank": 1, "step": 1, "agent": "Writer", "score": 0.93, "source": "detectors",
                                "rationale": "Step 1 (Writer): read a quarter the ledger lacks", "evidence": evidence},
                               {"rank": 2, "step": 2, "agent": "Planner", "score": 0.5, "source": "ranker",
                                "rationale": "Step 2 (Planner): answered anyway", "evidence": {}}]}
    bearer = {"authorization": f"Bearer {quiet_server.token}"}
    stored = httpx.post(f"{quiet_server.url}/api/v1/sessions/{quote(sid, safe='')}/analysis", json=analysis,
                        headers=bearer)
    assert stored.status_code == 201, stored.text
    page = client.get(f"/diagnosis?id={quote(sid)}").text
    table = page[page.index('<table class="hypotheses">'):]
    table = table[:table.index("</table>")]
    first_row = table[table.index("<tbody>"):table.index("</tr>", table.index("<tbody>"))]
    words = first_row[:first_row.index('<details class="raw">')]
    said = " ".join(html_text.unescape(re.sub(r"<[^>]+>", " ", words)).split())
    for part in ("dependency path 2 → 1", "tool ledger_lookup", "error KeyError: 'Q3'",
                 "learned ranker score 2.31: introduces values nobody showed before",
                 "detector scores isolation_forest 0.41", "signals the same call failed twice"):
        assert part in said, (part, said)
    assert "{" not in said and "}" not in said, said  # no JSON outside the toggle
    raw = first_row[first_row.index('<details class="raw">'):]
    assert "<summary>raw evidence packet</summary>" in raw and '"group"' in html_text.unescape(raw)
    # a replay refuted step 1 and verified step 2: step 2 leads the table and the replays, as it
    # leads the report's summary
    replayed = {"session_id": sid, "created_at": "2026-11-23T00:00:00Z", "rounds": 1, "stages": {},
                "hypotheses": [{"id": "h-1", "step": 1, "agent": "Writer", "verdict": "refuted",
                                "intervention": {"id": "iv-1", "step": 1, "kind": "add_message", "text": "use Q2"},
                                "runs": [{"child_session_id": None, "success": False}]},
                               {"id": "h-2", "step": 2, "agent": "Planner", "verdict": "validated",
                                "intervention": {"id": "iv-2", "step": 2, "kind": "add_message", "text": "check Q3"},
                                "runs": [{"child_session_id": None, "success": True}]}]}
    assert httpx.post(f"{quiet_server.url}/api/v1/sessions/{quote(sid, safe='')}/replay", json=replayed,
                      headers=bearer).status_code == 201
    page = client.get(f"/diagnosis?id={quote(sid)}").text
    steps = re.findall(r'<td class="num">(\d+)</td>\s*<td class="num"><a href="/session\?id=[^"]*step=(\d+)',
                       page[page.index('<table class="hypotheses">'):])
    assert steps[:2] == [("1", "2"), ("2", "1")], steps
    cards = re.findall(r'<article class="hypothesis">\s*<h3>Step (\d+)', page)
    assert cards == ["2", "1"], cards
    report = client.get(f"/api/v1/sessions/{quote(sid, safe='')}/report?format=md").text
    assert "Most likely root cause: step 2 (Planner)" in report
