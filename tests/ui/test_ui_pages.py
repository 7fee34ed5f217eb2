"""The web UI over HTTP against a real `tracefix serve`: sign-in, the cookie's reach, escaping
and CSP, CSRF, bad input as 4xx, and what each page shows."""
from __future__ import annotations

import json
import re
from html import unescape
from urllib.parse import quote

import httpx
import pytest
from report_session import tracefix
from ui_client import csrf_of, signed_in

PAGES = ["/", "/session?id={hostile}", "/session?id={hostile}&step=1", "/session/spans?id={hostile}",
         "/diagnosis?id={hostile}", "/alerts", "/jobs", "/regress",
         "/regress?run=%3Cscript%3Ealert(1)%3C/script%3E"]


@pytest.fixture(scope="module")
def client(ui_server):
    c = signed_in(ui_server.url, ui_server.token)
    yield c
    c.close()


def test_pages_ask_for_the_token_once_and_keep_a_strict_httponly_cookie(ui_server):
    with httpx.Client(base_url=ui_server.url, follow_redirects=False) as anonymous:
        r = anonymous.get("/session?id=x&step=2")
        assert r.status_code == 303 and r.headers["location"] == "/login?next=%2Fsession%3Fid%3Dx%26step%3D2"
        login = anonymous.get("/login")
        wrong = anonymous.post("/login", data={"token": "guess", "csrf": csrf_of(login.text), "next": "/"})
        assert wrong.status_code == 401 and "not the API token" in wrong.text
        assert "set-cookie" not in wrong.headers
        right = anonymous.post("/login", data={"token": ui_server.token, "csrf": csrf_of(login.text),
                                               "next": "//elsewhere.example/"})
        assert right.status_code == 303 and right.headers["location"] == "/"  # never off-site
        cookie = right.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and ui_server.token not in cookie
        assert anonymous.get("/").status_code == 200


def test_the_cookie_opens_api_reads_but_not_api_writes(ui_server, client):
    assert client.get("/api/v1/sessions").status_code == 200
    assert client.get(f"/api/v1/jobs?session_id={quote(ui_server.calm)}").status_code == 200
    write = client.post("/api/v1/feedback", json={"session_id": ui_server.calm, "score": -1})
    assert write.status_code == 401
    with httpx.Client(base_url=ui_server.url) as bearer:  # the API's own scheme is unchanged
        assert bearer.get("/api/v1/sessions").status_code == 401
        assert bearer.get("/api/v1/sessions", headers={"authorization": f"Bearer {ui_server.token}"}).status_code == 200


@pytest.mark.parametrize("path", PAGES)
def test_every_page_escapes_stored_text_under_a_strict_csp(ui_server, client, path):
    r = client.get(path.format(hostile=quote(ui_server.hostile)))
    assert r.status_code == 200, r.text[:2000]
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert re.search(r"app;dur=[0-9.]+", r.headers["server-timing"])
    html = r.text
    assert "<script>alert" not in html and "<img src=x" not in html
    scripts = re.findall(r"<script[^>]*>", html)  # the UI's own files only (the session page's waterfall.js too)
    assert scripts[0] == '<script src="/static/ui.js" defer>'
    assert all(re.fullmatch(r'<script src="/static/[a-z]+\.js" defer>', tag) for tag in scripts), scripts
    tags = re.findall(r"<[a-zA-Z][^<>]*>", html)  # real tags: stored text has its `<` escaped
    assert not [t for t in tags if re.search(r"\s(style|on[a-z]+)=", t)], "the CSP blocks inline styles and handlers"
    if "hostile" in path and "spans" not in path and "step" not in path:
        assert "&lt;script&gt;alert(" in html  # the task is shown, as text


def test_the_session_page_keeps_a_session_for_regression(ui_server, client):
    page = client.get(f"/session?id={quote(ui_server.calm)}")
    form = {"id": ui_server.calm, "dataset": "ui-kept", "csrf": csrf_of(page.text)}
    assert client.post("/session/dataset", data={**form, "csrf": "0" * 64}).status_code == 403
    kept = client.post("/session/dataset", data=form, follow_redirects=True)
    assert kept.status_code == 200 and 'id="kept"' in kept.text and "tracefix regress --dataset ui-kept" in kept.text
    items = client.get("/api/v1/datasets/items?dataset=ui-kept").json()["items"]
    assert [(i["session_id"], i["kind"]) for i in items] == [(ui_server.calm, "added")]


