"""OpenAI SDK calls against the scripted LLM server (a real subprocess over HTTP)."""
from __future__ import annotations

import asyncio
import gc
import json

import openai
import pytest
from openai.resources.chat.completions import AsyncCompletions, Completions
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import tracefix
from tracefix import semconv as sc
from tracefix.demo.team import system_prompt, tools_for

from genai_schema import check_inference_span
from instr_support import by_name

MODEL = "bank-agent"
WORKER_MESSAGES = [{"role": "system", "content": system_prompt("AccountAgent")},
                   {"role": "user", "content": "AccountAgent: look up customer Alice Chen and get her accounts."}]


@pytest.fixture
def client(sim_url):
    c = openai.OpenAI(base_url=sim_url, api_key="sim-key", max_retries=0)
    yield c
    c.close()


@pytest.fixture
def aclient(sim_url):
    return openai.AsyncOpenAI(base_url=sim_url, api_key="sim-key", max_retries=0)


def only_chat_span(exporter):
    chats = by_name(exporter, "chat ")
    assert len(chats) == 1, [s.name for s in exporter.get_finished_spans()]
    return chats[0]


def test_chat_completion_span_has_genai_attributes_and_full_content(spans, client):
    with tracefix.session("one-call", session_id="s-one"):
        response = client.chat.completions.create(model=MODEL, messages=WORKER_MESSAGES, tools=tools_for("AccountAgent"),
                                                  temperature=0.2, seed=3)
    span = only_chat_span(spans)
    a = span.attributes
    assert span.name == f"chat {MODEL}" and span.kind is SpanKind.CLIENT
    assert a[sc.GEN_AI_OPERATION_NAME] == "chat" and a[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert a[sc.GEN_AI_REQUEST_MODEL] == MODEL and a[sc.GEN_AI_RESPONSE_MODEL] == response.model
    assert a[sc.GEN_AI_RESPONSE_ID] == response.id
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] == response.usage.prompt_tokens
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == response.usage.completion_tokens
    assert a[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.2 and a[sc.GEN_AI_REQUEST_SEED] == 3
    assert json.loads(a[sc.REQUEST_PARAMS]) == {"temperature": 0.2, "seed": 3}
    check_inference_span(a)
    assert json.loads(a[sc.GEN_AI_INPUT_MESSAGES]) == [
        {"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]} for m in WORKER_MESSAGES]
    assert json.loads(a[sc.GEN_AI_TOOL_DEFINITIONS]) == tools_for("AccountAgent")
    out = json.loads(a[sc.GEN_AI_OUTPUT_MESSAGES])
    call = response.choices[0].message.tool_calls[0]
    assert out[0]["finish_reason"] == "tool_call"
    assert out[0]["parts"][-1] == {"type": "tool_call", "id": call.id, "name": call.function.name,
                                   "arguments": call.function.arguments}
    raw = json.loads(a[sc.RESPONSE_RAW])
    assert openai.types.chat.ChatCompletion.model_validate(raw) == response  # complete enough to replay
    assert a[sc.SESSION_ID] == a[sc.GEN_AI_CONVERSATION_ID] == "s-one" and a[sc.STEP] == 0
    assert a[sc.REQUEST_FINGERPRINT] == tracefix.fingerprints.fingerprint_request(MODEL, WORKER_MESSAGES,
                                                                                 tools_for("AccountAgent"))


def test_steps_number_llm_calls_and_tools_link_to_the_call_that_asked(spans, client):
    @tracefix.tool
    def lookup_customer(name: str) -> dict:
        return {"customer_id": "CUST-001", "name": name}

    with tracefix.session("linked"):
        with tracefix.agent("AccountAgent"):
            messages = list(WORKER_MESSAGES)
            for _ in range(2):
                r = client.chat.completions.create(model=MODEL, messages=messages, tools=tools_for("AccountAgent"))
                message = r.choices[0].message
                messages.append(message)  # the SDK object itself, as many apps do
                for call in message.tool_calls or []:
                    result = lookup_customer(**json.loads(call.function.arguments)) \
                        if call.function.name == "lookup_customer" else {"accounts": []}
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    chats = sorted(by_name(spans, "chat "), key=lambda s: s.attributes[sc.STEP])
    assert [c.attributes[sc.STEP] for c in chats] == [0, 1]
    first_call = json.loads(chats[0].attributes[sc.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][-1]
    (tool_span,) = by_name(spans, "execute_tool lookup_customer")
    assert tool_span.attributes[sc.GEN_AI_TOOL_CALL_ID] == first_call["id"]
    assert tool_span.attributes[sc.STEP] == 0
    assert tool_span.attributes[sc.GEN_AI_AGENT_NAME] == "AccountAgent"
    assert [c.attributes[sc.CALL_SEQ] for c in chats] == [0, 2] and tool_span.attributes[sc.CALL_SEQ] == 1
    # the SDK message object in the second request is recorded as plain JSON
    second_input = json.loads(chats[1].attributes[sc.GEN_AI_INPUT_MESSAGES])
    assert second_input[2]["parts"][-1] == first_call


def test_tool_calls_no_traced_tool_claims_stay_bounded_and_a_traced_one_still_links(spans, client):
    """An app whose tools are not wrapped with @tracefix.tool never claims the calls its
    model asks for: 300 such calls in one session keep at most MAX_PENDING_TOOL_CALLS, and
    a traced tool run after them still links to the call that asked for it."""
    from tracefix import context

    @tracefix.tool
    def lookup_customer(name: str) -> dict:
        return {"customer_id": "CUST-001", "name": name}

    calls = context.MAX_PENDING_TOOL_CALLS + 44
    with tracefix.session("untraced tools"):
        with tracefix.agent("AccountAgent"):
            for _ in range(calls):
                response = client.chat.completions.create(model=MODEL, messages=WORKER_MESSAGES,
                                                          tools=tools_for("AccountAgent"))
            asked = response.choices[0].message.tool_calls[-1]
            state = context.current_session()
            assert len(state.pending) == context.MAX_PENDING_TOOL_CALLS
            lookup_customer(**json.loads(asked.function.arguments))
    (tool_span,) = by_name(spans, "execute_tool lookup_customer")
    assert tool_span.attributes[sc.GEN_AI_TOOL_CALL_ID] == asked.id
    assert tool_span.attributes[sc.STEP] == calls - 1


def test_stream_span_records_the_accumulated_completion_and_final_usage(spans, client):
    plain = client.chat.completions.create(model=MODEL, messages=WORKER_MESSAGES, tools=tools_for("AccountAgent"))
    spans.clear()
    stream = client.chat.completions.create(model=MODEL, messages=WORKER_MESSAGES, tools=tools_for("AccountAgent"),
                                            stream=True, stream_options={"include_usage": True})
    assert isinstance(stream, openai.Stream)  # the proxy still looks like the SDK's stream
    chunks = list(stream)
    assert chunks[-1].usage is not None
    span = only_chat_span(spans)
    a = span.attributes
    assert a[sc.STREAM] is True
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == chunks[-1].usage.completion_tokens
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    raw = json.loads(a[sc.RESPONSE_RAW])
    assert raw["choices"][0]["message"]["tool_calls"] == \
        [tc.model_dump(mode="json", exclude_none=True) for tc in plain.choices[0].message.tool_calls]


def test_stream_span_ends_once_when_consumer_breaks_inside_with(spans, client):
    with client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hello"}],
                                        stream=True) as stream:
        for _ in stream:
            break
    span = only_chat_span(spans)
    assert span.end_time is not None
    stream.close()  # closing again must not end (or export) the span a second time
    assert len(by_name(spans, "chat ")) == 1


def test_stream_span_ends_once_when_consumer_abandons_it(spans, client):
    stream = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hello"}],
                                            stream=True)
    next(iter(stream))
    assert by_name(spans, "chat ") == []  # still open while the consumer holds it
    del stream
    gc.collect()
    span = only_chat_span(spans)
    assert span.attributes[sc.STREAM_ABANDONED] is True


def test_async_calls_and_async_streams_are_traced(spans, aclient):
    async def main():
        async with tracefix.session("async-llm", session_id="s-async-llm"):
            r = await aclient.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
            stream = await aclient.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                                           stream=True)
            assert isinstance(stream, openai.AsyncStream)
            text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            early = await aclient.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}],
                                                          stream=True)
            async with early:
                async for _ in early:
                    break
        await aclient.close()
        return r, text

    response, text = asyncio.run(main())
    assert text == response.choices[0].message.content
    chats = sorted(by_name(spans, "chat "), key=lambda s: s.attributes[sc.STEP])
    assert [c.attributes[sc.STEP] for c in chats] == [0, 1, 2]
    assert all(c.attributes[sc.SESSION_ID] == "s-async-llm" for c in chats)
    assert json.loads(chats[1].attributes[sc.GEN_AI_OUTPUT_MESSAGES])[0]["parts"] == [{"type": "text",
                                                                                      "content": text}]


