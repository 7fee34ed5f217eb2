"""OTLP logs and metrics, received as traces are: real OpenTelemetry SDK exporters (HTTP and
gRPC) to a real `tracefix serve`.

GenAI events (the official GenAI instrumentations' message content) arrive in other requests
than their spans; the session document's step shows the messages they carried when its span
has none, in both shapes the instrumentations emit (one event per message, and the latest
conventions' one `operation.details` event). GenAI metrics' points are stored and read back
from `GET /api/v1/metrics`; other log records and metrics are acknowledged and not stored.
Bad bodies get a clear error; a bad record is rejected alone (partial success) and the
others stored; a spooled logs or metrics request is replayed at start-up.
(The official instrumentation's own package: test_openai_v2_events.py.)"""
from __future__ import annotations

import json
import time
import uuid

import grpc
import pytest
from collector_support import TOKEN, otlp_error, tracer_provider
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from test_ingest import post
from test_normalize_parity import _kvs

import procs
from procs import wait_for

from tracefix.collector.access import HttpAccess

PROTOCOLS = ["http", "grpc"]
SYSTEM = "You answer questions about savings accounts."
QUESTION = "What is the balance of account 4417?"
ANSWER = "Account 4417 holds 1,250.00 EUR."
SECOND_CHOICE = "an answer the step must not show"


def headers(protocol: str):
    pairs = {"authorization": f"Bearer {TOKEN}"}
    return pairs if protocol == "http" else tuple(pairs.items())


def logger_provider(collector, protocol: str):
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    if protocol == "http":
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

        exporter = OTLPLogExporter(endpoint=collector.match["http"] + "/v1/logs", headers=headers(protocol), timeout=10)
    else:
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter

        exporter = GrpcLogExporter(endpoint=collector.match["grpc"], insecure=True, headers=headers(protocol),
                                   timeout=10)
    provider = LoggerProvider(resource=Resource.create({"service.name": "events-app"}))
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter, schedule_delay_millis=50))
    return provider


def meter_provider(collector, protocol: str, service: str):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource

    if protocol == "http":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        exporter = OTLPMetricExporter(endpoint=collector.match["http"] + "/v1/metrics", headers=headers(protocol),
                                      timeout=10)
    else:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter

        exporter = GrpcMetricExporter(endpoint=collector.match["grpc"], insecure=True, headers=headers(protocol),
                                      timeout=10)
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)  # exported on force_flush
    return MeterProvider(metric_readers=[reader], resource=Resource.create({"service.name": service}))


def record_calls(collector, protocol: str, sid: str) -> None:
    """Two LLM calls whose spans carry no message: the first's messages as one event each (the
    conventions v1.30, the instrumentations' default), the second's as one operation.details
    event (the latest conventions); a log record that is no GenAI event beside them."""
    tracer_p, logger_p = tracer_provider(collector, protocol, service="events-app"), logger_provider(collector, protocol)
    tracer, logger = tracer_p.get_tracer("app"), logger_p.get_logger("opentelemetry.instrumentation.openai_v2")
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "bank-model", "gen_ai.system": "openai",
            "gen_ai.usage.input_tokens": 20, "gen_ai.usage.output_tokens": 9}
    with tracer.start_as_current_span(f"session {sid}", attributes={"tracefix.session.id": sid,
                                                                    "tracefix.session.root": True}):
        with tracer.start_as_current_span("chat bank-model", attributes=chat):
            logger.emit(event_name="gen_ai.system.message", body={"content": SYSTEM}, attributes={"gen_ai.system": "openai"})
            logger.emit(event_name="gen_ai.user.message", body={"content": QUESTION})
            logger.emit(event_name="gen_ai.choice", body={"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": ANSWER, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                    "name": "get_balance", "arguments": '{"account": "4417"}'}}]}})
            logger.emit(event_name="gen_ai.choice", body={"index": 1, "finish_reason": "stop",
                                                          "message": {"role": "assistant", "content": SECOND_CHOICE}})
            logger.emit(body="an application log line, not a GenAI event")
        time.sleep(0.002)  # the second call starts later: the steps' order is the calls'
        with tracer.start_as_current_span("chat bank-model", attributes=chat):
            logger.emit(event_name="gen_ai.client.inference.operation.details", attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "And account 9001?"}]}],
                "gen_ai.output.messages": [{"role": "assistant", "finish_reason": "stop",
                                            "parts": [{"type": "text", "content": "Account 9001 is closed."}]}]})
    # the events first: the spans of the session come in a later request (as they often do)
    assert logger_p.force_flush(10_000)
    assert tracer_p.force_flush(10_000)
    logger_p.shutdown()
    tracer_p.shutdown()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_genai_events_give_bare_llm_steps_their_messages(collector, api, protocol):
    sid = f"events-{protocol}-{uuid.uuid4().hex[:8]}"
    record_calls(collector, protocol, sid)
    doc = wait_for(lambda: (d := api.get_session(sid)) and len(d["steps"]) == 2 and d, f"session {sid}")
    first, second = doc["steps"]
    assert [(m["role"], m["content"]) for m in first["input_messages"]] == [("system", SYSTEM), ("user", QUESTION)]
    assert first["output_message"]["content"] == ANSWER
    assert first["output_message"]["tool_calls"][0]["function"]["name"] == "get_balance"
    assert [(m["role"], m["content"]) for m in second["input_messages"]] == [("user", "And account 9001?")]
    assert second["output_message"] == {"role": "assistant", "content": "Account 9001 is closed."}
    assert SECOND_CHOICE not in json.dumps(doc) and "application log line" not in json.dumps(doc)
    assert doc["task"] == QUESTION or QUESTION in (doc["task"] or ""), doc["task"]
    # one page of the session (the UI's read) shows them too
    page = api._request("GET", f"/api/v1/sessions/{sid}", query={"limit": 1})
    assert page["steps"][0]["output_message"]["content"] == ANSWER
    assert [page["messages"][k]["content"] for k in page["steps"][0]["input_message_keys"]] == [SYSTEM, QUESTION]


