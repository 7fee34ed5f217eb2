"""Exporters no one here wrote: the OpenTelemetry JS SDK 2.x on Node.js sends a burst of 20,000
GenAI spans through each of its three OTLP trace exporters (gRPC, HTTP/protobuf, HTTP/JSON) to
`tracefix serve --max-queue-spans 2000`, every batch at once (`concurrencyLimit` 1000, so the
exporter's own limit drops nothing). The JS gRPC exporter never retries: whatever the writer's
queue cannot take must go to the spool, or be lost. (How much of a burst needs the spool depends
on how fast this machine decodes and writes; test_spool.py makes every export spill.) Pass:
every span stored, the sessions grouped, the GenAI attributes intact.

Marked `js`; tests/node_packages.py installs the pinned packages (tests/js/) into a cache, and
the tests skip, saying why, where Node.js or npm is missing. (TLS: test_tls.py.)
"""
from __future__ import annotations

import json
import uuid

import pytest
from test_spool import wait_drained

import procs
from node_packages import node_modules, run_burst

from tracefix.collector.access import HttpAccess

pytestmark = pytest.mark.js

SPANS = 20_000
SESSIONS = 5


@pytest.fixture(scope="module")
def modules():
    return node_modules()


@pytest.fixture(scope="module")
def serve(tmp_path_factory, modules):  # `modules` first: no collector starts where the tests skip
    p = procs.start_serve(tmp_path_factory.mktemp("js") / "js.duckdb", "--diagnose", "off",
                          "--max-queue-spans", "2000", env={"TRACEFIX_TOKEN": ""})
    yield p
    p.stop()


def endpoint(serve, protocol: str) -> str:
    scheme = "https" if serve.match["http"].startswith("https") else "http"
    return f"{scheme}://{serve.match['grpc']}" if protocol == "grpc" else serve.match["http"] + "/v1/traces"


def assert_stored_whole(api: HttpAccess, protocol: str, run: str, spans: int, sessions: int) -> None:
    """Every span of the burst stored once, in its sessions, with its GenAI attributes."""
    found = {s["session_id"]: s for s in api.list_sessions(service=f"js-burst-{protocol}", limit=1000)
             if s["session_id"].startswith(run)}
    assert sorted(found) == sorted(f"{run}-s{i}" for i in range(sessions))
    assert sum(s["spans"] for s in found.values()) == spans
    for s in found.values():
        assert s["models"] == ["js-model-1"] and s["agents"] == ["js-agent"] and s["errors"] == 0
    # a page of one session's spans (reading all 4,000 with their messages would take longer
    # than the burst): attributes as sent, messages content-addressed
    page = api._request("GET", f"/api/v1/sessions/{run}-s1/spans", query={"limit": 200})["spans"]
    chats = [s for s in page if s["name"] == "chat js-model-1"]
    assert len(chats) >= 199
    for span in chats:
        attributes = span["attributes"]
        assert attributes["gen_ai.operation.name"] == "chat" and attributes["gen_ai.request.model"] == "js-model-1"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert isinstance(attributes["gen_ai.usage.input_tokens"], int) and attributes["gen_ai.usage.input_tokens"] >= 10
        assert span["message_keys"]
    session = api.session_page(f"{run}-s1", limit=50)
    assert len(session["steps"]) == 50
    for step in session["steps"]:
        assert step["model"] == "js-model-1" and step["input_tokens"] >= 10 and step["output_tokens"] >= 3
        assert step["input_message_keys"] and all(k in session["messages"] for k in step["input_message_keys"])
        assert step["output_message"]["role"] == "assistant" and "answer " in json.dumps(step["output_message"])
    assert "question " in json.dumps(session["messages"])  # the inputs' previews


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf", "http/json"])
def test_a_burst_of_20000_genai_spans_from_the_js_exporter_is_stored_whole(serve, modules, protocol):
    run = f"js-{protocol.replace('/', '-')}-{uuid.uuid4().hex[:6]}"
    summary = run_burst(modules, protocol, endpoint(serve, protocol), spans=SPANS, sessions=SESSIONS, run=run)
    assert (summary["created"], summary["exported"], summary["failed"], summary["errors"]) == (SPANS, SPANS, 0, {})
    wait_drained(serve)
    assert_stored_whole(HttpAccess(serve.match["http"]), protocol, run, SPANS, SESSIONS)
