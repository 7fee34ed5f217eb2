"""A replayed stream is the recorded stream, event for event (issue 38, item 3).

An app that acts on events (prints each text delta, counts chunks, reads the usage chunk)
must see under replay exactly what it saw live: every Anthropic API event and every event
`messages.stream()` derives from them, every OpenAI chat chunk and every event of the
`chat.completions.stream()` helper, every OpenAI Responses event and every event of the
`responses.stream()` helper, in order, with the fields as the server sent them, a
usage chunk the server sent without `include_usage` included. Recorded live against a real
scripted provider server, replayed from the cassette built from the spans, sync and async."""
from __future__ import annotations

import asyncio
import json
import typing

import anthropic
import openai
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracefix
from tracefix import semconv as sc

from provider_server import ANSWER, ProviderServer
from test_stream_recording import THINKING_REQUEST, _follow_up, _record_then_replay, sdk_final_message


@pytest.fixture(scope="module")
def provider():
    server = ProviderServer()
    yield server
    server.stop()


def as_json(events: typing.Iterable) -> list[str]:
    """Each event as the SDK's object serializes (the fields set, in the SDK's own order)."""
    return [event.to_json(indent=None) for event in events]


async def as_json_async(events: typing.AsyncIterable) -> list[str]:
    return [event.to_json(indent=None) async for event in events]


def get_balance_tool():
    @tracefix.tool
    def get_balance(account_id: str) -> dict:
        return {"account_id": account_id, "balance": 120.5}
    return get_balance


def anthropic_turns(provider_url: str, helper: bool, is_async: bool) -> typing.Callable[[], dict]:
    """Two turns (thinking and a tool call, then thinking and a cited answer), each read event
    by event: through `messages.create(stream=True)`, or through the `messages.stream()` helper."""
    get_balance = get_balance_tool()
    first_messages: list = [{"role": "user", "content": "What is the balance of ACC-1?"}]

    def sync_run() -> dict:
        client = anthropic.Anthropic(base_url=provider_url, api_key="sk-ant-test", max_retries=0)
        seen, messages = [], first_messages
        for _ in range(2):
            if helper:
                with client.messages.stream(**THINKING_REQUEST, messages=messages) as stream:
                    seen.append(as_json(stream))
                    final = stream.get_final_message()
            else:
                events = list(client.messages.create(**THINKING_REQUEST, messages=messages, stream=True))
                seen.append(as_json(events))
                final = sdk_final_message(events)
            if final.stop_reason == "tool_use":
                use = next(block for block in final.content if block.type == "tool_use")
                messages = _follow_up(messages, final, get_balance(**use.input))
        return {"events": seen}

    async def async_turns() -> dict:
        client = anthropic.AsyncAnthropic(base_url=provider_url, api_key="sk-ant-test", max_retries=0)
        seen, messages = [], first_messages
        for _ in range(2):
            if helper:
                async with client.messages.stream(**THINKING_REQUEST, messages=messages) as stream:
                    seen.append(await as_json_async(stream))
                    final = await stream.get_final_message()
            else:
                stream = await client.messages.create(**THINKING_REQUEST, messages=messages, stream=True)
                events = [event async for event in stream]
                seen.append(as_json(events))
                final = sdk_final_message(events)
            if final.stop_reason == "tool_use":
                use = next(block for block in final.content if block.type == "tool_use")
                messages = _follow_up(messages, final, get_balance(**use.input))
        await client.close()
        return {"events": seen}

    run = (lambda: asyncio.run(async_turns())) if is_async else sync_run
    return tracefix.session(entrypoint="tests:agent_run")(run)


