"""tracefix next to OpenInference / OpenLLMetry: each LLM call is recorded once.

Real apps in subprocesses call the scripted LLM server and export to a real `tracefix
serve`: one launched by the real `opentelemetry-instrument` launcher (every installed
instrumentor loads from its entry point, tracefix's first here), one instrumented by
OpenInference that then calls `tracefix.init()`."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from collector_support import TOKEN

CALLS = 2
TRACEFIX_SCOPE = "tracefix"


def _run(script: str, env: dict, launcher: bool) -> subprocess.CompletedProcess:
    # `opentelemetry-instrument` is this console script: run() of the package, whichever
    # venv's bin/ holds the script
    argv = ([sys.executable, "-c", "import sys; from opentelemetry.instrumentation.auto_instrumentation import run; "
             "sys.argv[0] = 'opentelemetry-instrument'; sys.exit(run())", sys.executable] if launcher
            else [sys.executable])
    proc = subprocess.run([*argv, "-c", textwrap.dedent(script)], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _llm_spans(api, session_id: str, expected: int) -> list[dict]:
    """The session's LLM spans once `expected` of them are stored (or 30 s passed)."""
    deadline = time.monotonic() + 30
    while True:
        spans = [s for s in api.get_spans(session_id) if s["kind"] == "llm"]
        if len(spans) >= expected or time.monotonic() > deadline:
            time.sleep(0.5)  # a span more than expected would arrive with the same batch
            return [s for s in api.get_spans(session_id) if s["kind"] == "llm"]
        time.sleep(0.1)


APP = """
    import openai, tracefix
    client = openai.OpenAI(base_url="{sim_url}", api_key="sim", max_retries=0)
    with tracefix.session("coexist", entrypoint="app:main", inputs={{}}) as s:
        for i in range({calls}):
            client.chat.completions.create(model="bank-agent", messages=[
                {{"role": "user", "content": f"Task: Alice Chen asks for her savings balance. {{i}}"}}])
    print(s.id)
"""


@pytest.mark.parametrize("defer", ["", "0"], ids=["steps-aside", "switch-off-records-too"])
def test_under_opentelemetry_instrument_each_call_is_recorded_once(collector, api, sim_url, defer):
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.match["http"], "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
           "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer {TOKEN}", "OTEL_TRACES_EXPORTER": "none",
           "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
           "OTEL_SERVICE_NAME": f"coexist-{uuid.uuid4().hex[:6]}", "TRACEFIX_DEFER_TO_OTHER_INSTRUMENTORS": defer,
           "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "httpx,requests,urllib,urllib3"}
    proc = _run(APP.format(sim_url=sim_url, calls=CALLS), env, launcher=True)
    session_id = proc.stdout.split()[-1]
    # both OpenInference and OpenLLMetry are installed (entry point "openai"): each records each call
    others = {"openinference.instrumentation.openai", "opentelemetry.instrumentation.openai.v1"}
    spans = _llm_spans(api, session_id, CALLS * (len(others) + (defer == "0")))
    by_scope = {scope: sum(s["scope"] == scope for s in spans) for scope in {s["scope"] for s in spans}}
    assert {scope: by_scope.get(scope) for scope in others} == {scope: CALLS for scope in others}
    doc = api.get_session(session_id)
    if defer == "0":  # the documented switch: tracefix records them too
        assert by_scope.get(TRACEFIX_SCOPE) == CALLS
        assert doc["replayable"] is True
    else:
        assert TRACEFIX_SCOPE not in by_scope, "tracefix left the calls to the other instrumentations"
        assert proc.stderr.count("already traced by") == 1, "said once: " + proc.stderr
        assert doc["replayable"] is False, "tracefix has no recording of those calls to replay"
        assert doc["name"] == "session coexist", "tracefix's own session span is still there"


def test_tracefix_init_in_an_app_instrumented_by_openinference_records_each_call_once(collector, api, sim_url):
    service = f"oi-app-{uuid.uuid4().hex[:6]}"
    script = f"""
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from openinference.instrumentation.openai import OpenAIInstrumentor

        provider = TracerProvider(resource=Resource.create({{"service.name": "{service}"}}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
            endpoint="{collector.match["http"]}/v1/traces", headers={{"authorization": "Bearer {TOKEN}"}})))
        trace.set_tracer_provider(provider)
        OpenAIInstrumentor().instrument(tracer_provider=provider)
        import tracefix
        handle = tracefix.init()  # attaches to the app's provider
    """ + textwrap.dedent(APP.format(sim_url=sim_url, calls=CALLS)).replace("\n", "\n        ") + """
        handle.shutdown()
        provider.shutdown()
    """
    proc = _run(script, {"TRACEFIX_DEFER_TO_OTHER_INSTRUMENTORS": ""}, launcher=False)
    spans = _llm_spans(api, proc.stdout.split()[-1], CALLS)
    assert len(spans) == CALLS, [(s["name"], s["scope"]) for s in spans]
    assert {s["scope"] for s in spans} == {"openinference.instrumentation.openai"}