def test_posts_need_the_forms_csrf_token_and_this_origin(ui_server, client):
    page = client.get(f"/session?id={quote(ui_server.calm)}")
    form = {"id": ui_server.calm, "vote": "down", "comment": "forged"}
    assert client.post("/session/feedback", data=form).status_code == 403
    assert client.post("/session/feedback", data={**form, "csrf": "0" * 64}).status_code == 403
    assert client.post("/session/feedback", data={**form, "csrf": csrf_of(page.text)},
                       headers={"origin": "https://evil.example"}).status_code == 403
    assert client.post("/session/feedback", json={**form, "csrf": csrf_of(page.text)}).status_code == 403
    assert "forged" not in client.get(f"/session?id={quote(ui_server.calm)}").text


@pytest.mark.parametrize("method, path, status", [
    ("GET", "/?sort=nonsense", 422), ("GET", "/?offset=-1", 422), ("GET", "/?feedback=maybe", 422),
    ("GET", "/session", 422), ("GET", "/session?id=no-such-session", 404), ("GET", "/session?id={calm}&step=x", 422),
    ("GET", "/session?id={calm}&step=999", 404), ("GET", "/session/spans?id=nope", 404),
    ("GET", "/diagnosis?id=nope", 404), ("GET", "/jobs?state=exploded", 422),
    ("POST", "/session/feedback", 422), ("POST", "/diagnosis/start", 422),
])
def test_bad_input_is_answered_4xx_naming_the_problem(ui_server, client, method, path, status):
    path = path.format(calm=quote(ui_server.calm))
    if method == "GET":
        r = client.get(path)
    else:
        csrf = csrf_of(client.get("/").text)
        r = client.post(path, data={"csrf": csrf, "id": ui_server.calm, "vote": "sideways", "kind": "exec"})
    assert r.status_code == status, r.text[:1000]
    assert 'id="problem"' in r.text


def test_sessions_page_searches_filters_and_sorts(ui_server, client):
    found = client.get("/?q=quarterly+LEDGER").text
    assert ui_server.calm[:18] in found and ui_server.hostile[:18] not in found
    assert ui_server.hostile[:18] in client.get("/?q=order+42").text
    assert "No session matches" in client.get("/?q=100%25_").text
    by_steps = client.get("/?sort=steps&dir=asc").text  # 3 messages before 6
    assert by_steps.index(ui_server.calm[:18]) < by_steps.index(ui_server.hostile[:18])
    by_steps = client.get("/?sort=steps&dir=desc").text
    assert by_steps.index(ui_server.hostile[:18]) < by_steps.index(ui_server.calm[:18])
    # the hostile session was analyzed (and other tests may queue its jobs); the calm one never was
    undiagnosed = client.get("/?diagnosis=none").text
    assert ui_server.calm[:18] in undiagnosed and ui_server.hostile[:18] not in undiagnosed
    state = re.search(r'class="badge diag-(\w+)" href="/diagnosis\?id=' + re.escape(quote(ui_server.hostile)),
                      client.get("/").text).group(1)
    assert state in ("queued", "running", "analyzed", "replayed", "failed")
    assert ui_server.hostile[:18] in client.get(f"/?diagnosis={state}").text


def test_session_page_shows_lanes_steps_and_one_step_in_full(ui_server, client):
    html = client.get(f"/session?id={quote(ui_server.hostile)}&step=3").text
    lanes = re.findall(r'<text class="lane-label"[^>]*>([^<]+)</text>', html)
    assert lanes == ["Orchestrator", "Refunder", "Tool"]
    assert len(re.findall(r'<rect class="step', html)) == 6
    assert 'class="step kind-message selected"' in html
    detail = html[html.index('id="step-detail"'):]
    assert "Step 3" in detail and "padding padding" in detail and "again" in detail