@pytest.mark.parametrize("helper", [False, True], ids=["create", "stream_helper"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_anthropic_stream_replays_event_for_event(provider, tmp_path, monkeypatch, helper, is_async):
    run = anthropic_turns(provider.url, helper, is_async)
    before = len(provider.requests)
    recorded, replayed, report, spans = _record_then_replay(run, tmp_path, monkeypatch, "s-anthropic-events")
    assert len(provider.requests) - before == 2  # live once; the replay sent nothing
    assert report["counts"]["llm_cassette"] == 2 and report["counts"].get("llm_live", 0) == 0
    first, second = recorded["events"]
    kinds = [json.loads(event)["type"] for event in second]
    # the server streams text and thinking in pieces: more than one delta of each
    assert kinds.count("content_block_delta") >= 6 and "ping" not in kinds
    if helper:
        assert {"text", "thinking", "signature", "citation"} <= set(kinds)  # the helper's own events
    assert replayed["events"] == recorded["events"]  # event for event, field for field


def openai_chat(provider_url: str, helper: bool, is_async: bool) -> typing.Callable[[], dict]:
    """One streamed chat completion read chunk by chunk (`create(stream=True)`), or event by
    event through `chat.completions.stream()`, without `include_usage`."""
    request = {"model": "gpt-test", "messages": [{"role": "user", "content": "Balance of ACC-1?"}]}

    def sync_run() -> dict:
        client = openai.OpenAI(base_url=provider_url, api_key="k", max_retries=0)
        if helper:
            with client.chat.completions.stream(**request) as stream:
                events = as_json(stream)
                final = stream.get_final_completion()
        else:
            with client.chat.completions.create(**request, stream=True) as stream:
                events = as_json(stream)
            final = None
        return {"events": events, "final": final and final.to_json(indent=None)}

    async def async_run() -> dict:
        client = openai.AsyncOpenAI(base_url=provider_url, api_key="k", max_retries=0)
        if helper:
            async with client.chat.completions.stream(**request) as stream:
                events = await as_json_async(stream)
                final = await stream.get_final_completion()
        else:
            async with await client.chat.completions.create(**request, stream=True) as stream:
                events = await as_json_async(stream)
            final = None
        await client.close()
        return {"events": events, "final": final and final.to_json(indent=None)}

    run = (lambda: asyncio.run(async_run())) if is_async else sync_run
    return tracefix.session(entrypoint="tests:agent_run")(run)


@pytest.mark.parametrize("helper", [False, True], ids=["create", "stream_helper"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_openai_chat_stream_replays_chunk_for_chunk_with_an_unasked_usage_chunk(
        provider, tmp_path, monkeypatch, helper, is_async):
    run = openai_chat(provider.url, helper, is_async)
    before = len(provider.requests)
    recorded, replayed, report, _ = _record_then_replay(run, tmp_path, monkeypatch, "s-chat-events")
    assert len(provider.requests) - before == 1 and "stream_options" not in provider.requests[-1][1]
    assert report["counts"]["llm_cassette"] == 1
    events = [json.loads(event) for event in recorded["events"]]
    chunks = [e.get("chunk", e) for e in events]  # the helper's chunk events carry the chunk
    assert any(c.get("usage") for c in chunks) and sum(1 for c in chunks if c.get("choices")) >= 6
    if helper:
        assert json.loads(recorded["final"])["usage"]["completion_tokens"] == len(ANSWER.split(" "))
    assert replayed == recorded  # chunk for chunk (and the helper's events); the usage chunk too


def test_a_stream_over_the_payload_limit_still_replays_from_its_response(provider, tmp_path, monkeypatch):
    """Events that would not fit TRACEFIX_MAX_PAYLOAD_BYTES are left out, never cut: the
    session stays replayable and the replay streams the recorded response in its own chunks."""
    def chat() -> None:  # returns nothing: only the LLM span's attributes meet the limit
        client = openai.OpenAI(base_url=provider.url, api_key="k", max_retries=0)
        with client.chat.completions.stream(model="gpt-test", messages=[{"role": "user", "content": "Hi"}]) as s:
            s.until_done()

    def record() -> typing.Any:
        exporter = InMemorySpanExporter()
        handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))
        try:
            tracefix.session(entrypoint="tests:agent_run")(chat)()
        finally:
            handle.shutdown()
        spans = exporter.get_finished_spans()
        return next(s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == "chat"), spans

    whole, _ = record()
    stream_bytes = len(whole.attributes[sc.RESPONSE_STREAM].encode())
    raw_bytes = len(whole.attributes[sc.RESPONSE_RAW].encode())
    assert stream_bytes > raw_bytes + 200
    monkeypatch.setenv("TRACEFIX_MAX_PAYLOAD_BYTES", str(stream_bytes - 100))
    cut, spans = record()
    assert cut.attributes[sc.RESPONSE_RAW] == whole.attributes[sc.RESPONSE_RAW]
    assert sc.RESPONSE_STREAM not in cut.attributes and not any(s.attributes.get(sc.TRUNCATED) for s in spans)


def test_the_workers_cassette_carries_the_recorded_events(provider):
    """`tracefix replay` builds its cassette from the stored spans (replay/cassette.py): a
    streamed step's events go in it, as the controller serves them."""
    from tracefix.replay.cassette import build

    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))
    try:
        openai_chat(provider.url, helper=False, is_async=False)()
    finally:
        handle.shutdown()
    span = next(s for s in exporter.get_finished_spans() if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == "chat")
    span_id = format(span.context.span_id, "016x")
    stored = {"span_id": span_id, "kind": "llm", "step": 0, "attributes": json.dumps(dict(span.attributes))}
    doc = {"session_id": "s-stored", "entrypoint": "tests:agent_run", "inputs": {},
           "steps": [{"index": 0, "kind": "llm", "span_id": span_id, "agent": None, "tool_calls": []}]}
    (step,) = build(doc, [stored])["steps"]
    assert step["stream"] == json.loads(span.attributes[sc.RESPONSE_STREAM])
    assert len(step["stream"]) == 7 and step["stream"][-1]["usage"]["completion_tokens"] == 4  # role, 4 words, stop, usage


