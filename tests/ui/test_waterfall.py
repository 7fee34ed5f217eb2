"""The session page's waterfall, the attributes table and the session list's sorting and
filtering (issue 40 §1) in a real browser: Playwright drives Debian's headless Chromium
against a real `tracefix serve` fed by the OpenTelemetry SDK over OTLP/HTTP.

One session has spans at known times (a root; two agents, each with an LLM call and a tool
call; the second tool fails), so the bars' places, nesting and colours are checked against
what was sent; a long one (1,000 steps, 3,001 spans) checks that only the rows in view are
drawn. Three small sessions differ in task, agents, model and cost for the session list.
Screenshots go where the other UI tests keep theirs (TRACEFIX_TEST_ARTIFACTS, else
.tracefix/test-artifacts/ui); docs/images/ui-waterfall.png is a copy of waterfall.png."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import procs
import pytest
from browser import CHROMIUM, watched
from ui_client import signed_in

sys.path.insert(0, str(Path(__file__).parent.parent / "collector"))
from collector_support import tracer_provider  # noqa: E402

sync_api = pytest.importorskip("playwright.sync_api", reason="the browser test needs the `playwright` package "
                                                             "(in the dev extra)")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (`make chromium` installs it)")

ARTIFACTS = Path(os.environ.get("TRACEFIX_TEST_ARTIFACTS") or Path(__file__).parents[2] / ".tracefix" / "test-artifacts")
TOKEN = "waterfall-test-token"
MS = 1_000_000
ORDER = {"order": {"id": 42, "items": ["lamp", "desk"]}, "note": "two \"quoted\" words"}
LONG_STEPS = 1000

# name, kind (gen_ai.operation.name), parent name, start ms, end ms: the known session
SPANS = [("session refund_order", None, None, 0, 2000),
         ("invoke_agent Planner", "invoke_agent", "session refund_order", 10, 900),
         ("chat gpt-4o-mini", "chat", "invoke_agent Planner", 20, 600),
         ("execute_tool lookup_order", "execute_tool", "invoke_agent Planner", 610, 880),
         ("invoke_agent Clerk", "invoke_agent", "session refund_order", 1000, 1900),
         ("chat claude-3-5-sonnet", "chat", "invoke_agent Clerk", 1010, 1500),
         ("execute_tool refund", "execute_tool", "invoke_agent Clerk", 1510, 1890)]


def known_session(tracer, sid: str, t0: int) -> None:
    from opentelemetry import trace

    opened = {}
    for name, op, parent, start, end in SPANS:
        attrs = {"tracefix.session.id": sid}
        if op is None:
            attrs.update({"tracefix.session.root": True, "tracefix.inputs": json.dumps({"task": "Refund order 42"})})
        else:
            attrs["gen_ai.operation.name"] = op
            agent = "Planner" if start < 1000 else "Clerk"
            attrs["gen_ai.agent.name"] = agent
            attrs["tracefix.step"] = 0 if agent == "Planner" else 1
        if op == "chat":
            model = name.split(" ", 1)[1]
            attrs.update({"gen_ai.request.model": model, "gen_ai.provider.name": "openai",
                          "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20,
                          "gen_ai.input.messages": json.dumps([{"role": "user", "content": f"{model}: refund order 42"}]),
                          "gen_ai.output.messages": json.dumps([{"role": "assistant",
                                                                 "content": f"{model} says: looking it up"}])})
        if op == "execute_tool":
            tool = name.split(" ", 1)[1]
            attrs.update({"gen_ai.tool.name": tool, "gen_ai.tool.call.id": f"call_{tool}",
                          "gen_ai.tool.call.arguments": json.dumps({"order_id": 42, "tool": tool}),
                          "app.order": json.dumps(ORDER)})
            if tool == "lookup_order":
                attrs["gen_ai.tool.call.result"] = json.dumps({"status": "delivered"})
        context = trace.set_span_in_context(opened[parent]) if parent else None
        span = tracer.start_span(name, context=context, attributes=attrs, start_time=t0 + start * MS)
        if name == "execute_tool refund":
            span.set_status(trace.Status(trace.StatusCode.ERROR, "refund refused: order is a gift"))
        opened[name] = span
    for name, _, _, _, end in reversed(SPANS):
        opened[name].end(end_time=t0 + end * MS)


def small_session(tracer, sid: str, task: str, calls: list[tuple[str, str, int]], t0: int) -> None:
    from opentelemetry import trace

    root = tracer.start_span(f"session {sid}", start_time=t0, attributes={
        "tracefix.session.id": sid, "tracefix.session.root": True, "tracefix.inputs": json.dumps({"task": task})})
    for step, (agent, model, tokens) in enumerate(calls):
        span = tracer.start_span(f"chat {model}", context=trace.set_span_in_context(root), start_time=t0 + step * MS,
                                 attributes={"tracefix.session.id": sid, "tracefix.step": step,
                                             "gen_ai.operation.name": "chat", "gen_ai.agent.name": agent,
                                             "gen_ai.request.model": model, "gen_ai.provider.name": "openai",
                                             "gen_ai.usage.input_tokens": tokens, "gen_ai.usage.output_tokens": 0})
        span.end(end_time=t0 + step * MS + MS // 2)
    root.end(end_time=t0 + 10 * MS)


def long_session(provider, tracer, sid: str, t0: int) -> None:
    from opentelemetry import trace

    root = tracer.start_span("session long", start_time=t0, attributes={"tracefix.session.id": sid,
                                                                        "tracefix.session.root": True})
    for step in range(LONG_STEPS):
        at = t0 + step * 10 * MS
        agent = tracer.start_span("invoke_agent Worker", context=trace.set_span_in_context(root), start_time=at,
                                  attributes={"tracefix.session.id": sid, "gen_ai.operation.name": "invoke_agent",
                                              "gen_ai.agent.name": "Worker", "tracefix.step": step})
        inside = trace.set_span_in_context(agent)
        tracer.start_span(f"chat step {step}", context=inside, start_time=at + MS, attributes={
            "tracefix.session.id": sid, "gen_ai.operation.name": "chat", "tracefix.step": step,
            "gen_ai.request.model": "scripted-bank-model"}).end(end_time=at + 5 * MS)
        tracer.start_span(f"execute_tool step {step}", context=inside, start_time=at + 6 * MS, attributes={
            "tracefix.session.id": sid, "gen_ai.operation.name": "execute_tool", "tracefix.step": step,
            "gen_ai.tool.name": "noop"}).end(end_time=at + 8 * MS)
        agent.end(end_time=at + 9 * MS)
        if step % 300 == 299:
            provider.force_flush()
    root.end(end_time=t0 + LONG_STEPS * 10 * MS)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import time

    serve = procs.start_serve(tmp_path_factory.mktemp("waterfall") / "store.duckdb", "--diagnose", "off",
                              "--token", TOKEN)
    run = uuid.uuid4().hex[:6]
    ids = {name: f"wf-{run}-{name}" for name in ("known", "long", "alpha", "bravo", "charlie")}
    provider = tracer_provider(serve, token=TOKEN)
    tracer = provider.get_tracer("waterfall-test")
    t0 = time.time_ns() - 3600 * 1000 * MS
    known_session(tracer, ids["known"], t0)
    # task, agents, model, cost: each column orders the three differently
    small_session(tracer, ids["alpha"], "Zebra: water the plants", [("Gardener", "gpt-4o-mini", 1000)], t0 + 1 * MS)
    small_session(tracer, ids["bravo"], "audit the ledger", [("Auditor", "claude-3-5-sonnet", 1000),
                                                             ("Clerk", "gpt-4o-mini", 10)], t0 + 2 * MS)
    small_session(tracer, ids["charlie"], "Move the boxes", [("Mover", "scripted-bank-model", 5)], t0 + 3 * MS)
    long_session(provider, tracer, ids["long"], t0 + 4 * MS)
    provider.force_flush()
    provider.shutdown()
    client = signed_in(serve.match["http"], TOKEN)
    spans_of = lambda sid: client.get(f"/session/waterfall?id={sid}&limit=1").json()["page"]["total"]  # noqa: E731
    procs.wait_for(lambda: all(client.get(f"/api/v1/sessions/{sid}").status_code == 200 for sid in ids.values())
                   and spans_of(ids["known"]) == len(SPANS) and spans_of(ids["long"]) == 3 * LONG_STEPS + 1,
                   "the sessions stored", timeout=60)
    yield serve, client, ids, run
    client.close()
    serve.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture()
def page(served, browser):
    """A signed-in page of its own (a context per test, one browser per module)."""
    _, client, _, _ = served
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        context.add_cookies([{"name": c.name, "value": c.value, "url": str(client.base_url)}
                             for c in client.cookies.jar])
        yield watched(context.new_page())
    finally:
        context.close()


def loaded(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#waterfall[data-loaded=all]", state="attached")  # CSP: no string evaluated


def box(page, name: str) -> dict:
    row = page.locator(".wf-row", has=page.locator(".wf-name", has_text=name))
    return {"row": row, "bar": row.locator(".wf-bar").bounding_box(), "depth": int(row.get_attribute("data-depth")),
            "index": int(row.get_attribute("data-row")), "kind": row.get_attribute("data-kind")}


def axis(page) -> tuple[float, float]:
    return float(page.get_attribute("#wf-axis", "data-t0")), float(page.get_attribute("#wf-axis", "data-t1"))


def test_the_waterfall_draws_nested_bars_on_a_time_axis_zooms_and_shows_a_span(served, page):
    serve, _, ids, _ = served
    shots = ARTIFACTS / "ui"
    shots.mkdir(parents=True, exist_ok=True)
    loaded(page, f"{serve.match['http']}/session?id={ids['known']}")
    expect = sync_api.expect
    expect(page.locator(".wf-bar")).to_have_count(len(SPANS))
    bars = {name: box(page, name) for name, *_ in SPANS}

    # nested by parent: each span right after its parent's subtree starts, one level deeper, inside its time
    for name, op, parent, start, end in SPANS:
        b = bars[name]
        assert b["kind"] == {None: "session", "invoke_agent": "agent", "chat": "llm", "execute_tool": "tool"}[op]
        if parent is None:
            assert b["depth"] == 0 and b["index"] == 0
            continue
        p = bars[parent]
        assert b["depth"] == p["depth"] + 1 and b["index"] > p["index"]
        assert p["bar"]["x"] - 1 <= b["bar"]["x"] and b["bar"]["x"] + b["bar"]["width"] <= p["bar"]["x"] + p["bar"]["width"] + 1
    # a real time axis: widths in proportion to the durations sent (2000 ms root, 580 ms chat, 270 ms tool)
    root = bars["session refund_order"]["bar"]["width"]
    for name, _, _, start, end in SPANS[1:]:
        assert bars[name]["bar"]["width"] == pytest.approx(root * (end - start) / 2000, abs=2), name
        assert bars[name]["bar"]["x"] - bars["session refund_order"]["bar"]["x"] == pytest.approx(root * start / 2000,
                                                                                                  abs=2), name
    # one colour per kind; the failed tool is marked
    colour = lambda name: bars[name]["row"].locator(".wf-bar").evaluate("e => getComputedStyle(e).backgroundColor")  # noqa: E731
    kinds = {k: colour(n) for k, n in (("agent", "invoke_agent Planner"), ("llm", "chat gpt-4o-mini"),
                                       ("tool", "execute_tool lookup_order"), ("session", "session refund_order"))}
    assert len(set(kinds.values())) == 4, kinds
    assert colour("invoke_agent Clerk") == kinds["agent"] and colour("chat claude-3-5-sonnet") == kinds["llm"]
    assert "failed" in bars["execute_tool refund"]["row"].locator(".wf-bar").get_attribute("class")
    assert "failed" not in bars["execute_tool lookup_order"]["row"].locator(".wf-bar").get_attribute("class")

    # zoom changes the axis: buttons, the keyboard, Ctrl + wheel; fit goes back
    full = axis(page)
    assert full == (0.0, pytest.approx(2000.0, abs=0.01))
    ticks = page.inner_text("#wf-axis")
    page.click("#wf-zoom-in")
    zoomed = axis(page)
    assert zoomed[1] - zoomed[0] < 0.7 * (full[1] - full[0]) and page.inner_text("#wf-axis") != ticks
    inside = bars["chat claude-3-5-sonnet"]  # 1010-1500 ms: in view after zooming in around the middle
    assert inside["row"].locator(".wf-bar").bounding_box()["width"] > 1.4 * inside["bar"]["width"]
    page.focus("#wf-body")
    page.keyboard.press("+")
    assert axis(page)[1] - axis(page)[0] < zoomed[1] - zoomed[0]
    page.keyboard.press("0")
    assert axis(page) == full
    page.hover("#wf-body")
    page.keyboard.down("Control")
    page.mouse.wheel(0, -200)
    page.keyboard.up("Control")
    assert axis(page)[1] - axis(page)[0] < full[1] - full[0]
    page.click("#wf-fit")
    assert axis(page) == full

    # selecting a bar shows its input, output and attributes beside it
    bars["chat gpt-4o-mini"]["row"].click()
    expect(page.locator("#span-panel h3")).to_contain_text("chat gpt-4o-mini")
    expect(page.locator("#span-input")).to_contain_text("gpt-4o-mini: refund order 42")
    expect(page.locator("#span-output")).to_contain_text("gpt-4o-mini says: looking it up")
    bars["execute_tool lookup_order"]["row"].click()
    expect(page.locator("#span-panel h3")).to_contain_text("execute_tool lookup_order")
    expect(page.locator("#span-input")).to_contain_text('"order_id": 42')
    expect(page.locator("#span-output")).to_contain_text('"status": "delivered"')
    attributes = attribute_table(page, "#span-attributes")
    assert attributes["gen_ai.tool.name"] == "lookup_order"
    assert json.loads(attributes["app.order"]) == ORDER and "\n" in attributes["app.order"]  # indented JSON
    assert '\\"order\\"' not in attributes["app.order"]  # not an escaped JSON string
    page.keyboard.press("ArrowDown")  # the keyboard moves the selection: the next span, the failed tool's agent
    expect(page.locator("#span-panel h3")).to_contain_text("invoke_agent Clerk")
    assert "span=" in page.url  # the address names the selected span: reloading it shows the same panel
    page.reload()
    page.wait_for_selector("#waterfall[data-loaded=all]", state="attached")  # CSP: no string evaluated
    expect(page.locator("#span-panel h3")).to_contain_text("invoke_agent Clerk")
    expect(page.locator(".wf-row.selected .wf-name")).to_have_text("invoke_agent Clerk")
    bars["execute_tool refund"]["row"].click()
    expect(page.locator("#span-panel .problem")).to_contain_text("refund refused: order is a gift")
    page.locator("#waterfall").screenshot(path=str(shots / "waterfall.png"))
    assert page.problems == []


def attribute_table(page, selector: str) -> dict[str, str]:
    return dict(page.eval_on_selector_all(f"{selector} tr", "rows => rows.map(r => "
                                          "[r.querySelector('th').textContent, r.querySelector('td').textContent])"))


def test_a_long_session_draws_only_the_rows_in_view(served, page):
    serve, client, ids, _ = served
    loaded(page, f"{serve.match['http']}/session?id={ids['long']}")
    total = 3 * LONG_STEPS + 1
    sync_api.expect(page.locator("#wf-status")).to_contain_text(f"{total} spans")
    drawn = page.locator(".wf-row").count()
    assert 10 < drawn < 100, drawn  # the visible rows and a few more, of 3,001
    page.focus("#wf-body")
    page.keyboard.press("End")  # the last span, scrolled into view and shown
    sync_api.expect(page.locator("#span-panel h3")).to_contain_text(f"execute_tool step {LONG_STEPS - 1}")
    assert page.locator(".wf-row").count() < 100
    # the rows come in pages: every page of the server's answer is under the page's size
    first = client.get(f"/session/waterfall?id={ids['long']}&limit=2000").json()
    assert first["page"] == {"offset": 0, "limit": 2000, "returned": 2000, "total": total, "next_offset": 2000}
    last = client.get(f"/session/waterfall?id={ids['long']}&limit=2000&offset=2000").json()
    assert last["page"]["returned"] == 1001 and last["page"]["next_offset"] is None
    assert [r[first["columns"].index("depth")] for r in first["rows"][:5]] == [0, 1, 2, 2, 1]
    assert page.problems == []


def test_the_span_tree_shows_attributes_as_a_key_value_table(served, page):
    serve, _, ids, _ = served
    page.goto(f"{serve.match['http']}/session/spans?id={ids['known']}")
    tool = page.locator("#span-tree details", has=page.locator("summary", has_text="execute_tool lookup_order"))
    tool.locator("summary").first.click()
    attributes = attribute_table(page, "#span-tree details[open] table.attributes")
    assert attributes["gen_ai.tool.call.id"] == "call_lookup_order"
    assert json.loads(attributes["app.order"]) == ORDER and '\\"order\\"' not in attributes["app.order"]
    assert json.loads(attributes["gen_ai.tool.call.arguments"]) == {"order_id": 42, "tool": "lookup_order"}
    assert page.problems == []


def test_the_session_list_sorts_and_filters_on_every_column(served, page):
    serve, client, ids, run = served
    base = serve.match["http"]
    page.goto(f"{base}/?q=wf-{run}-&replays=shown")
    names = lambda: [sid.rsplit("-", 1)[1] for sid in page.eval_on_selector_all(  # noqa: E731
        "#sessions a.sid", "links => links.map(a => new URL(a.href).searchParams.get('id'))")]
    small = lambda: [n for n in names() if n in ("alpha", "bravo", "charlie")]  # noqa: E731
    # each header sorts (first click: largest first), the second click the other way
    expected = {"task": ["alpha", "charlie", "bravo"],  # zebra, move, audit (any case)
                "agents": ["charlie", "alpha", "bravo"],  # Mover, Gardener, "Auditor, Clerk"
                "model": ["charlie", "alpha", "bravo"],  # scripted-…, gpt-4o-mini, "claude…, gpt…"
                "cost": ["bravo", "alpha", "charlie"]}  # $0.003, $0.00015, unknown (last either way)
    for column, order in expected.items():
        for direction in ("desc", "asc"):
            with page.expect_navigation(url=f"**sort={column}&dir={direction}**"):
                page.click(f"#sessions th a[href*='sort={column}&']")
            if direction == "desc":
                assert small() == order, column
        assert small() == (order[-2::-1] + order[-1:] if column == "cost" else order[::-1]), column
    page.screenshot(path=str(ARTIFACTS / "ui" / "sessions-sorted.png"), full_page=True)
    # filters: task words (not the output's), agent, model, cost bounds (unknown cost matches none)
    for fill, expected_names in [({"#filter-task": "LEDGER"}, ["bravo"]), ({"#filter-agent": "Clerk"}, ["bravo", "known"]),
                                 ({"#filter-model": "gpt-4o-mini"}, ["alpha", "bravo", "known"]),
                                 ({"#filter-min-cost": "0.001"}, ["bravo"]),
                                 ({"#filter-max-cost": "0.001"}, ["alpha", "known"])]:
        page.goto(f"{base}/?q=wf-{run}-&replays=shown&sort=task&dir=asc")
        for selector, value in fill.items():
            page.fill(selector, value)
        with page.expect_navigation():
            page.click("#filters button[type=submit]")
        assert sorted(names()) == expected_names, fill
    assert page.problems == []
    # the API and `tracefix sessions` take the same sorts and filters
    listed = client.get("/api/v1/sessions", params={"sort": "cost", "order": "asc", "model": "gpt-4o-mini"}).json()
    assert [s["session_id"].rsplit("-", 1)[1] for s in listed["sessions"]] == ["alpha", "known", "bravo"]
    for bad in ({"sort": "nope"}, {"order": "up"}, {"min_cost": "-1"}, {"max_cost": "cheap"}, {"diagnosis": "x"}):
        assert client.get("/api/v1/sessions", params=bad).status_code == 422, bad
    out = subprocess.run([sys.executable, "-m", "tracefix.cli", "sessions", "--server", base, "--sort", "task", "--asc",
                          "--task", "E", "--json"], capture_output=True, text=True, timeout=120, check=True,
                         env={**os.environ, "TRACEFIX_TOKEN": TOKEN}).stdout
    tasks = [s["task"] for s in json.loads(out) if s["session_id"].startswith(f"wf-{run}-")]
    assert tasks == ["audit the ledger", "Move the boxes", "Refund order 42", "Zebra: water the plants"]


def test_a_long_session_page_lists_a_page_of_steps_and_links_every_step(served, page):
    """The page around the waterfall: its step list a page at a time, its timeline a link to
    each of the 1,000 steps (the outline it draws them from is kept between views)."""
    import re

    from tracefix.ui.pages import STEPS_PER_PAGE

    serve, client, ids, _ = served
    html = client.get(f"/session?id={ids['long']}").text
    rows = re.search(r'<table class="steps" id="steps">(.*?)</table>', html, re.S).group(1)
    assert rows.count("<tr") == 1 + STEPS_PER_PAGE  # the header and one page of steps
    linked = [int(n) for n in re.findall(r'<a href="/session\?id=[^"]*&amp;step=(\d+)#step-detail"><rect ', html)]
    assert linked == list(range(LONG_STEPS))
    page.goto(f"{serve.match['http']}/session?id={ids['long']}")
    page.locator("#timeline rect[data-step='777']").click()
    sync_api.expect(page.locator("#step-detail h2")).to_contain_text("Step 777")
    sync_api.expect(page.locator("#steps tbody tr")).to_have_count(STEPS_PER_PAGE)
    sync_api.expect(page.locator("#steps tbody tr.selected .step-link")).to_have_text("777")
    assert page.problems == []
