"""Export over real OTLP/HTTP to a local receiver: the banking app end to end, the standard
OTEL_EXPORTER_OTLP_* variables, zero-code instrumentation, and a collector that is down."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import tracefix
from tracefix import semconv as sc


def wait_for(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()


def test_banking_app_end_to_end_over_otlp_http(sim_url, otlp_receiver):
    from tracefix.demo.bank import run_task

    handle = tracefix.init(endpoint=otlp_receiver.endpoint, service_name="bank-demo", headers={"x-team": "qa"})
    try:
        output = run_task("t02", base_url=sim_url, seed=1)
        handle.force_flush()
    finally:
        handle.shutdown()
    roots = [s for s in otlp_receiver.spans if s["attributes"].get(sc.ENTRYPOINT) == "tracefix.demo.bank:run_task"
             and json.loads(s["attributes"][sc.FINAL_OUTPUT]) == output]
    assert len(roots) == 1
    root = roots[0]
    session_id = root["attributes"][sc.SESSION_ID]
    spans = otlp_receiver.session_spans(session_id)
    assert root["resource"]["service.name"] == "bank-demo"
    assert otlp_receiver.headers[-1].get("x-team") == "qa"
    assert root["attributes"][sc.OUTCOME] == "success" and root["attributes"][sc.REPLAYABLE] is True
    assert json.loads(root["attributes"][sc.INPUTS])["task_id"] == "t02"
    chats = [s for s in spans if s["attributes"].get(sc.GEN_AI_OPERATION_NAME) == "chat"]
    tools = [s for s in spans if s["attributes"].get(sc.GEN_AI_OPERATION_NAME) == "execute_tool"]
    agents = {s["attributes"][sc.GEN_AI_AGENT_NAME] for s in spans if s["name"].startswith("invoke_agent")}
    assert sorted(s["attributes"][sc.STEP] for s in chats) == list(range(output["llm_calls"]))
    assert {"Orchestrator", "AccountAgent"} <= agents
    assert all(c["attributes"][sc.GEN_AI_CONVERSATION_ID] == session_id for c in chats)
    assert all(sc.RESPONSE_RAW in c["attributes"] for c in chats)
    # every tool span is linked to the tool call of the LLM span of its own step
    calls_by_step = {c["attributes"][sc.STEP]: {p["id"] for m in json.loads(c["attributes"][sc.GEN_AI_OUTPUT_MESSAGES])
                                                 for p in m["parts"] if p["type"] == "tool_call"} for c in chats}
    assert tools and all(t["attributes"][sc.GEN_AI_TOOL_CALL_ID] in calls_by_step[t["attributes"][sc.STEP]]
                         for t in tools)
    snapshots = [e for s in chats for e in s["events"] if e["name"] == sc.SNAPSHOT_EVENT]
    assert snapshots and snapshots[0]["attributes"][sc.SNAPSHOT_KEY] == "db"
    # the scripted server's key never leaves the process, even inside request params
    assert "sim-key" not in json.dumps([s["attributes"] for s in spans])


def run_script(code: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=timeout)


def test_standard_otel_variables_choose_endpoint_and_headers(sim_url, otlp_receiver):
    code = f"""
        import openai, tracefix
        tracefix.init()
        with tracefix.session("env-config", session_id="s-env"):
            openai.OpenAI(base_url="{sim_url}", api_key="k", max_retries=0).chat.completions.create(
                model="bank-agent", messages=[{{"role": "user", "content": "hi"}}])
    """
    proc = run_script(code, {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.endpoint,
                             "OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=acme", "OTEL_SERVICE_NAME": "env-svc"})
    assert proc.returncode == 0, proc.stderr
    spans = otlp_receiver.session_spans("s-env")  # flushed by the exit hook
    assert {s["name"] for s in spans} == {"session env-config", "chat bank-agent"}
    assert spans[0]["resource"]["service.name"] == "env-svc"
    assert any(h.get("x-tenant") == "acme" for h in otlp_receiver.headers)


def test_init_headers_are_percent_decoded_as_the_otel_variable_is(sim_url, otlp_receiver):
    code = f"""
        import openai, tracefix
        tracefix.init(endpoint="{otlp_receiver.endpoint}", headers="Authorization=Bearer%20s3cret,x-tenant=a%2Cb")
        with tracefix.session("headers", session_id="s-headers"):
            openai.OpenAI(base_url="{sim_url}", api_key="k", max_retries=0).chat.completions.create(
                model="bank-agent", messages=[{{"role": "user", "content": "hi"}}])
    """
    proc = run_script(code, {})
    assert proc.returncode == 0, proc.stderr
    assert otlp_receiver.session_spans("s-headers")
    sent = [{k.lower(): v for k, v in h.items()} for h in otlp_receiver.headers]
    assert any(h.get("authorization") == "Bearer s3cret" and h.get("x-tenant") == "a,b" for h in sent), sent


def test_the_otel_genai_content_switch_turns_capture_off(sim_url, otlp_receiver):
    code = f"""
        import openai, tracefix
        tracefix.init(endpoint="{otlp_receiver.endpoint}")
        with tracefix.session("private", session_id="s-private", entrypoint="pkg.mod:fn", inputs={{}}):
            openai.OpenAI(base_url="{sim_url}", api_key="k", max_retries=0).chat.completions.create(
                model="bank-agent", messages=[{{"role": "user", "content": "my secret question"}}])
    """
    proc = run_script(code, {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false"})
    assert proc.returncode == 0, proc.stderr
    spans = otlp_receiver.session_spans("s-private")
    assert spans and "my secret question" not in json.dumps(spans)
    root = next(s for s in spans if s["name"] == "session private")
    assert root["attributes"][sc.REPLAYABLE] is False  # no content: nothing a replay could serve


def test_zero_code_opentelemetry_instrument_uses_the_entry_point(sim_url, otlp_receiver):
    script = f"""
        import openai
        openai.OpenAI(base_url="{sim_url}", api_key="k", max_retries=0).chat.completions.create(
            model="bank-agent", messages=[{{"role": "user", "content": "zero-code please"}}])
    """
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.endpoint, "OTEL_TRACES_EXPORTER": "otlp",
           "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none", "OTEL_SERVICE_NAME": "zero-code",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
           "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai,openai_v2,openai-v2,httpx,requests,urllib,urllib3"}
    bin_dir = os.path.dirname(sys.executable)
    proc = subprocess.run([os.path.join(bin_dir, "opentelemetry-instrument"), sys.executable, "-c",
                           textwrap.dedent(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    ours = wait_for(lambda: [s for s in otlp_receiver.spans if s["resource"].get("service.name") == "zero-code"
                             and s["scope"] == "tracefix"])
    assert len(ours) == 1 and ours[0]["name"] == "chat bank-agent"
    assert "zero-code please" in ours[0]["attributes"][sc.GEN_AI_INPUT_MESSAGES]


def test_collector_down_neither_breaks_nor_hangs_the_app_and_drops_are_counted(sim_url):
    code = f"""
        import time, openai, tracefix
        handle = tracefix.init(endpoint="http://127.0.0.1:9")
        client = openai.OpenAI(base_url="{sim_url}", api_key="k", max_retries=0)
        with tracefix.session("offline"):
            r = client.chat.completions.create(model="bank-agent", messages=[{{"role": "user", "content": "hi"}}])
        assert r.choices[0].message.content
        handle.shutdown()
        print("dropped", handle.stats()["dropped"])
    """
    # shutdown gives the exporter 1 s (a hang would trip the subprocess timeout); spans
    # still in its retry loop are dropped, and said so
    proc = run_script(code, {"TRACEFIX_EXIT_TIMEOUT": "1"}, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "did not finish" in proc.stderr or "dropped 2" in proc.stdout


def test_instrumentor_on_an_sdk_provider_configured_elsewhere_redacts_its_exporters():
    code = """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter, provider = InMemorySpanExporter(), TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)   # what a distro / the app did first
        from tracefix.instrumentor import TracefixInstrumentor
        TracefixInstrumentor().instrument()
        import tracefix
        with tracefix.session("distro", metadata={"token": "Bearer abcdef123456"}):
            pass
        print(exporter.get_finished_spans()[0].attributes["tracefix.session.metadata"])
    """
    proc = run_script(code, {})
    assert proc.returncode == 0, proc.stderr
    assert "abcdef123456" not in proc.stdout and "[REDACTED]" in proc.stdout


def test_a_stuck_exporter_never_blocks_the_app_and_queue_drops_are_counted(monkeypatch):
    import threading

    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    release, inside = threading.Event(), threading.Event()
    finished_exports = []

    class StuckExporter(SpanExporter):  # a collector that does not answer
        def export(self, spans):
            inside.set()
            release.wait(30)
            finished_exports.append(len(spans))
            return SpanExportResult.SUCCESS

    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
    handle = tracefix.init(exporter=StuckExporter())
    try:
        for i in range(50):
            with tracefix.session(f"s{i}"):
                pass
        inside.wait(5)
        # all 50 sessions ran while the first export is still stuck: nobody waited for it
        assert inside.is_set() and finished_exports == []
        stats = handle.stats()
    finally:
        release.set()
        handle.shutdown()
    assert stats["queue_dropped"] >= 50 - 8 - 2 and stats["dropped"] >= stats["queue_dropped"]