def openai_responses(provider_url: str, helper: bool, is_async: bool) -> typing.Callable[[], dict]:
    """One streamed Response read event by event (`responses.create(stream=True)`), or through
    the `responses.stream()` helper, whose events the app may act on one by one."""
    request = {"model": "gpt-test", "input": "Balance of ACC-1?"}

    def sync_run() -> dict:
        client = openai.OpenAI(base_url=provider_url, api_key="k", max_retries=0)
        if helper:
            with client.responses.stream(**request) as stream:
                events = as_json(stream)
                final = stream.get_final_response().to_json(indent=None)
        else:
            with client.responses.create(**request, stream=True) as stream:
                events, final = as_json(stream), None
        return {"events": events, "final": final}

    async def async_run() -> dict:
        client = openai.AsyncOpenAI(base_url=provider_url, api_key="k", max_retries=0)
        if helper:
            async with client.responses.stream(**request) as stream:
                events = await as_json_async(stream)
                final = (await stream.get_final_response()).to_json(indent=None)
        else:
            async with await client.responses.create(**request, stream=True) as stream:
                events, final = await as_json_async(stream), None
        await client.close()
        return {"events": events, "final": final}

    run = (lambda: asyncio.run(async_run())) if is_async else sync_run
    return tracefix.session(entrypoint="tests:agent_run")(run)


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # the SDK's ParsedResponse, live and replayed
@pytest.mark.parametrize("helper", [False, True], ids=["create", "stream_helper"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_openai_responses_stream_replays_event_for_event(provider, tmp_path, monkeypatch, helper, is_async):
    run = openai_responses(provider.url, helper, is_async)
    before = len(provider.requests)
    recorded, replayed, report, _ = _record_then_replay(run, tmp_path, monkeypatch, "s-responses-events")
    assert len(provider.requests) - before == 1  # live once; the replay sent nothing
    assert report["counts"]["llm_cassette"] == 1 and report["counts"].get("llm_live", 0) == 0
    kinds = [json.loads(event)["type"] for event in recorded["events"]]
    assert kinds.count("response.output_text.delta") >= 2, kinds  # the server streams the text in pieces
    assert replayed == recorded  # event for event, field for field (sequence numbers included)
