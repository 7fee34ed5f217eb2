"""An LLM call's attributes go into the SDK span without the SDK cleaning them a second time
(tracefix.clean_attributes) only where nothing could tell: the spans a collector receives
are the SDK path's byte for byte (OTLP protobuf, ids and times aside), and an app's own
sampler or a processor that reads a span at its start still see the attributes at the
start (the SDK's path), an attribute length limit still cuts text. Real calls against the
scripted LLM server."""
from __future__ import annotations

import re
from collections.abc import Mapping

import openai
import opentelemetry.attributes as otel_attributes
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Sampler

import tracefix
from tracefix import semconv as sc
from tracefix.demo.team import system_prompt, tools_for

MODEL = "bank-agent"
MESSAGES = [{"role": "system", "content": system_prompt("AccountAgent")},
            {"role": "user", "content": "AccountAgent: look up customer Alice Chen and get her accounts."}]


class AppSampler(Sampler):
    """An app's own sampler: it could read the attributes a span starts with."""

    def __init__(self):
        self.seen: list[dict] = []

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None, trace_state=None):
        self.seen.append(dict(attributes or {}))
        return ALWAYS_ON.should_sample(parent_context, trace_id, name, kind, attributes, links)

    def get_description(self) -> str:
        return "AppSampler"


class StartReader(SimpleSpanProcessor):
    """An app's own processor that reads a span's attributes when it starts."""

    def __init__(self, exporter):
        super().__init__(exporter)
        self.at_start: list[dict] = []

    def on_start(self, span, parent_context=None):
        self.at_start.append(dict(span.attributes))


@pytest.fixture
def client(sim_url):
    c = openai.OpenAI(base_url=sim_url, api_key="sim-key", max_retries=0)
    yield c
    c.close()


def run_calls(client, handle_args: dict) -> InMemorySpanExporter:
    """A plain call with tools and a streamed one in one session, recorded through init(...)."""
    memory = handle_args.pop("memory")
    handle = tracefix.init(**handle_args)
    try:
        with tracefix.session("clean-attributes", session_id="s-clean"):
            client.chat.completions.create(model=MODEL, messages=MESSAGES, tools=tools_for("AccountAgent"),
                                           temperature=0.2, seed=3)
            for _ in client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True,
                                                    stream_options={"include_usage": True}):
                pass
    finally:
        handle.shutdown()
    return memory


def on_the_wire(spans) -> list[bytes]:
    """Each chat span as OTLP protobuf, its ids, times and the server's random response id
    and creation time masked (the same length, so the bytes around them compare)."""
    out = []
    for span in spans:
        if not span.name.startswith("chat "):
            continue
        request = encode_spans([span])
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for proto in scope_spans.spans:
                    proto.trace_id = proto.span_id = proto.parent_span_id = b""
                    proto.start_time_unix_nano = proto.end_time_unix_nano = 0
        data = request.SerializeToString(deterministic=True)
        data = re.sub(rb"chatcmpl-[0-9a-f]{24}", b"chatcmpl-" + b"x" * 24, data)
        out.append(re.sub(rb'"created":\d{10}', b'"created":0000000000', data))
    return out


def test_the_spans_on_the_wire_are_the_sdk_paths(client):
    fast = InMemorySpanExporter()
    run_calls(client, {"memory": fast, "span_processor": SimpleSpanProcessor(fast)})
    sdk = InMemorySpanExporter()
    # an app's own sampler and a length limit no text reaches: the SDK's path at the start and after the call
    provider = TracerProvider(sampler=AppSampler(), span_limits=SpanLimits(max_span_attribute_length=10**7))
    run_calls(client, {"memory": sdk, "tracer_provider": provider, "span_processor": SimpleSpanProcessor(sdk)})
    assert provider.sampler.seen and any(sc.GEN_AI_INPUT_MESSAGES in seen for seen in provider.sampler.seen)
    fast_wire, sdk_wire = on_the_wire(fast.get_finished_spans()), on_the_wire(sdk.get_finished_spans())
    assert len(fast_wire) == 2 and fast_wire == sdk_wire
    streamed = [s for s in fast.get_finished_spans() if s.name.startswith("chat ")][1]
    assert type(streamed.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS]) is tuple  # as the SDK stores a list


def test_tracefix_own_pipeline_skips_the_sdks_second_cleaning(client, monkeypatch):
    cleaned: list[str] = []
    clean = otel_attributes._clean_attribute_value

    def counting(value, limit):  # the SDK cleans a mapping at once (start, set_attributes), else value by value
        if isinstance(value, Mapping):
            cleaned.extend(step for step, key in (("start", sc.GEN_AI_INPUT_MESSAGES), ("finish", sc.RESPONSE_RAW))
                           if key in value)
        elif isinstance(value, str) and value.startswith('{"id":"chatcmpl-'):  # the raw response
            cleaned.append("finish")
        return clean(value, limit)

    monkeypatch.setattr(otel_attributes, "_clean_attribute_value", counting)
    memory = InMemorySpanExporter()  # the SDK's own processor, wrapped by tracefix for redaction
    run_calls(client, {"memory": memory, "span_processor": SimpleSpanProcessor(memory)})
    spans = [s for s in memory.get_finished_spans() if s.name.startswith("chat ")]
    assert len(spans) == 2 and all(sc.GEN_AI_INPUT_MESSAGES in s.attributes for s in spans)
    assert cleaned == []
    # an app's processor that reads spans at their start: the SDK's path, attributes there at the start
    # (the response's attributes are not cleaned again: no processor sees a span between start and end)
    memory = InMemorySpanExporter()
    reader = StartReader(memory)
    provider = TracerProvider()
    provider.add_span_processor(reader)
    run_calls(client, {"memory": memory, "tracer_provider": provider})
    assert cleaned == ["start", "start"]
    chat_starts = [a for a in reader.at_start if a.get(sc.GEN_AI_OPERATION_NAME) == "chat"]
    assert len(chat_starts) == 2 and all(a[sc.GEN_AI_REQUEST_MODEL] == MODEL for a in chat_starts)


def test_an_attribute_length_limit_still_cuts_text(client):
    memory = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attribute_length=40))
    run_calls(client, {"memory": memory, "tracer_provider": provider, "span_processor": SimpleSpanProcessor(memory)})
    spans = [s for s in memory.get_finished_spans() if s.name.startswith("chat ")]
    assert len(spans) == 2
    for span in spans:
        assert len(span.attributes[sc.GEN_AI_INPUT_MESSAGES]) == 40
        assert len(span.attributes[sc.RESPONSE_RAW]) == 40