def test_a_span_that_recorded_its_messages_keeps_them(collector, api):
    """Events join only a span that recorded no answer: a span's own messages win; its bare
    sibling in the same session takes its event's."""
    sid = f"own-{uuid.uuid4().hex[:8]}"
    tracer_p, logger_p = tracer_provider(collector, "http", service="events-app"), logger_provider(collector, "http")
    tracer, logger = tracer_p.get_tracer("app"), logger_p.get_logger("x")
    with tracer.start_as_current_span("chat m", attributes={
            "gen_ai.operation.name": "chat", "tracefix.session.id": sid,
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": "the span's question"}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "the span's answer"}])}):
        logger.emit(event_name="gen_ai.choice", body={"index": 0, "message": {"content": "an event's other answer"}})
    time.sleep(0.002)
    with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat",
                                                            "tracefix.session.id": sid}):
        logger.emit(event_name="gen_ai.choice", body={"index": 0, "message": {"content": "the bare call's answer"}})
    assert logger_p.force_flush(10_000)  # answered once the events are stored
    tracer_p.force_flush(10_000)
    own, bare = wait_for(lambda: (d := api.get_session(sid)) and len(d["steps"]) == 2 and d, f"session {sid}")["steps"]
    assert own["output_message"]["content"] == "the span's answer"
    assert [m["content"] for m in own["input_messages"]] == ["the span's question"]
    assert bare["output_message"] == {"role": "assistant", "content": "the bare call's answer"}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_genai_metrics_are_stored_as_points_and_read_back(collector, api, protocol):
    service = f"metrics-{protocol}-{uuid.uuid4().hex[:6]}"
    provider = meter_provider(collector, protocol, service)
    meter = provider.get_meter("opentelemetry.instrumentation.openai_v2")
    tokens = meter.create_histogram("gen_ai.client.token.usage", unit="{token}")
    duration = meter.create_histogram("gen_ai.client.operation.duration", unit="s")
    other = meter.create_counter("http.client.requests")
    for n in (20, 30):
        tokens.record(n, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "bank-model",
                          "gen_ai.token.type": "input"})
    tokens.record(7, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "bank-model",
                      "gen_ai.token.type": "output"})
    duration.record(0.25, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "bank-model"})
    other.add(3)
    provider.shutdown()  # one export of what was recorded (a force_flush before would send it twice)

    def read(**query) -> dict:
        return api._request("GET", "/api/v1/metrics", query={"service": service, **query})

    usage = wait_for(lambda: read(name="gen_ai.client.token.usage")["points"], "token usage points")
    by_type = {p["token_type"]: p for p in usage}
    assert set(by_type) == {"input", "output"}
    assert (by_type["input"]["count"], by_type["input"]["sum"], by_type["input"]["max"]) == (2, 50, 30)
    assert by_type["input"]["model"] == "bank-model" and by_type["input"]["kind"] == "histogram"
    assert by_type["output"]["sum"] == 7 and by_type["output"]["unit"] == "{token}"
    [took] = read(name="gen_ai.client.operation.duration")["points"]
    assert took["sum"] == 0.25 and took["operation"] == "chat" and took["attributes"]["gen_ai.request.model"] == "bank-model"
    assert {p["name"] for p in read()["points"]} == {"gen_ai.client.token.usage", "gen_ai.client.operation.duration"}
    assert read(name="gen_ai.client.token.usage", model="another-model")["points"] == []
    later = read(name="gen_ai.client.token.usage", since=str(time.time() + 3600))
    assert later == {"points": [], "truncated": False}
    assert len(read(limit=1)["points"]) == 1 and read(limit=1)["truncated"] is True


