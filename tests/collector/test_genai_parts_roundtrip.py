"""A session recorded with the GenAI conventions' `parts` messages reads into the same
session document as the same session in the OpenAI chat shape tracefix wrote before (and
other producers still write): both go over real OTLP/HTTP into the real collector.

The old-shape twin is the very spans with their message attributes put back as the old
instrumentation wrote them (the request as the SDK sent it, normalized; the response's
chat message) and new trace, span and session ids.
"""
from __future__ import annotations

import json

import openai
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext

import procs
import tracefix
from collector_support import TOKEN
from tracefix import semconv as sc
from tracefix.attributes import canonical_json, dumps
from tracefix.demo.team import system_prompt, tools_for
from tracefix.fingerprints import normalize_messages
from tracefix.openai_chat import OpenAIChat

MODEL = "bank-agent"
SESSION = "s-parts-roundtrip"


def record(sim_url: str) -> tuple[list[ReadableSpan], dict[int, list]]:
    """A worker turn against the scripted server: tool calls, their results (the SDK's
    message objects in the history, as apps append them) and a streamed last call. Returns
    the spans and the messages each step sent."""
    @tracefix.tool
    def lookup_customer(name: str) -> dict:
        return {"customer_id": "CUST-001", "name": name}

    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))
    client = openai.OpenAI(base_url=sim_url, api_key="sim-key", max_retries=0)
    sent: dict[int, list] = {}
    messages: list = [{"role": "system", "content": system_prompt("AccountAgent")},
                      {"role": "user", "content": "AccountAgent: look up customer Alice Chen and get her accounts.",
                       "name": "Orchestrator"}]
    try:
        with tracefix.session("parts", session_id=SESSION, entrypoint="m:f", inputs={}):
            with tracefix.agent("AccountAgent"):
                for step in range(2):
                    sent[step] = list(messages)
                    message = client.chat.completions.create(model=MODEL, messages=messages,
                                                             tools=tools_for("AccountAgent")).choices[0].message
                    messages.append(message)
                    for call in message.tool_calls or []:
                        result = lookup_customer(**json.loads(call.function.arguments)) \
                            if call.function.name == "lookup_customer" else {"accounts": ["ACC-1001"]}
                        messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
                sent[2] = list(messages)
                for _ in client.chat.completions.create(model=MODEL, messages=messages, stream=True,
                                                        stream_options={"include_usage": True}):
                    pass
    finally:
        client.close()
        handle.shutdown()
    return list(exporter.get_finished_spans()), sent


def old_shape_twin(spans: list[ReadableSpan], sent: dict[int, list], session_id: str) -> list[ReadableSpan]:
    """The spans as the instrumentation wrote them before the parts shape, under new ids."""
    def context(ctx: SpanContext) -> SpanContext:
        return SpanContext(ctx.trace_id ^ 0xF0F0, ctx.span_id ^ 0xF0F0, ctx.is_remote, ctx.trace_flags, ctx.trace_state)

    twins = []
    for span in spans:
        attrs = dict(span.attributes)
        for key in (sc.SESSION_ID, sc.GEN_AI_CONVERSATION_ID):
            if key in attrs:
                attrs[key] = session_id
        if attrs.get(sc.GEN_AI_OPERATION_NAME) == "chat":
            attrs[sc.GEN_AI_INPUT_MESSAGES] = canonical_json(normalize_messages(sent[attrs[sc.STEP]]))
            raw = json.loads(attrs[sc.RESPONSE_RAW])
            attrs[sc.GEN_AI_OUTPUT_MESSAGES] = dumps(OpenAIChat().summarize(raw).output_messages)
            for key in (sc.SERVER_ADDRESS, sc.SERVER_PORT, sc.GEN_AI_SYSTEM_INSTRUCTIONS):
                attrs.pop(key, None)
        twins.append(ReadableSpan(
            name=span.name, context=context(span.context), parent=span.parent and context(span.parent),
            resource=span.resource, attributes=attrs, events=span.events, links=span.links, kind=span.kind,
            status=span.status, start_time=span.start_time, end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope))
    return twins


def comparable(doc: dict, session_id: str) -> str:
    """The document without what names the session or its spans."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("session_id", "span_id", "trace_id",
                                                                         "parent_span_id")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    return json.dumps(strip(doc), sort_keys=True, indent=1).replace(session_id, "<session>")


def test_parts_messages_read_into_the_same_document_as_the_old_chat_shape(sim_url, collector, api):
    spans, sent = record(sim_url)
    chats = [s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == "chat"]
    assert len(chats) == 3 and all("parts" in json.loads(s.attributes[sc.GEN_AI_INPUT_MESSAGES])[0] for s in chats)
    exporter = OTLPSpanExporter(endpoint=collector.match["http"] + "/v1/traces",
                                headers={"authorization": f"Bearer {TOKEN}"}, timeout=10)
    twin_session = SESSION + "-old-shape"
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert exporter.export(old_shape_twin(spans, sent, twin_session)) == SpanExportResult.SUCCESS
    exporter.shutdown()

    def document(session_id: str):
        doc = api.get_session(session_id)
        return doc if doc and len(doc.get("steps") or []) == 3 and doc.get("ended_at") else None
    new = procs.wait_for(lambda: document(SESSION), "the parts-shaped session")
    old = procs.wait_for(lambda: document(twin_session), "its old-shape twin")
    llm_steps = [s for s in new["steps"] if s["kind"] == "llm"]
    assert len(llm_steps) == 3 and llm_steps[1]["input_messages"][2]["tool_calls"]  # content that could differ
    assert llm_steps[0]["input_messages"][1]["name"] == "Orchestrator"
    assert comparable(new, SESSION) == comparable(old, twin_session)