def test_session_page_says_why_a_session_is_not_replayable(ui_server, client):
    """The page's answer is the document's: 'no' carries the reason a replay refuses with."""
    for sid in (ui_server.hostile, ui_server.calm):
        doc = client.get(f"/api/v1/sessions/{quote(sid, safe='')}").json()
        html = client.get(f"/session?id={quote(sid)}").text
        said = html[html.index('id="replayable"'):]
        said = html_text(said[said.index(">") + 1:said.index("</dd>")])
        if doc["replayable"]:
            assert said.startswith("yes") and "@tracefix.tool" in said
        else:
            assert said.startswith("no") and doc["replayable_reason"] in said, (said, doc["replayable_reason"])


def html_text(fragment: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", fragment))


def test_feedback_from_the_ui_takes_the_apis_path(ui_server, client):
    page = client.get(f"/session?id={quote(ui_server.calm)}")
    r = client.post("/session/feedback", data={"csrf": csrf_of(page.text), "id": ui_server.calm, "vote": "up",
                                               "comment": "clear <b>summary</b>"})
    assert r.status_code == 303
    doc = client.get(f"/api/v1/sessions/{quote(ui_server.calm, safe='')}?limit=1").json()
    assert [(f["score"], f["comment"]) for f in doc["feedback"]][-1] == (1.0, "clear <b>summary</b>")
    assert "clear &lt;b&gt;summary&lt;/b&gt;" in client.get(r.headers["location"]).text


def test_jobs_and_alerts_pages_show_a_page_of_the_newest_and_link_to_older(ui_server, client):
    """A page reads the rows it shows, not the whole list (a store with a hundred thousand
    thumbs-downs has as many jobs and alerts)."""
    from tracefix.collector.access import HttpAccess

    api = HttpAccess(ui_server.url, ui_server.token)
    sid = api.import_sessions([{"task": "be listed in pages", "messages": [
        {"role": "assistant", "name": "Lister", "content": "listed"}]}])[0]
    queued = [api.enqueue_job(sid, reason=f"pages {i}", kind="replay")["job_id"] for i in range(205)]
    row = re.compile(r'<tr data-job-id="([^"]+)"')

    first = client.get(f"/jobs?session_id={quote(sid)}")
    assert first.status_code == 200 and row.findall(first.text) == queued[::-1][:200]
    assert "1–200 of 205" in first.text and 'id="previous-page"' not in first.text
    older = re.search(r'<a href="([^"]+)" rel="next" id="next-page">older', first.text).group(1)
    second = client.get(older.replace("&amp;", "&"))
    assert row.findall(second.text) == queued[::-1][200:] and 'id="next-page"' not in second.text
    assert "201–205 of 205" in second.text and 'id="previous-page"' in second.text
    diagnosis = client.get(f"/diagnosis?id={quote(sid)}").text
    assert len(row.findall(diagnosis)) == 200 and "the 200 newest of 205" in diagnosis

    for i in range(3):
        api.add_feedback(sid, -1.0, f"listed {i}")
    alerts = client.get(f"/alerts?session_id={quote(sid)}").text
    assert [c for c in re.findall(r"listed (\d)", alerts)] == ["2", "1", "0"] and "1–3 of 3" in alerts


def test_diagnosis_page_queues_a_replay_and_shows_a_stored_replay_beside_the_original(ui_server, client):
    sid = ui_server.hostile
    page = client.get(f"/diagnosis?id={quote(sid)}").text
    assert 'id="report-link"' in page and "Hypotheses" in page and 'id="no-replay"' in page
    r = client.post("/diagnosis/start", data={"csrf": csrf_of(page), "id": sid, "kind": "replay", "step": "1",
                                              "edit": "refund order 42, not 24"})
    assert r.status_code == 303
    jobs = client.get(f"/api/v1/jobs?session_id={quote(sid)}&kind=replay").json()["jobs"]
    assert jobs[-1]["options"] == {"steps": [1], "edit": "refund order 42, not 24"} and jobs[-1]["reason"] == "ui"
    # a replay result as the replay worker stores it (contracts §5), its child a real stored session
    result = {"session_id": sid, "created_at": "2026-11-23T00:00:00Z", "rounds": 1, "stages": {"judging": "heuristic"},
              "hypotheses": [{"id": "h-1", "step": 1, "agent": "Refunder", "reason": "wrong order number",
                              "intervention": {"id": "iv-1", "step": 1, "kind": "add_message", "text": "use order 42",
                                               "before": "Calling refund(order=24)"},
                              "runs": [{"child_session_id": ui_server.calm, "success": True, "progress": 1.0}],
                              "verdict": "validated", "verdict_reason": "1/1 replays succeeded"}]}
    stored = httpx.post(f"{ui_server.url}/api/v1/sessions/{quote(sid, safe='')}/replay", json=result,
                        headers={"authorization": f"Bearer {ui_server.token}"})
    assert stored.status_code == 201
    html = client.get(f"/diagnosis?id={quote(sid)}").text
    assert "verdict-validated" in html and "use order 42" in html
    columns = html[html.index('class="side-by-side"'):]
    assert "original from step 1" in columns and "replay 1" in columns
    assert "revenue up 4%" in columns  # the child session's own steps, beside the original's



# replay results the API accepts (it checks their outline only) whose runs, hypotheses and
# interventions hold junk, beside one readable run: what the fuzz campaign stored
JUNK_REPLAYS = [{"hypotheses": [{"runs": ["str"]}]}, {"hypotheses": [{"runs": {"a": 1}}]},
                {"hypotheses": [{"step": "x", "intervention": "x", "verdict": ["x"],
                                 "runs": [{"child_session_id": 5}, 7, {"child_session_id": ["a"]}]}]}]


@pytest.mark.parametrize("junk", JUNK_REPLAYS)
def test_diagnosis_page_shows_a_stored_replay_with_junk_inside(ui_server, client, junk):
    bearer = {"authorization": f"Bearer {ui_server.token}"}
    imported = httpx.post(f"{ui_server.url}/api/v1/import", headers=bearer, json=[
        {"messages": [{"role": "user", "content": "junk replay task"}, {"role": "assistant", "content": "done"}]}])
    [sid] = imported.json()["session_ids"]
    readable = {"step": 1, "verdict": "refuted", "intervention": {"step": 1, "text": "the readable edit"},
                "runs": [{"child_session_id": ui_server.calm, "success": False}]}
    result = {**junk, "hypotheses": [*junk.get("hypotheses", []), readable]}
    stored = httpx.post(f"{ui_server.url}/api/v1/sessions/{quote(sid, safe='')}/replay", json=result, headers=bearer)
    assert stored.status_code == 201, stored.text
    r = client.get(f"/diagnosis?id={quote(sid)}")
    assert r.status_code == 200, r.text[:2000]
    assert "the readable edit" in r.text and "revenue up 4%" in r.text  # the readable run, beside its child


def test_an_unexpected_failure_is_the_uis_error_page(tmp_path):
    """A page whose handler fails for a reason of ours (here: the store closed under it) is
    the UI's error page with its headers, 500, not the server's bare text."""
    from starlette.testclient import TestClient

    from tracefix.collector.api import build_app
    from tracefix.collector.server import Collector, Config
    from tracefix.ui import with_ui

    collector = Collector(Config(db=str(tmp_path / "closed.duckdb")))
    app = with_ui(build_app(collector), collector)
    collector.decoder.close()
    collector.store.close()
    with TestClient(app, raise_server_exceptions=False) as browser:
        r = browser.get("/")
    assert r.status_code == 500 and r.headers["content-type"].startswith("text/html")
    assert 'id="problem"' in r.text and "internal error (ConnectionException)" in r.text
    assert "script-src 'self'" in r.headers["content-security-policy"]


def record_retried_lookup(tracer, session_id: str, said: bool = False) -> None:
    """An exported session in tracefix/GenAI conventions whose look-up times out (raised, or
    `said` as its text result) and works when the worker makes the same call again; its
    shipping call then fails for good."""
    calls = [("Kestrel", None, None, None), ("Wren", "look", {"ref": "box7a"}, TimeoutError("no answer within 30 s")),
             ("Wren", "look", {"ref": "box7a"}, None), ("Wren", "ship", {"ref": "box9c"}, LookupError("no box box9c")),
             ("Kestrel", None, None, None)]
    with tracer.start_as_current_span(f"session {session_id}", attributes={
            "tracefix.session.id": session_id, "tracefix.session.root": True}):
        for step, (agent, tool, arguments, error) in enumerate(calls):
            with tracer.start_as_current_span(f"invoke_agent {agent}", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
                    "tracefix.session.id": session_id}):
                call_id = f"call_{step}"
                out = ({"role": "assistant", "content": None, "tool_calls": [
                           {"id": call_id, "type": "function",
                            "function": {"name": tool, "arguments": json.dumps(arguments)}}]}
                       if tool else {"role": "assistant", "content": "Wren: look up box7a and ship it." if step == 0
                                     else "Answer: box7a could not be shipped."})
                with tracer.start_as_current_span("chat m", attributes={
                        "gen_ai.operation.name": "chat", "tracefix.step": step, "tracefix.session.id": session_id,
                        "gen_ai.input.messages": json.dumps([{"role": "user", "content": "Ship box7a."}]),
                        "gen_ai.output.messages": json.dumps([out])}):
                    pass
                if tool is None:
                    continue
                with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.id": call_id, "tracefix.step": step, "tracefix.session.id": session_id,
                        "gen_ai.tool.call.arguments": json.dumps(arguments)}) as span:
                    if error is not None and said and tool == "look":
                        span.set_attribute("gen_ai.tool.call.result", str(error))
                    elif error is not None:
                        span.record_exception(error)
                        span.set_status(2, str(error))
                    else:
                        span.set_attribute("gen_ai.tool.call.result", json.dumps({"ref": "box7a", "color": "red"}))