# --- bad bodies, one bad record ----------------------------------------------------------------

def event(span: int, name: str, body: str, trace: bytes = b"\x01" * 16) -> LogRecord:
    record = LogRecord(time_unix_nano=time.time_ns(), trace_id=trace, span_id=span.to_bytes(8, "big"),
                       event_name=name)
    record.body.kvlist_value.values.extend(_kvs({"content": body}))
    return record


def logs_request(records: list[LogRecord]) -> ExportLogsServiceRequest:
    return ExportLogsServiceRequest(resource_logs=[ResourceLogs(
        resource={"attributes": _kvs({"service.name": "bad-bodies"})}, scope_logs=[ScopeLogs(log_records=records)])])


@pytest.mark.parametrize("path", ["/v1/logs", "/v1/metrics"])
def test_bad_bodies_are_refused_saying_why(collector, path):
    kind = "ExportLogsServiceRequest" if path == "/v1/logs" else "ExportMetricsServiceRequest"
    url = collector.match["http"] + path
    status, body, h = post(url, b"\xff\xfe not protobuf")
    assert status == 400 and kind in otlp_error(body, h["content-type"])[0]
    status, body, h = post(url, b'{"resourceLogs": "a string"}' if "logs" in path else b'[1, 2]', "application/json")
    assert status == 400, body
    assert ("resourceMetrics" if "metrics" in path else kind) in otlp_error(body, h["content-type"])[0]
    status, _, _ = post(url, logs_request([]).SerializeToString(), token="wrong")
    assert status == 401
    status, body, h = post(url, b"{}", "text/plain")
    assert status == 415