def test_api_error_is_recorded_and_the_sdk_exception_reraised(spans, client):
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 404
    span = only_chat_span(spans)
    assert span.attributes[sc.ERROR_TYPE] == "NotFoundError"
    assert span.status.status_code.name == "ERROR"


def test_capture_off_records_no_content(client, monkeypatch):
    monkeypatch.setenv("TRACEFIX_CAPTURE_CONTENT", "0")
    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))
    try:
        with tracefix.session("private", inputs={"secret": "x"}, entrypoint="m:f"):
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "my pin is 1234"}])
    finally:
        handle.shutdown()
    span = only_chat_span(exporter)
    for key in (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES, sc.RESPONSE_RAW):
        assert key not in span.attributes
    assert span.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0  # metadata is still there
    root = by_name(exporter, "session ")[0]
    assert sc.INPUTS not in root.attributes and root.attributes[sc.REPLAYABLE] is False
    assert "1234" not in repr([s.attributes for s in exporter.get_finished_spans()])


def test_secrets_are_redacted_before_export_and_user_redactors_chain(client):
    exporter = InMemorySpanExporter()

    def drop_pins(key, value):
        return value.replace("PIN 4321", "PIN ****") if isinstance(value, str) else value

    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter), redact=[drop_pins])
    try:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "key sk-live1234567890abcdef, PIN 4321"}],
            extra_headers={"Authorization": "Bearer abc.def.ghi"}, user="Bearer tok-123456")
    finally:
        handle.shutdown()
    exported = repr(only_chat_span(exporter).attributes)
    assert "sk-live1234567890abcdef" not in exported and "PIN 4321" not in exported
    assert "tok-123456" not in exported and "abc.def.ghi" not in exported
    assert "[REDACTED]" in exported and "PIN ****" in exported


