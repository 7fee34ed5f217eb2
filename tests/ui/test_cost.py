"""What LLM calls cost, end to end: spans with known models and token usage (gpt-4o-mini,
claude-3-5-sonnet) and a model no price table knows, sent by the OpenTelemetry SDK to a real
`tracefix serve`; their cost read back from the API (list, document, per agent and model), the
web UI's session list (sorted by cost) and session page, and `tracefix sessions`.

The expected costs are the providers' published per-million-token prices, written here by
hand (genai-prices' table says the same: gpt-4o-mini $0.15 input, $0.075 cached input, $0.60
output; claude-3-5-sonnet $3 input, $15 output), never computed by the code under test."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import procs
import pytest
from ui_client import signed_in

sys.path.insert(0, str(Path(__file__).parent.parent / "collector"))
from collector_support import tracer_provider  # noqa: E402

TOKEN = "cost-test-token"
DASH = "\u2014"

# gpt-4o-mini: 12,000 input tokens of which 2,000 cached, 3,000 output of which 500 reasoning
# (reasoning tokens are output tokens, priced as output: not counted twice)
MINI = (10_000 * 0.15 + 2_000 * 0.075 + 3_000 * 0.60) / 1e6  # $0.00345
SONNET = (1_000 * 3.0 + 200 * 15.0) / 1e6  # $0.006


def chat_span(tracer, sid: str, step: int, agent: str, model: str, provider: str, usage: dict) -> None:
    with tracer.start_as_current_span(f"chat {model}", attributes={
            "tracefix.session.id": sid, "tracefix.step": step, "gen_ai.operation.name": "chat",
            "gen_ai.agent.name": agent, "gen_ai.request.model": model, "gen_ai.provider.name": provider,
            **usage}):
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A collector holding three sessions: one gpt-4o-mini call; a claude call and a call to an
    unknown model; a call to the unknown model alone."""
    folder = tmp_path_factory.mktemp("cost")
    serve = procs.start_serve(folder / "store.duckdb", "--token", TOKEN)
    run = uuid.uuid4().hex[:8]
    ids = {name: f"cost-{run}-{name}" for name in ("mini", "mixed", "unknown")}
    provider = tracer_provider(serve, token=TOKEN)
    tracer = provider.get_tracer("cost-test")
    chat_span(tracer, ids["mini"], 0, "clerk", "gpt-4o-mini", "openai", {
        "gen_ai.usage.input_tokens": 12_000, "gen_ai.usage.output_tokens": 3_000,
        "gen_ai.usage.cache_read.input_tokens": 2_000, "gen_ai.usage.reasoning.output_tokens": 500})
    chat_span(tracer, ids["mixed"], 0, "planner", "claude-3-5-sonnet", "anthropic", {
        "gen_ai.usage.input_tokens": 1_000, "gen_ai.usage.output_tokens": 200})
    chat_span(tracer, ids["mixed"], 1, "clerk", "scripted-bank-model", "openai", {
        "gen_ai.usage.input_tokens": 500, "gen_ai.usage.output_tokens": 50})
    chat_span(tracer, ids["unknown"], 0, "clerk", "scripted-bank-model", "openai", {
        "gen_ai.usage.input_tokens": 9_000_000, "gen_ai.usage.output_tokens": 9_000_000})
    provider.force_flush()
    provider.shutdown()
    client = signed_in(serve.match["http"], TOKEN)
    procs.wait_for(lambda: all(client.get(f"/api/v1/sessions/{sid}").status_code == 200 for sid in ids.values())
                   and len(client.get(f"/api/v1/sessions/{ids['mixed']}").json()["steps"]) == 2,
                   "the sessions stored")
    yield serve, client, ids, run
    client.close()
    serve.stop()