def test_a_bad_record_is_rejected_alone_over_http_json_and_grpc(collector, api):
    """A record with an 8-byte trace id is rejected by name; the good ones are stored."""
    from google.protobuf import json_format

    sid = f"bad-record-{uuid.uuid4().hex[:8]}"
    trace = uuid.uuid4().bytes
    tracer_p = tracer_provider(collector, "http", service="bad-bodies")
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

    parent = SpanContext(int.from_bytes(trace, "big"), 0x77, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    ctx = set_span_in_context(NonRecordingSpan(parent))
    tracer = tracer_p.get_tracer("app")
    ids = []
    for n in range(3):  # three bare LLM calls, children of a span never sent
        with tracer.start_as_current_span(f"chat {n}", context=ctx, start_time=time.time_ns() + n * 1000, attributes={
                "gen_ai.operation.name": "chat", "tracefix.session.id": sid}) as span:
            ids.append(span.get_span_context().span_id)
    tracer_p.force_flush(10_000)
    bad = event(ids[0], "gen_ai.user.message", "never stored", trace=b"\x02" * 8)
    via_protobuf = logs_request([event(ids[0], "gen_ai.user.message", "question 0", trace), bad])
    status, body, _ = post(collector.match["http"] + "/v1/logs", via_protobuf.SerializeToString())
    assert status == 200
    answer = ExportLogsServiceResponse.FromString(body).partial_success
    assert answer.rejected_log_records == 1 and "trace_id must be 16 bytes" in answer.error_message
    data = json_format.MessageToDict(logs_request([event(ids[1], "gen_ai.user.message", "question 1", trace)]))
    for record in data["resourceLogs"][0]["scopeLogs"][0]["logRecords"]:  # OTLP/JSON ids are hex
        record["traceId"], record["spanId"] = trace.hex(), ids[1].to_bytes(8, "big").hex()
    status, body, _ = post(collector.match["http"] + "/v1/logs", json.dumps(data).encode(), "application/json")
    assert status == 200 and json.loads(body) == {}
    with grpc.insecure_channel(collector.match["grpc"]) as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.logs.v1.LogsService/Export",
                                     request_serializer=None, response_deserializer=ExportLogsServiceResponse.FromString)
        answer = export(logs_request([event(ids[2], "gen_ai.user.message", "question 2", trace)]).SerializeToString(),
                        metadata=(("authorization", f"Bearer {TOKEN}"),), timeout=10)
        assert not answer.HasField("partial_success") or answer.partial_success.rejected_log_records == 0
        with pytest.raises(grpc.RpcError) as refused:
            export(b"\xff\xfe not protobuf", metadata=(("authorization", f"Bearer {TOKEN}"),), timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "ExportLogsServiceRequest" in refused.value.details()
        metrics = channel.unary_unary("/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
                                      request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as refused:
            metrics(ExportMetricsServiceRequest().SerializeToString(), timeout=10)  # no token
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    doc = wait_for(lambda: (d := api.get_session(sid)) and len(d["steps"]) == 3 and d, f"session {sid}")
    assert [[m["content"] for m in st["input_messages"]] for st in doc["steps"]] == \
        [["question 0"], ["question 1"], ["question 2"]]


# --- the spool ---------------------------------------------------------------------------------

def test_spooled_logs_and_metrics_requests_are_replayed_at_start(tmp_path):
    """Requests a collector spooled and did not write before it stopped (written here with the
    spool's own API, as the receivers append them) are stored by the next start; then a burst
    of log exports over a writer queue of one record is stored whole, some through the spool."""
    from opentelemetry.proto.metrics.v1.metrics_pb2 import (Histogram, HistogramDataPoint, Metric, ResourceMetrics,
                                                            ScopeMetrics)

    from tracefix.collector.spool import Spool, SpooledRequest

    sid, trace, span = f"spooled-{uuid.uuid4().hex[:8]}", uuid.uuid4().bytes, 0x1234
    from test_partial_success import make_request, make_span

    spans = make_request([make_span(trace, 0, "chat spooled", {"gen_ai.operation.name": "chat",
                                                                "tracefix.session.id": sid})])
    spans.resource_spans[0].scope_spans[0].spans[0].span_id = span.to_bytes(8, "big")
    logs = logs_request([event(span, "gen_ai.user.message", "a spooled question", trace)])
    point = HistogramDataPoint(time_unix_nano=time.time_ns(), count=1, sum=12, attributes=_kvs({
        "gen_ai.token.type": "input", "gen_ai.request.model": "spooled-model"}))
    metrics = ExportMetricsServiceRequest(resource_metrics=[ResourceMetrics(
        resource={"attributes": _kvs({"service.name": "spooled"})}, scope_metrics=[ScopeMetrics(metrics=[Metric(
            name="gen_ai.client.token.usage", histogram=Histogram(data_points=[point], aggregation_temporality=2))])])])
    spool = Spool(tmp_path / "spool", max_bytes=1 << 20).open()
    for signal, message in (("logs", logs), ("traces", spans), ("metrics", metrics)):
        spooled = SpooledRequest("grpc", "application/x-protobuf", None, message.SerializeToString(), spans=1,
                                 signal=signal)
        assert spool.append(spooled).result(10) == []
    spool.close()
    serve = procs.start_serve(tmp_path / "s.duckdb", "--token", TOKEN, "--diagnose", "off", "--spool-dir",
                              str(tmp_path / "spool"), "--max-queue-spans", "1", env={"TRACEFIX_TOKEN": ""})
    try:
        api = HttpAccess(serve.match["http"], TOKEN)
        doc = wait_for(lambda: (d := api.get_session(sid)) and d["steps"] and d["steps"][0]["input_messages"] and d,
                       "the spooled session")
        assert doc["steps"][0]["input_messages"] == [{"role": "user", "content": "a spooled question"}]
        [stored] = api._request("GET", "/api/v1/metrics", query={"model": "spooled-model"})["points"]
        assert stored["sum"] == 12 and stored["service"] == "spooled"
        assert list((tmp_path / "spool").glob("*.seg")) == [] or wait_for(
            lambda: not list((tmp_path / "spool").glob("*.seg")), "the spool's segments deleted")
        burst_of_log_exports(serve, api)
    finally:
        serve.stop()


def burst_of_log_exports(serve, api: HttpAccess) -> None:
    """20 exports of 5 GenAI events each at once, to a writer queue of one record: those that
    meet a waiting one go to the spool (the collector's own counter says how many)."""
    from concurrent.futures import ThreadPoolExecutor

    from test_metrics import scrape, value

    sid, trace = f"burst-{uuid.uuid4().hex[:8]}", uuid.uuid4().bytes
    from test_partial_success import make_request, make_span

    calls = make_request([make_span(trace, n, f"chat {n}", {"gen_ai.operation.name": "chat", "tracefix.session.id": sid,
                                                             "tracefix.step": n}) for n in range(20)])
    status, _, _ = post(serve.match["http"] + "/v1/traces", calls.SerializeToString())
    assert status == 200
    span_ids = [s.span_id for s in calls.resource_spans[0].scope_spans[0].spans]
    bodies = [logs_request([event(int.from_bytes(span_ids[n], "big"), "gen_ai.user.message", f"q{n}.{i}", trace)
                            for i in range(5)]).SerializeToString() for n in range(20)]
    with ThreadPoolExecutor(20) as pool:
        statuses = list(pool.map(lambda b: post(serve.match["http"] + "/v1/logs", b)[0], bodies))
    assert statuses == [200] * 20
    doc = wait_for(lambda: (d := api.get_session(sid)) and all(len(s["input_messages"]) == 5 for s in d["steps"]) and d,
                   "every event of the burst", timeout=60)
    assert [[m["content"] for m in s["input_messages"]] for s in doc["steps"]] == \
        [[f"q{n}.{i}" for i in range(5)] for n in range(20)]
    assert value(scrape(serve), "tracefix_spooled_requests_total", protocol="http") > 0


# --- tracefix's own GenAI metrics (tracefix.genai_metrics) -------------------------------------

METRICS_APP = """
    import sys, openai, tracefix
    handle = tracefix.init(endpoint="{endpoint}", protocol="{protocol}", headers={{"authorization": "Bearer {token}"}},
                           service_name="{service}"{switch})
    client = openai.OpenAI(base_url="{sim_url}", api_key="sim", max_retries=0)
    with tracefix.session("metrics", session_id="{service}"):
        for question in ("Task: Alice Chen asks for her savings balance.", "And her checking balance?"):
            client.chat.completions.create(model="bank-agent", messages=[{{"role": "user", "content": question}}])
    print("metrics SDK loaded" if "opentelemetry.sdk.metrics" in sys.modules else "no metrics SDK")
    handle.shutdown()
"""


def test_tracefix_records_the_genai_client_metrics_only_when_switched_on(collector, api, sim_url):
    import os
    import subprocess
    import sys
    import textwrap

    runs = {"argument-http": ("http/protobuf", ", metrics=True", {}),
            "env-grpc": ("grpc", "", {"TRACEFIX_METRICS": "1"}),
            "off": ("http/protobuf", "", {"TRACEFIX_METRICS": ""})}
    apps = {}
    for run, (protocol, switch, env) in runs.items():
        service = f"tf-metrics-{run}-{uuid.uuid4().hex[:6]}"
        endpoint = collector.match["grpc"] if protocol == "grpc" else collector.match["http"]
        code = METRICS_APP.format(endpoint=f"http://{endpoint}" if protocol == "grpc" else endpoint,
                                  protocol=protocol, token=TOKEN, service=service, switch=switch, sim_url=sim_url)
        apps[run] = service, subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], text=True,
                                              env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for run, (service, app) in apps.items():
        out, err = app.communicate(timeout=120)
        assert app.returncode == 0, out + err
        if run == "off":
            assert out.strip() == "no metrics SDK"  # `import tracefix` and init() stay light
            continue
        assert out.strip() == "metrics SDK loaded"
        doc = wait_for(lambda: (d := api.get_session(service)) and len(d["steps"]) == 2 and d, f"{run}'s session")

        def points(name: str) -> list[dict]:
            return api._request("GET", "/api/v1/metrics", query={"name": name, "service": service})["points"]

        took = wait_for(lambda: points("gen_ai.client.operation.duration"), f"{run}'s durations")
        assert {p["temporality"] for p in took} == {1}  # delta: the points add up
        assert sum(p["count"] for p in took) == 2 and 0 < sum(p["sum"] for p in took) < 60
        assert took[0]["unit"] == "s" and took[0]["bounds"][:3] == [0.01, 0.02, 0.04]  # the conventions' boundaries
        assert took[0]["attributes"]["gen_ai.request.model"] == "bank-agent"
        assert took[0]["attributes"]["gen_ai.operation.name"] == "chat" and took[0]["attributes"]["server.address"]
        usage = points("gen_ai.client.token.usage")
        for kind, field in (("input", "input_tokens"), ("output", "output_tokens")):
            assert sum(p["count"] for p in usage if p["token_type"] == kind) == 2
            assert sum(p["sum"] for p in usage if p["token_type"] == kind) == sum(st[field] for st in doc["steps"])
    off_service = apps["off"][0]
    wait_for(lambda: api.get_session(off_service), "the session recorded without metrics")
    assert api._request("GET", "/api/v1/metrics", query={"service": off_service})["points"] == []