@pytest.mark.parametrize("said", [False, True], ids=["raised", "said-as-text"])
def test_an_error_the_run_got_past_is_drawn_apart_from_the_failures(ui_server, client, said):
    """Also where the tool answered its timeout as text: the store has no error there, and
    the page, its timeline and the report all show the analysis's reading of it."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    sid = f"s-retried-lookup-{'said' if said else 'raised'}"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
        endpoint=f"{ui_server.url}/v1/traces", headers={"authorization": f"Bearer {ui_server.token}"}, timeout=10)))
    record_retried_lookup(provider.get_tracer("test"), sid, said=said)
    provider.shutdown()
    # before an analysis the failed calls the store knows of are drawn as errors
    html = client.get(f"/session?id={sid}").text
    assert len(re.findall(r'<rect class="step kind-llm error tools', html)) == (1 if said else 2)
    assert "got-past" not in html
    tracefix("analyze", sid, "--server", ui_server.url, "--token", ui_server.token)
    html = client.get(f"/session?id={sid}&step=1").text
    got_past = re.search(r'<rect class="step kind-llm error got-past tools[^"]*"[^>]*data-step="(\d+)"><title>([^<]+)', html)
    mark = "failure read from its result" if said else "error"
    assert got_past.group(1) == "1" and f"{mark}, got past at step 2" in got_past.group(2)
    assert len(re.findall(r'<rect class="step kind-llm error tools', html)) == 1  # the shipping call still failed
    assert "The run got past this failure" in html[html.index('id="step-detail"'):]
    report = httpx.get(f"{ui_server.url}/api/v1/sessions/{sid}/report?format=md",
                       headers={"authorization": f"Bearer {ui_server.token}"}).text
    assert f'calls look({{"ref": "box7a"}}) — *{mark}, got past at step 2*' in report
    assert re.search(r'calls ship\(\{"ref": "box9c"\}\) — \*error[;*]', report)  # a failure still


def test_one_agents_speaker_labels_share_its_lane():
    """A message log decorates one agent's turns ("Orchestrator (thought)", "Orchestrator
    (-> WebSurfer)"): the timeline draws them in the agent's one lane, with a hand-off line
    only where another agent takes over, and keeps each step's own label in its title."""
    from tracefix.ui.timeline import layout

    labels = ["human", "Orchestrator (thought)", "Orchestrator (-> WebSurfer)", "WebSurfer", "Orchestrator (thought)"]
    tl = layout([{"index": i, "agent": label, "kind": "message"} for i, label in enumerate(labels)])
    assert [name for name, _ in tl.lanes] == ["human", "Orchestrator", "WebSurfer"]
    assert len({tl.boxes[k].y for k in (1, 2, 4)}) == 1 and tl.boxes[3].y != tl.boxes[1].y
    assert len(tl.handoffs) == 3  # human -> Orchestrator -> WebSurfer -> Orchestrator
    assert tl.handoffs_svg().count('<line class="handoff" x1=') == 3  # as the page draws them
    assert "Orchestrator (-> WebSurfer)" in tl.boxes[2].title
