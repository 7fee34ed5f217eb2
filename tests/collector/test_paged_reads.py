"""Bounded reads of a session through the API (docs/contracts.md §1b): pages of steps and
spans, long contents cut and marked, one step or one message in full, 422 on bad paging
values; and HttpAccess, which reads every page, answering exactly what the file answers."""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest
from collector_support import TOKEN
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_ingest import post

import procs
from tracefix import semconv as sc



def fetch(base: str, path: str, token: str | None = TOKEN, **query) -> tuple[int, bytes]:
    url = base + path + ("?" + urllib.parse.urlencode(query) if query else "")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def numbered_text(i: int, chars: int) -> str:
    """Text that says which message it is all along, so a wrong slice cannot pass for it."""
    unit = f"message {i} says "
    return (unit * (chars // len(unit) + 1))[:chars]


def import_conversation(api, contents: list[str]) -> str:
    sid = f"paged-{uuid.uuid4().hex[:8]}"
    api.import_sessions([{"session_id": sid, "task": "read me in pages",
                          "messages": [{"role": "assistant", "name": "Writer", "content": c} for c in contents]}])
    return sid


def test_a_page_holds_its_steps_with_long_contents_cut_and_each_in_full_on_its_own(collector, api):
    base = collector.match["http"]
    contents = [numbered_text(i, 300 * (i + 1)) for i in range(25)]
    sid = import_conversation(api, contents)

    status, body = fetch(base, f"/api/v1/sessions/{sid}", offset=5, limit=10, max_chars=1000)
    assert status == 200, body
    page = json.loads(body)
    assert [s["index"] for s in page["steps"]] == list(range(5, 15))
    assert page["page"] == {"offset": 5, "limit": 10, "returned": 10, "total": 25, "next_offset": 15,
                            "max_chars": 1000}
    assert page["task"] == "read me in pages" and page["agents"] == ["Writer"]
    for step in page["steps"]:
        original = contents[step["index"]]
        shown = step["output_message"]
        if len(original) <= 1000:
            assert shown["content"] == original and "truncated" not in shown
        else:
            assert shown["content"].startswith(original[:1000])
            assert shown["content"].endswith(f"…[{len(original) - 1000} more chars]")
            assert shown["truncated"] == len(original) - 1000
        # the whole message, by the key the page names
        status, body = fetch(base, f"/api/v1/sessions/{sid}/messages/{step['output_message_key']}")
        assert status == 200 and json.loads(body)["message"]["content"] == original
    status, body = fetch(base, f"/api/v1/sessions/{sid}/steps/24")
    assert status == 200 and json.loads(body)["step"]["output_message"]["content"] == contents[24]

    last = json.loads(fetch(base, f"/api/v1/sessions/{sid}", offset=20, limit=10)[1])
    assert [s["index"] for s in last["steps"]] == list(range(20, 25)) and last["page"]["next_offset"] is None


def test_a_page_stays_small_however_long_the_messages_and_access_still_reads_them_whole(collector, api):
    contents = [numbered_text(i, 300_000) for i in range(12)]  # 3.6 MB of content
    sid = import_conversation(api, contents)
    status, body = fetch(collector.match["http"], f"/api/v1/sessions/{sid}")
    assert status == 200
    assert len(body) < 100_000, len(body)
    assert len(json.loads(body)["steps"]) == 12
    doc = api.get_session(sid)
    assert [s["output_message"]["content"] for s in doc["steps"]] == contents


def read_pages(base: str, path: str, field: str, limit: int, **query) -> tuple[list[dict], list[dict]]:
    """Every item of a paged list read `limit` at a time, and each page's `page` object."""
    items, pages, offset = [], [], 0
    while offset is not None:
        status, body = fetch(base, path, offset=offset, limit=limit, **query)
        assert status == 200, body[:300]
        answer = json.loads(body)
        assert len(answer[field]) <= limit and answer["page"]["offset"] == offset
        items, pages = items + answer[field], pages + [answer["page"]]
        offset = answer["page"]["next_offset"]
    return items, pages


def test_training_sessions_come_in_pages_that_end_within_the_page_budget(collector, api):
    """Training documents are whole sessions: the route pages them like every read of
    contents (a fuzz-filled store answered all of them at once, and took over a minute), and
    a page ends after PAGE_BUDGET_CHARS of documents however high its limit; access reads
    every page."""
    from tracefix.collector.store import PAGE_BUDGET_CHARS

    big = [import_conversation(api, [numbered_text(i, 1_000_000)] * 3) for i in range(2)]  # 3 MB each
    mine = {*big, *(import_conversation(api, [f"small {i}"]) for i in range(5))}
    base = collector.match["http"]
    docs, pages = read_pages(base, "/api/v1/training_sessions", "sessions", 3, criterion="all")
    seen = [doc["session_id"] for doc in docs]
    assert len(seen) == len(set(seen)) == pages[-1]["total"] and mine <= set(seen) and len(pages) >= 3
    status, body = fetch(base, "/api/v1/training_sessions", criterion="all", limit=1000)
    first = json.loads(body)
    assert len(body) < PAGE_BUDGET_CHARS + 4_000_000 and first["page"]["next_offset"] is not None
    assert mine <= {doc["session_id"] for doc in api.training_sessions("all")}


def test_jobs_and_alerts_come_in_pages_oldest_or_newest_first(collector, api):
    """Jobs and alerts grow with every thumbs-down: both lists are paged like every read (they
    answered every row at once), oldest first or newest first, and a poll can ask for given jobs."""
    base = collector.match["http"]
    sid = import_conversation(api, ["one", "two"])
    queued = [api.enqueue_job(sid, reason=f"page test {i}", kind="replay")["job_id"] for i in range(7)]

    jobs, pages = read_pages(base, "/api/v1/jobs", "jobs", 3, session_id=sid, kind="replay")
    assert [j["job_id"] for j in jobs] == queued and [p["offset"] for p in pages] == [0, 3, 6]
    assert [p["returned"] for p in pages] == [3, 3, 1] and {p["total"] for p in pages} == {7}
    newest, _ = read_pages(base, "/api/v1/jobs", "jobs", 4, session_id=sid, kind="replay", order="newest")
    assert [j["job_id"] for j in newest] == queued[::-1]
    assert [j["job_id"] for j in api.list_jobs(session_id=sid, kind="replay")] == queued
    asked = "&".join(f"job_id={j}" for j in (queued[5], queued[1]))
    status, body = fetch(base, f"/api/v1/jobs?{asked}&limit=10")
    assert status == 200 and [j["job_id"] for j in json.loads(body)["jobs"]] == [queued[1], queued[5]]
    assert json.loads(body)["page"]["total"] == 2

    for i in range(5):  # each thumbs-down raises an alert (and queues a diagnosis)
        api.add_feedback(sid, -1.0, f"thumbs-down {i}")
    alerts, pages = read_pages(base, "/api/v1/alerts", "alerts", 2, session_id=sid)
    assert [a["payload"]["comment"] for a in alerts] == [f"thumbs-down {i}" for i in range(5)]
    assert [p["returned"] for p in pages] == [2, 2, 1] and pages[-1]["next_offset"] is None
    newest, _ = read_pages(base, "/api/v1/alerts", "alerts", 10, session_id=sid, order="newest")
    assert [a["alert_id"] for a in newest] == [a["alert_id"] for a in alerts][::-1]
    assert [a["alert_id"] for a in api.list_alerts(sid)] == [a["alert_id"] for a in alerts]


@pytest.mark.parametrize("path", ["/api/v1/jobs?state=exploded", "/api/v1/jobs?kind=audit",
                                  "/api/v1/jobs?order=sideways", "/api/v1/alerts?order=sideways",
                                  "/api/v1/jobs?" + "&".join(f"job_id=j{i}" for i in range(1001))])
def test_bad_job_and_alert_filters_get_422_naming_the_parameter(collector, path):
    status, body = fetch(collector.match["http"], path)
    assert status == 422, body[:300]
    assert json.loads(body)["parameter"] == path.split("?")[1].split("=")[0]


@pytest.mark.parametrize("query", [{"limit": 0}, {"limit": 1001}, {"limit": "ten"}, {"offset": -1},
                                   {"max_chars": 0}, {"content": "everything"}])
def test_bad_paging_values_get_422_naming_the_parameter(collector, api, query):
    sid = import_conversation(api, ["one", "two"])
    base = collector.match["http"]
    for path in ([f"/api/v1/sessions/{sid}"] if set(query) & {"max_chars", "content"} else
                 [f"/api/v1/sessions/{sid}", f"/api/v1/sessions/{sid}/spans", f"/api/v1/sessions/{sid}/messages",
                  "/api/v1/training_sessions", "/api/v1/jobs", "/api/v1/alerts"]):
        status, body = fetch(base, path, **query)
        assert status == 422, (path, query, body)
        assert next(iter(query)) in json.loads(body)["error"]


def test_unknown_keys_steps_and_sessions_are_4xx(collector, api):
    base = collector.match["http"]
    sid = import_conversation(api, ["one", "two"])
    other = import_conversation(api, ["a message of another session"])
    key_of_other = json.loads(fetch(base, f"/api/v1/sessions/{other}")[1])["steps"][0]["output_message_key"]
    assert fetch(base, f"/api/v1/sessions/{sid}/messages/not-a-key")[0] == 422
    assert fetch(base, f"/api/v1/sessions/{sid}/messages/{key_of_other}")[0] == 404  # keys do not cross sessions
    assert fetch(base, f"/api/v1/sessions/{sid}/steps/2")[0] == 404
    assert fetch(base, f"/api/v1/sessions/{sid}/steps/x")[0] == 422
    for path in ("", "/spans", "/messages", "/steps/0"):
        assert fetch(base, f"/api/v1/sessions/no-such-session{path}")[0] == 404


SYSTEM = {"role": "system", "content": "You are the bank's agent. " * 20}


def agent_session(session_id: str, steps: int) -> bytes:
    """An instrumented-looking session: a growing prompt, tool calls with results and
    snapshots, tool definitions on every call."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    prompt = [SYSTEM, {"role": "user", "content": "move money between the accounts"}]
    tools = json.dumps([{"type": "function", "function": {"name": "transfer", "parameters": {"type": "object"}}}])
    for i in range(steps):
        call = {"id": f"call_{i}", "type": "function",
                "function": {"name": "transfer", "arguments": json.dumps({"amount": i, "note": "x" * 120})}}
        output = {"role": "assistant", "content": f"step {i}: transferring", "tool_calls": [call]}
        with tracer.start_as_current_span(f"chat m{i}", attributes={
                "gen_ai.operation.name": "chat", sc.SESSION_ID: session_id, sc.STEP: i,
                sc.GEN_AI_TOOL_DEFINITIONS: tools,
                "gen_ai.input.messages": json.dumps(prompt), "gen_ai.output.messages": json.dumps([output])}) as span:
            span.add_event(sc.SNAPSHOT_EVENT, {sc.SNAPSHOT_KEY: "db", sc.STEP: i,
                                               sc.SNAPSHOT_STATE: json.dumps({"balance": 100 - i, "log": "y" * 200})})
        with tracer.start_as_current_span("execute_tool transfer", attributes={
                "gen_ai.operation.name": "execute_tool", sc.SESSION_ID: session_id, sc.STEP: i,
                sc.GEN_AI_TOOL_NAME: "transfer", sc.GEN_AI_TOOL_CALL_ID: f"call_{i}",
                sc.GEN_AI_TOOL_CALL_ARGUMENTS: call["function"]["arguments"],
                sc.GEN_AI_TOOL_CALL_RESULT: json.dumps({"ok": True, "receipt": "z" * 150})}):
            pass
        prompt = [*prompt, output, {"role": "tool", "tool_call_id": f"call_{i}", "content": "ok"}]
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


def test_http_access_reads_every_page_and_answers_what_the_file_answers(tmp_path):
    from tracefix.collector.access import HttpAccess, StoreAccess
    from tracefix.collector.store import Store

    db = tmp_path / "paged.duckdb"
    serve = procs.start_serve(db, "--diagnose", "off", env={"TRACEFIX_TOKEN": ""})
    try:
        base = serve.match["http"]
        assert post(base + "/v1/traces", agent_session("agent-1", 9), token=None)[0] == 200
        access = HttpAccess(base)
        # small pages and a small cut force every path: many pages, steps read again in full
        access.PAGE_STEPS, access.PAGE_ITEMS, access.FULL_CHARS = 2, 3, 100
        over_http = access.get_session("agent-1"), access.get_spans("agent-1")

        spans_page = json.loads(fetch(base, "/api/v1/sessions/agent-1/spans", token=None, limit=4)[1])
        assert len(spans_page["spans"]) == 4 and spans_page["page"]["next_offset"] == 4
        chat = next(s for s in spans_page["spans"] if s["kind"] == "llm")
        assert sc.GEN_AI_INPUT_MESSAGES not in chat["attributes"]  # named by key, not inlined
        assert chat["message_keys"][sc.GEN_AI_INPUT_MESSAGES]
    finally:
        serve.stop()
    with StoreAccess(Store(str(db)), owns_store=True) as from_file:
        doc, spans = from_file.get_session("agent-1"), from_file.get_spans("agent-1")
    assert len(doc["steps"]) == 9 and len(doc["steps"][8]["input_messages"]) == 2 + 2 * 8
    assert all(len(s["tool_calls"]) == 1 and s["snapshots"] for s in doc["steps"])
    assert over_http == (doc, spans)