def test_oversized_payload_is_truncated_with_a_marker_and_session_not_replayable(client, caplog):
    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter), max_payload_bytes=2000)
    try:
        with tracefix.session("big", entrypoint="m:f", inputs={}):
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x" * 5000}])
    finally:
        handle.shutdown()
    span = only_chat_span(exporter)
    text = span.attributes[sc.GEN_AI_INPUT_MESSAGES]
    assert len(text.encode()) <= 2000 and "tracefix: truncated" in text
    assert span.attributes[sc.TRUNCATED] is True
    assert by_name(exporter, "session big")[0].attributes[sc.REPLAYABLE] is False
    assert "max_payload_bytes" in caplog.text


def test_uninstrument_restores_the_original_methods(client):
    originals = (Completions.__dict__["create"], AsyncCompletions.__dict__["create"])
    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))
    assert Completions.__dict__["create"] is not originals[0]
    assert tracefix.init() is handle  # idempotent
    handle.shutdown()
    assert (Completions.__dict__["create"], AsyncCompletions.__dict__["create"]) == originals
    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert exporter.get_finished_spans() == ()


def test_a_failure_inside_tracefix_never_breaks_the_call(spans, client):
    class Exploding:
        def snapshot(self):
            raise RuntimeError("snapshot bug")

        def restore(self, state):
            pass

    with tracefix.session("robust"):
        tracefix.track("bad", Exploding())
        r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content
    assert only_chat_span(spans).attributes[sc.GEN_AI_RESPONSE_ID] == r.id


def test_attaching_to_the_apps_provider_redacts_its_own_exporters_too(client):
    from opentelemetry.sdk.trace import TracerProvider

    app_exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(app_exporter))  # configured by the app, before tracefix
    handle = tracefix.init(tracer_provider=provider)
    try:
        with tracefix.session("attached", session_id="s-attached"):
            client.chat.completions.create(model=MODEL, messages=[
                {"role": "user", "content": "here is my key sk-proj-abcdefghijklmnop"}])
    finally:
        handle.shutdown()
    span = only_chat_span(app_exporter)
    assert span.attributes[sc.SESSION_ID] == "s-attached"
    assert "sk-proj-abcdefghijklmnop" not in span.attributes[sc.GEN_AI_INPUT_MESSAGES]


def test_with_raw_response_calls_are_recorded_too(spans, client):
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    completion = raw.parse()
    assert raw.status_code == 200
    assert only_chat_span(spans).attributes[sc.GEN_AI_RESPONSE_ID] == completion.id


def test_parse_and_the_stream_helper_are_traced_and_parse_replays_as_parsed(spans, client):
    from openai.types.chat import ParsedChatCompletion

    from tracefix.openai_chat import OpenAIChatParse

    parsed = client.chat.completions.parse(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    with client.chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": "hi"}]) as stream:
        final = stream.get_final_completion()
    chats = by_name(spans, "chat ")
    assert len(chats) == 2
    assert {json.loads(c.attributes[sc.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"] for c in chats} == \
        {parsed.choices[0].message.content, final.choices[0].message.content}
    raw = json.loads(chats[0].attributes[sc.RESPONSE_RAW])
    assert isinstance(OpenAIChatParse().rehydrate(raw, {}), ParsedChatCompletion)