def test_the_api_prices_each_call_and_adds_them_up(served):
    _, client, ids, run = served
    listed = {s["session_id"]: s for s in client.get("/api/v1/sessions", params={"limit": 500}).json()["sessions"]
              if s["session_id"].startswith(f"cost-{run}")}
    assert listed[ids["mini"]]["cost_usd"] == pytest.approx(MINI, rel=1e-9)
    assert listed[ids["mixed"]]["cost_usd"] == pytest.approx(SONNET, rel=1e-9)  # the unknown call adds nothing
    assert listed[ids["unknown"]]["cost_usd"] is None  # unknown, not free

    doc = client.get(f"/api/v1/sessions/{ids['mixed']}").json()
    assert [s["cost_usd"] for s in doc["steps"]] == [pytest.approx(SONNET, rel=1e-9), None]
    assert doc["cost_usd"] == pytest.approx(SONNET, rel=1e-9)
    assert doc["cost_by_agent"] == {"planner": pytest.approx(SONNET, rel=1e-9), "clerk": None}
    assert doc["cost_by_model"] == {"claude-3-5-sonnet": pytest.approx(SONNET, rel=1e-9),
                                    "scripted-bank-model": None}
    unknown = client.get(f"/api/v1/sessions/{ids['unknown']}").json()
    assert unknown["cost_usd"] is None and unknown["steps"][0]["cost_usd"] is None
    assert unknown["cost_by_model"] == {"scripted-bank-model": None}


def test_the_session_list_sorts_by_cost_and_shows_a_dash_for_unknown(served):
    _, client, ids, run = served
    order = {}
    for direction in ("desc", "asc"):
        html = client.get("/", params={"q": f"cost-{run}", "sort": "cost", "dir": direction}).text
        order[direction] = [name for name in re.findall(rf"cost-{run}-(\w+)", html) if name in ids]
        order[direction] = list(dict.fromkeys(order[direction]))
        rows = re.findall(r'<td class="num cost">([^<]*)</td>', html)
        assert sorted(rows) == sorted(["$0.00345", "$0.00600", DASH]), rows
    assert order["desc"] == ["mixed", "mini", "unknown"]
    assert order["asc"] == ["mini", "mixed", "unknown"]  # unknown last either way: never priced as 0


def test_the_session_page_shows_the_cost_per_step_agent_and_model(served):
    _, client, ids, _ = served
    html = client.get("/session", params={"id": ids["mixed"]}).text
    facts = re.search(r'<dd id="cost">(.*?)</dd>', html, re.S).group(1)
    assert facts.startswith("$0.00600")
    assert "planner $0.00600" in facts and f"clerk {DASH}" in facts
    assert "claude-3-5-sonnet $0.00600" in facts and f"scripted-bank-model {DASH}" in facts
    assert re.findall(r'<td class="num cost">([^<]*)</td>', html) == ["$0.00600", DASH]


def test_tracefix_sessions_prints_the_cost(served):
    serve, _, ids, run = served
    env = {**os.environ, "TRACEFIX_TOKEN": TOKEN}
    out = subprocess.run([sys.executable, "-m", "tracefix.cli", "sessions", "--server", serve.match["http"],
                          "--limit", "500"], capture_output=True, text=True, timeout=120, env=env, check=True).stdout
    lines = {sid: next(line for line in out.splitlines() if line.startswith(sid)) for sid in ids.values()}
    assert "COST" in out.splitlines()[0]
    assert " $0.00345 " in lines[ids["mini"]] and " $0.00600 " in lines[ids["mixed"]]
    assert f" {DASH} " in lines[ids["unknown"]] and "$0.00 " not in lines[ids["unknown"]]
    listed = json.loads(subprocess.run(
        [sys.executable, "-m", "tracefix.cli", "sessions", "--server", serve.match["http"], "--json", "--limit", "500"],
        capture_output=True, text=True, timeout=120, env=env, check=True).stdout)
    assert next(s for s in listed if s["session_id"] == ids["unknown"])["cost_usd"] is None
