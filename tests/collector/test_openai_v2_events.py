"""The official OpenTelemetry GenAI instrumentation of the openai SDK
(`opentelemetry-instrumentation-openai-v2`, pinned in tests/python_packages.py, run from a
folder of its own) records message content as log events, never on its spans. An app it
instruments calls the demo's scripted LLM server over real HTTP and exports its spans, log
events and metrics to a real `tracefix serve`: the session's step shows the messages the
events carried, and the instrumentation's token usage is stored as metric points.

Both of the shapes it emits, each from its own process (the mode is read once per process):
its default conventions (v1.30: one event per message, `gen_ai.choice`) over OTLP/HTTP, and
the latest (`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`: one
`gen_ai.client.inference.operation.details` event) over OTLP/gRPC."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid

from collector_support import TOKEN

from procs import wait_for
from python_packages import installed

APP = """
    import sys, openai
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    if {grpc}:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        where = lambda signal: dict(endpoint="{grpc_endpoint}", insecure=True, headers=(("authorization", "Bearer {token}"),))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        where = lambda signal: dict(endpoint="{http_endpoint}/v1/" + signal, headers={{"authorization": "Bearer {token}"}})
    resource = Resource.create({{"service.name": "{service}"}})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(**where("traces"))))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(**where("logs"))))
    meter_provider = MeterProvider(resource=resource, metric_readers=[
        PeriodicExportingMetricReader(OTLPMetricExporter(**where("metrics")), export_interval_millis=3_600_000)])
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider,
                                    meter_provider=meter_provider)
    client = openai.OpenAI(base_url="{sim_url}", api_key="sim", max_retries=0)
    with tracer_provider.get_tracer("app").start_as_current_span(
            "session {sid}", attributes={{"tracefix.session.id": "{sid}", "tracefix.session.root": True}}):
        answer = client.chat.completions.create(model="bank-agent", messages=[
            {{"role": "system", "content": "{system}"}}, {{"role": "user", "content": "{question}"}}])
    print(answer.choices[0].message.content)
    logger_provider.shutdown()
    tracer_provider.shutdown()
    meter_provider.shutdown()
"""
SYSTEM = "You are the Orchestrator of a bank."
QUESTION = "Task: Alice Chen asks for her savings balance."


def start_app(collector, sim_url: str, site, latest: bool) -> tuple[str, str, subprocess.Popen]:
    sid, service = f"openai-v2-{uuid.uuid4().hex[:8]}", f"openai-v2-{'latest' if latest else 'v1.30'}"
    code = APP.format(grpc=latest, grpc_endpoint=collector.match["grpc"], http_endpoint=collector.match["http"],
                      token=TOKEN, service=service, sim_url=sim_url, sid=sid, system=SYSTEM, question=QUESTION)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
           "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY" if latest else "true"}
    if latest:
        env["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "GRPC_PROXY", "grpc_proxy"):
        env.pop(proxy, None)  # loopback only
    app = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    return sid, service, app


def test_the_official_instrumentations_events_fill_the_step(collector, api, sim_url):
    site = installed()
    # both apps at once: each is a cold Python process importing openai and the OTel SDK
    apps = [start_app(collector, sim_url, site, latest) for latest in (False, True)]
    for sid, service, app in apps:
        out, err = app.communicate(timeout=120)
        assert app.returncode == 0, out + err
        answer = out.strip().splitlines()[-1]
        doc = wait_for(lambda: (d := api.get_session(sid)) and d["steps"] and d["steps"][0]["output_message"] and d,
                       f"the messages of {service}'s call", timeout=30)
        [step] = doc["steps"]
        assert step["model"] == "bank-agent" and step["input_tokens"] > 0
        assert [(m["role"], m["content"]) for m in step["input_messages"]] == [("system", SYSTEM), ("user", QUESTION)]
        assert step["output_message"]["role"] == "assistant" and step["output_message"]["content"] == answer
        assert doc["task"] and "Alice Chen" in doc["task"]
        spans = api.get_spans(sid)
        assert QUESTION not in str([s["attributes"] for s in spans]), "the content came from the events alone"
        usage = wait_for(lambda: api._request("GET", "/api/v1/metrics", query={
            "name": "gen_ai.client.token.usage", "service": service})["points"], f"{service}'s token usage")
        assert {p["token_type"] for p in usage} == {"input", "output"}
        assert {p["model"] for p in usage} == {"bank-agent"}
        assert sum(p["sum"] for p in usage if p["token_type"] == "input") == step["input_tokens"]
