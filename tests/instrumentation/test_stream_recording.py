"""Provider streams are recorded whole and replay exactly.

The recorders fold every event, delta type and field the installed SDKs define: each
"every_*" stream below exercises all of them, a test checks it against the SDK's own type
unions and fields (it fails when an SDK release adds one, until recorder and stream cover
it), and the SDK's own accumulator is the oracle for what the recorder makes of it.
Then whole turns go through real servers: recorded live, replayed from the cassette, and
the SDK's accumulated message must be byte for byte what it was live."""
from __future__ import annotations

import json
import typing

import anthropic
import openai
import pytest
from anthropic.lib.streaming import MessageStream
from openai.lib.streaming.chat import ChatCompletionStreamState
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracefix
from tracefix import semconv as sc
from tracefix.anthropic_messages import AnthropicMessages
from tracefix.llm import rehydrate_model, rehydrate_union
from tracefix.openai_chat import OpenAIChat
from tracefix.openai_responses import OpenAIResponses

from instr_support import cassette_from_spans, replay_in_this_process
from provider_server import ProviderServer


def union_members(union: typing.Any) -> tuple:
    """The classes of an SDK union alias (``Annotated[Union[...], discriminator]``)."""
    if typing.get_origin(union) is typing.Annotated:
        union = typing.get_args(union)[0]
    return typing.get_args(union)


def type_literals(union: typing.Any) -> set[str]:
    """The ``type`` values that tell the members of an SDK union apart."""
    return {value for member in union_members(union)
            for value in typing.get_args(member.model_fields["type"].annotation)}


def model_fields(model: typing.Any) -> set[str]:
    return set(model.model_fields)


# --- Anthropic ----------------------------------------------------------------------------

CITATION = {"type": "char_location", "cited_text": "120.50", "document_index": 0, "document_title": "statement",
            "start_char_index": 9, "end_char_index": 15, "file_id": None}


def _delta(index: int, delta: dict) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": delta}


EVERY_ANTHROPIC_EVENT: list[dict] = [
    {"type": "message_start", "message": {
        "id": "msg_every", "type": "message", "role": "assistant", "model": "claude-x", "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 40, "output_tokens": 1, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
    _delta(0, {"type": "thinking_delta", "thinking": "The balance tool "}),
    _delta(0, {"type": "thinking_delta", "thinking": "answers this."}),
    _delta(0, {"type": "signature_delta", "signature": "EqQBCkYIARgCsig"}),
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "EmwKAhgB"}},
    {"type": "content_block_stop", "index": 1},
    {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
    _delta(2, {"type": "citations_delta", "citation": CITATION}),
    _delta(2, {"type": "text_delta", "text": "Balance: "}),
    _delta(2, {"type": "text_delta", "text": "120.50"}),
    _delta(2, {"type": "citations_delta", "citation": {**CITATION, "start_char_index": 0}}),
    {"type": "content_block_stop", "index": 2},
    {"type": "content_block_start", "index": 3, "content_block": {"type": "server_tool_use", "id": "srvtoolu_1",
                                                                  "name": "web_search", "input": {}}},
    _delta(3, {"type": "input_json_delta", "partial_json": '{"query": "ba'}),
    _delta(3, {"type": "input_json_delta", "partial_json": 'lance"}'}),
    {"type": "content_block_stop", "index": 3},
    {"type": "content_block_start", "index": 4, "content_block": {
        "type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "title": "t", "url": "https://example.invalid",
                     "encrypted_content": "enc", "page_age": None}]}},
    {"type": "content_block_stop", "index": 4},
    {"type": "content_block_start", "index": 5, "content_block": {"type": "tool_use", "id": "toolu_1",
                                                                  "name": "get_balance", "input": {}}},
    _delta(5, {"type": "input_json_delta", "partial_json": ""}),
    _delta(5, {"type": "input_json_delta", "partial_json": '{"account_id": "ACC-1", "n": [1, 2.5]}'}),
    {"type": "content_block_stop", "index": 5},
    {"type": "message_delta",
     "delta": {"stop_reason": "tool_use", "stop_sequence": None,
               "stop_details": {"type": "refusal", "category": None, "explanation": None},
               "container": {"id": "container_1", "expires_at": "2026-01-01T00:00:00Z", "skills": None}},
     "usage": {"output_tokens": 77, "input_tokens": 41, "cache_creation_input_tokens": 3,
               "cache_read_input_tokens": 5, "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0},
               "output_tokens_details": {"thinking_tokens": 12}}},
    {"type": "message_stop"},
]


def anthropic_events(events: list[dict]) -> list:
    adapter = __import__("pydantic").TypeAdapter(anthropic.types.RawMessageStreamEvent)
    return [adapter.validate_python(e) for e in events]


class _EventList:
    """A raw event stream for the SDK's MessageStream (which reads only iteration)."""

    def __init__(self, events: list) -> None:
        self._events = iter(events)
        self.response = None

    def __iter__(self):
        return self._events

    def __next__(self):
        return next(self._events)


def sdk_final_message(events: typing.Iterable) -> anthropic.types.Message:
    """What the SDK's own MessageStream accumulates from `events`."""
    return MessageStream(events if hasattr(events, "__next__") else _EventList(list(events)),
                         anthropic.NOT_GIVEN).get_final_message()


def as_message_json(message: typing.Any) -> str:
    """A Message (or the SDK's ParsedMessage) as canonical JSON of the plain Message type."""
    data = message if isinstance(message, dict) else message.model_dump(mode="json")
    for block in data.get("content") or []:
        block.pop("parsed_output", None)  # the stream helper's own addition
    return anthropic.types.Message.model_validate(data).model_dump_json()


def test_the_anthropic_exercise_covers_every_event_delta_and_field_the_sdk_defines():
    from anthropic.types import raw_message_delta_event

    events = EVERY_ANTHROPIC_EVENT
    assert {e["type"] for e in events} == type_literals(anthropic.types.RawMessageStreamEvent)
    deltas = {e["delta"]["type"] for e in events if e["type"] == "content_block_delta"}
    assert deltas == type_literals(anthropic.types.RawContentBlockDelta), \
        "the SDK defines a stream delta type the recorder is not exercised with"
    message_delta = next(e for e in events if e["type"] == "message_delta")
    assert set(message_delta["delta"]) == model_fields(raw_message_delta_event.Delta)
    assert set(message_delta["usage"]) == model_fields(anthropic.types.MessageDeltaUsage)


def test_anthropic_recorder_folds_every_delta_as_the_sdk_does():
    events = anthropic_events(EVERY_ANTHROPIC_EVENT)
    accumulator = AnthropicMessages().new_accumulator()
    for event in events:
        accumulator.add(event)
    raw = accumulator.raw()
    assert as_message_json(raw) == as_message_json(sdk_final_message(events))
    thinking = raw["content"][0]
    assert thinking == {"type": "thinking", "thinking": "The balance tool answers this.",
                        "signature": "EqQBCkYIARgCsig"}


def test_anthropic_replay_stream_folds_back_to_the_recorded_message_exactly():
    events = anthropic_events(EVERY_ANTHROPIC_EVENT)
    live = sdk_final_message(events)
    accumulator = AnthropicMessages().new_accumulator()
    for event in events:
        accumulator.add(event)
    for is_async in (False, True):
        replayed = AnthropicMessages().fake_stream(accumulator.raw(), {}, is_async=is_async)
        if is_async:
            import asyncio

            async def collect():
                return [event async for event in replayed]
            replayed = asyncio.run(collect())
        assert sdk_final_message(replayed).to_json() == live.to_json()


# --- OpenAI chat completions --------------------------------------------------------------

HEAD = {"id": "chatcmpl-every", "object": "chat.completion.chunk", "created": 1700000000, "model": "gpt-x",
        "system_fingerprint": "fp_1", "service_tier": "default"}


def _token(text: str) -> dict:
    return {"token": text, "bytes": list(text.encode()), "logprob": -0.25,
            "top_logprobs": [{"token": text, "bytes": list(text.encode()), "logprob": -0.25}]}


def _chunk(*choices: dict, **top: typing.Any) -> dict:
    return {**HEAD, "choices": list(choices), **top}


def _choice(delta: dict, index: int = 0, **fields: typing.Any) -> dict:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": None, **fields}


ANNOTATION = {"type": "url_citation", "url_citation": {"start_index": 0, "end_index": 5, "title": "source",
                                                       "url": "https://example.invalid/a"}}
MODERATION = {"input": {"type": "error", "code": "unavailable", "message": "not moderated"},
              "output": {"type": "error", "code": "unavailable", "message": "not moderated"}}

EVERY_CHAT_CHUNK: list[dict] = [
    _chunk(_choice({"role": "assistant", "content": ""}, provider_choice_field="first"),
           obfuscation="xyz", provider_field="kept"),
    _chunk(_choice({"content": "Hello"}, logprobs={"content": [_token("Hello")], "refusal": None})),
    _chunk(_choice({"content": " there", "reasoning_content": "think"},
                   logprobs={"content": [_token(" there")], "refusal": None})),
    _chunk(_choice({"reasoning_content": "ing", "annotations": [ANNOTATION]})),
    _chunk(_choice({"refusal": "I can"}, logprobs={"content": None, "refusal": [_token("I can")]})),
    _chunk(_choice({"refusal": "not."}, logprobs={"content": None, "refusal": [_token("not.")]})),
    _chunk(_choice({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                    "function": {"name": "get_balance", "arguments": ""}}]})),
    _chunk(_choice({"tool_calls": [{"index": 0, "function": {"arguments": '{"account_id": '}}]})),
    _chunk(_choice({"tool_calls": [{"index": 0, "function": {"arguments": '"ACC-1"}'}},
                                   {"index": 1, "id": "call_2", "type": "function",
                                    "function": {"name": "get_accounts", "arguments": "{}"}}]})),
    _chunk(_choice({"function_call": {"name": "legacy_fn", "arguments": ""}})),
    _chunk(_choice({"function_call": {"arguments": '{"a": 1}'}})),
    _chunk(_choice({"audio": {"id": "audio_1", "transcript": "Hel", "data": "AAA", "expires_at": 1700003600}})),
    _chunk(_choice({"audio": {"transcript": "lo", "data": "BBB"}})),
    _chunk(_choice({"role": "assistant", "content": "second choice"}, index=1)),
    _chunk(_choice({}, finish_reason="tool_calls"), _choice({}, index=1, finish_reason="stop")),
    _chunk(moderation=MODERATION),
    _chunk(usage={"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}),
]


def chat_chunks(chunks: list[dict]) -> list:
    return [openai.types.chat.ChatCompletionChunk.model_validate(c) for c in chunks]


def sdk_final_completion(chunks: typing.Iterable) -> typing.Any:
    state = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(chunk)
    return state.get_final_completion()


def _strip_stream_helper_fields(value: typing.Any) -> typing.Any:
    """The SDK's stream helper adds parsed / parsed_arguments and keeps each tool call's
    stream index: not part of a ChatCompletion."""
    if isinstance(value, dict):
        return {k: _strip_stream_helper_fields(v) for k, v in value.items()
                if k not in ("parsed", "parsed_arguments") and not (k == "index" and "function" in value)}
    if isinstance(value, list):
        return [_strip_stream_helper_fields(v) for v in value]
    return value


def as_completion_json(completion: typing.Any) -> str:
    data = completion if isinstance(completion, dict) else completion.model_dump(mode="json")
    return openai.types.chat.ChatCompletion.model_validate(_strip_stream_helper_fields(data)).model_dump_json()


def _fields_set(chunks: list[dict], path: tuple[str, ...]) -> set[str]:
    """Every key the exercise sets at `path` (e.g. ("choices", "delta"))."""
    level: list = chunks
    for key in path:
        nested = []
        for item in level:
            value = item.get(key)
            nested.extend(value if isinstance(value, list) else [value] if isinstance(value, dict) else [])
        level = nested
    return {k for item in level for k in item}


def test_the_chat_exercise_covers_every_chunk_choice_and_delta_field_the_sdk_defines():
    from openai.types.chat import chat_completion_chunk as m

    chunks = EVERY_CHAT_CHUNK
    assert model_fields(m.ChatCompletionChunk) <= _fields_set([{"c": chunks}], ("c",))
    assert model_fields(m.Choice) <= _fields_set(chunks, ("choices",))
    assert model_fields(m.ChoiceDelta) <= _fields_set(chunks, ("choices", "delta")), \
        "the SDK defines a delta field the recorder is not exercised with"
    assert model_fields(m.ChoiceLogprobs) <= _fields_set(chunks, ("choices", "logprobs"))
    assert model_fields(m.ChoiceDeltaToolCall) <= _fields_set(chunks, ("choices", "delta", "tool_calls"))
    assert model_fields(m.ChoiceDeltaToolCallFunction) <= _fields_set(chunks, ("choices", "delta", "tool_calls",
                                                                              "function"))
    assert model_fields(m.ChoiceDeltaFunctionCall) <= _fields_set(chunks, ("choices", "delta", "function_call"))
    assert model_fields(m.ChoiceDeltaAudio) <= _fields_set(chunks, ("choices", "delta", "audio"))


def test_chat_recorder_folds_every_field_as_the_sdk_stream_state_does():
    chunks = chat_chunks(EVERY_CHAT_CHUNK)
    accumulator = OpenAIChat().new_accumulator()
    for chunk in chunks:
        accumulator.add(chunk)
    raw = accumulator.raw()
    assert as_completion_json(raw) == as_completion_json(sdk_final_completion(chunks))
    message = raw["choices"][0]["message"]
    assert message["annotations"] == [ANNOTATION] and message["reasoning_content"] == "thinking"
    assert message["function_call"] == {"name": "legacy_fn", "arguments": '{"a": 1}'}
    assert [t["token"] for t in raw["choices"][0]["logprobs"]["content"]] == ["Hello", " there"]


def test_chat_replay_stream_folds_back_to_the_recorded_completion_exactly():
    chunks = chat_chunks(EVERY_CHAT_CHUNK)
    live = sdk_final_completion(chunks)
    accumulator = OpenAIChat().new_accumulator()
    for chunk in chunks:
        accumulator.add(chunk)
    replayed = OpenAIChat().fake_stream(accumulator.raw(), {"stream_options": {"include_usage": True}}, False)
    assert sdk_final_completion(replayed).to_json() == live.to_json()


# --- whole turns through real servers: record, then replay from the cassette ---------------

def _record_then_replay(run, tmp_path, monkeypatch, session_id: str) -> tuple[typing.Any, typing.Any, dict, list]:
    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))
    try:
        recorded = run()
    finally:
        handle.shutdown()
    spans = exporter.get_finished_spans()
    cassette = cassette_from_spans(spans)
    replay_in_this_process(tmp_path, cassette, session_id, monkeypatch)
    handle = tracefix.init(span_processor=SimpleSpanProcessor(InMemorySpanExporter()))
    try:
        assert tracefix.replay_active()
        replayed = run()
    finally:
        handle.shutdown()
    return recorded, replayed, json.loads((tmp_path / "report.json").read_text()), spans


@pytest.fixture(scope="module")
def provider():
    server = ProviderServer()
    yield server
    server.stop()


def test_anthropic_thinking_and_tool_use_turn_replays_byte_identical(provider, tmp_path, monkeypatch):
    """Extended thinking streamed: the signed thinking block goes back to the API in the
    next turn, so a replay must hand the app exactly the blocks it got live."""
    tools = [{"name": "get_balance", "description": "balance of an account",
              "input_schema": {"type": "object", "properties": {"account_id": {"type": "string"}}}}]

    @tracefix.tool
    def get_balance(account_id: str) -> dict:
        return {"account_id": account_id, "balance": 120.5}

    def agent_run() -> dict:
        client = anthropic.Anthropic(base_url=provider.url, api_key="sk-ant-test", max_retries=0)
        messages: list = [{"role": "user", "content": "What is the balance of ACC-1?"}]
        request = {"model": "claude-test", "max_tokens": 2048, "tools": tools,
                   "thinking": {"type": "enabled", "budget_tokens": 1024}}
        first = sdk_final_message(client.messages.create(**request, messages=messages, stream=True))
        use = next(block for block in first.content if block.type == "tool_use")
        result = get_balance(**use.input)
        messages += [{"role": "assistant", "content": [block.to_dict() for block in first.content]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                   "content": json.dumps(result)}]}]
        with client.messages.create(**request, messages=messages, stream=True) as stream:
            second = sdk_final_message(stream)
        return {"messages": [first.to_json(indent=None), second.to_json(indent=None)]}

    run = tracefix.session(entrypoint="tests:agent_run")(agent_run)
    served_before = len(provider.requests)
    recorded, replayed, report, spans = _record_then_replay(run, tmp_path, monkeypatch, "s-thinking-replay")
    live_requests = len(provider.requests) - served_before
    first = json.loads(recorded["messages"][0])
    assert [b["type"] for b in first["content"]] == ["thinking", "redacted_thinking", "tool_use"]
    assert first["content"][0]["signature"] and first["content"][0]["thinking"]
    answer = json.loads(recorded["messages"][1])["content"]
    assert [b["type"] for b in answer] == ["thinking", "redacted_thinking", "text"] and answer[2]["citations"]
    assert replayed == recorded  # byte for byte, both turns
    assert live_requests == 2  # the replay reached no server: the second request matched its recording
    assert report["counts"]["llm_cassette"] == 2 and report["counts"].get("llm_live", 0) == 0
    raw = json.loads(next(s for s in spans if s.attributes.get(sc.STEP) == 0
                          and s.attributes.get(sc.RESPONSE_RAW)).attributes[sc.RESPONSE_RAW])
    assert raw["content"][0]["signature"] == first["content"][0]["signature"]


def test_openai_chat_stream_with_logprobs_annotations_and_function_call_replays_byte_identical(
        sim_url, tmp_path, monkeypatch):
    from instr_support import sim_requests
    from tracefix.demo.team import system_prompt, tools_for

    messages = [{"role": "system", "content": system_prompt("AccountAgent")},
                {"role": "user", "content": "AccountAgent: look up customer Alice Chen and get her accounts."}]
    functions = [tool["function"] for tool in tools_for("AccountAgent")]
    requests = [
        {"messages": [{"role": "user", "content": "Say hello."}], "logprobs": True, "top_logprobs": 2,
         "web_search_options": {}, "stream_options": {"include_usage": True}},
        {"messages": messages, "functions": functions},
        {"messages": messages, "tools": tools_for("AccountAgent"), "logprobs": True},
    ]

    def agent_run() -> dict:
        client = openai.OpenAI(base_url=sim_url, api_key="k", max_retries=0)
        finals = []
        for request in requests:
            with client.chat.completions.create(model="bank-agent", stream=True, **request) as stream:
                finals.append(sdk_final_completion(stream).to_json(indent=None))
        # the SDK's stream helper reads the raw stream's HTTP response: a replay has one too
        with client.chat.completions.stream(model="bank-agent", **requests[0]) as stream:
            finals.append(stream.get_final_completion().to_json(indent=None))
        return {"completions": finals}

    run = tracefix.session(entrypoint="tests:agent_run")(agent_run)
    before = sim_requests(sim_url)
    recorded, replayed, report, _ = _record_then_replay(run, tmp_path, monkeypatch, "s-chat-stream-replay")
    assert sim_requests(sim_url) - before == len(requests) + 1  # live once; the replay never reached the server
    hello, legacy, tools, _ = (json.loads(c)["choices"][0] for c in recorded["completions"])
    assert hello["logprobs"]["content"] and hello["message"]["annotations"][0]["type"] == "url_citation"
    assert legacy["message"]["function_call"]["name"] == "lookup_customer"
    assert tools["message"]["tool_calls"]
    assert replayed == recorded  # byte for byte
    assert report["counts"]["llm_cassette"] == len(requests) + 1


# --- OpenAI Responses -----------------------------------------------------------------------

def responses_events(events: list[tuple[str, dict]]) -> list:
    """As the SDK builds them from the wire: leniently (a scripted response lacks fields a
    real one has)."""
    return [rehydrate_union(openai.types.responses.ResponseStreamEvent, payload) for _, payload in events]


def sdk_final_response(events: typing.Iterable) -> tuple[typing.Any, list]:
    """The SDK's stream helper over `events`: its final Response and the events it yielded."""
    from openai.lib.streaming.responses import ResponseStream

    raw_stream = events if hasattr(events, "__next__") else _EventList(list(events))
    stream = ResponseStream(raw_stream=raw_stream, text_format=openai.omit, input_tools=openai.omit,
                            starting_after=None)
    seen = list(stream)
    return stream.get_final_response(), seen


def as_response_json(response: typing.Any) -> str:
    data = response if isinstance(response, dict) else response.model_dump(mode="json")
    response = rehydrate_model(openai.types.responses.Response, _strip_stream_helper_fields(data))
    return json.dumps(response.model_dump(mode="json", warnings=False), sort_keys=True)


def _server_events(**body: typing.Any) -> list[tuple[str, dict]]:
    from provider_server import openai_response, openai_response_events

    return openai_response_events(openai_response({"model": "gpt-test", **body}))


REASONING_TOOL_TURN = {"reasoning": {"effort": "low"}, "tools": [{"type": "function", "name": "get_balance",
                                                                  "parameters": {"type": "object"}}]}


def test_every_responses_event_type_the_sdk_defines_is_folded_or_known_to_need_no_fold():
    from tracefix.openai_responses import FOLDED_EVENTS, UNFOLDED_EVENTS

    assert not FOLDED_EVENTS & UNFOLDED_EVENTS
    unknown = type_literals(openai.types.responses.ResponseStreamEvent) - FOLDED_EVENTS - UNFOLDED_EVENTS
    assert not unknown, f"Responses stream events the recorder does not classify: {sorted(unknown)}"


@pytest.mark.parametrize("body", [REASONING_TOOL_TURN, {"reasoning": {"effort": "low"}}], ids=["tool", "text"])
def test_responses_recorder_rebuilds_output_the_final_event_leaves_out_and_replays_it_exactly(body):
    """The final event may carry no `output` (the SDK's helper then takes the items'
    done events): the record must not come out empty."""
    events = _server_events(**body)
    name, completed = events[-1]
    without_output = [*events[:-1], (name, {**completed, "response": {
        k: v for k, v in completed["response"].items() if k != "output"}})]
    live, live_events = sdk_final_response(responses_events(events))
    for stream in (events, without_output):
        accumulator = OpenAIResponses().new_accumulator()
        for event in responses_events(stream):
            accumulator.add(event)
        raw = accumulator.raw()
        assert as_response_json(raw) == as_response_json(live)
        replayed, replayed_events = sdk_final_response(OpenAIResponses().fake_stream(raw, {}, is_async=False))
        assert replayed.to_json() == live.to_json()
        assert {e.type for e in replayed_events} == {e.type for e in live_events}


def test_responses_recorder_keeps_what_an_abandoned_stream_got():
    events = responses_events(_server_events(reasoning={"effort": "low"}))
    cut = next(i for i, e in enumerate(events) if e.type == "response.output_text.done")  # mid message
    accumulator = OpenAIResponses().new_accumulator()
    for event in events[:cut]:
        accumulator.add(event)
    reasoning, message = accumulator.raw()["output"]
    assert reasoning["summary"][0]["text"] and reasoning["encrypted_content"]
    text = message["content"][0]
    assert text["text"] == "The balance is 120.50." and text["annotations"][0]["type"] == "url_citation"


def test_openai_responses_reasoning_turn_replays_byte_identical(provider, tmp_path, monkeypatch):
    tools = REASONING_TOOL_TURN["tools"]

    @tracefix.tool
    def get_balance(account_id: str) -> dict:
        return {"account_id": account_id, "balance": 120.5}

    def agent_run() -> dict:
        client = openai.OpenAI(base_url=f"{provider.url}/v1", api_key="k", max_retries=0)
        items: list = [{"role": "user", "content": "Balance of ACC-1?"}]
        finals, deltas = [], []
        for _ in range(2):
            with client.responses.stream(model="gpt-test", input=items, tools=tools,
                                         reasoning={"effort": "low"}) as stream:
                deltas += [e.delta for e in stream if e.type.endswith(".delta")]
                final = stream.get_final_response()
            finals.append(final.to_json(indent=None))
            items += [item.to_dict() for item in final.output]
            for call in (item for item in final.output if item.type == "function_call"):
                items.append({"type": "function_call_output", "call_id": call.call_id,
                              "output": json.dumps(get_balance(**json.loads(call.arguments)))})
        return {"responses": finals, "deltas": "".join(deltas)}

    run = tracefix.session(entrypoint="tests:agent_run")(agent_run)
    served_before = len(provider.requests)
    recorded, replayed, report, _ = _record_then_replay(run, tmp_path, monkeypatch, "s-responses-replay")
    assert len(provider.requests) - served_before == 2  # the replay reached no server
    first, second = (json.loads(r) for r in recorded["responses"])
    assert [i["type"] for i in first["output"]] == ["reasoning", "function_call"]
    assert first["output"][0]["encrypted_content"] and second["output"][1]["content"][0]["annotations"]
    assert replayed == recorded  # final responses byte for byte, and the same deltas
    assert report["counts"]["llm_cassette"] == 2


def test_streamed_calls_through_raw_and_streaming_response_are_recorded_and_replayed(sim_url, tmp_path,
                                                                                     monkeypatch):
    """The stream of `.with_streaming_response` / `.with_raw_response` comes out of
    parse(): it is recorded as the app reads it, and replayed the same way."""
    import asyncio

    request = {"model": "bank-agent", "messages": [{"role": "user", "content": "Say hello."}], "stream": True,
               "logprobs": True}

    def agent_run() -> dict:
        client = openai.OpenAI(base_url=sim_url, api_key="k", max_retries=0)
        finals = []
        with client.chat.completions.with_streaming_response.create(**request) as response:
            finals.append(sdk_final_completion(response.parse()).to_json(indent=None))
        raw = client.chat.completions.with_raw_response.create(**request)
        finals.append(sdk_final_completion(raw.parse()).to_json(indent=None))

        async def streamed_async() -> str:
            aclient = openai.AsyncOpenAI(base_url=sim_url, api_key="k", max_retries=0)
            async with aclient.chat.completions.with_streaming_response.create(**request) as response:
                chunks = [chunk async for chunk in await response.parse()]
            await aclient.close()
            return sdk_final_completion(chunks).to_json(indent=None)
        finals.append(asyncio.run(streamed_async()))
        return {"completions": finals}

    run = tracefix.session(entrypoint="tests:agent_run")(agent_run)
    recorded, replayed, report, spans = _record_then_replay(run, tmp_path, monkeypatch, "s-raw-stream-replay")
    chats = [s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == "chat"]
    assert len(chats) == 3 and all(json.loads(s.attributes[sc.RESPONSE_RAW])["choices"][0]["logprobs"]
                                   for s in chats)
    assert replayed == recorded and report["counts"]["llm_cassette"] == 3


# --- Anthropic's stream helper: `with client.messages.stream(...) as stream` -----------------

BALANCE_TOOLS = [{"name": "get_balance", "description": "balance of an account",
                  "input_schema": {"type": "object", "properties": {"account_id": {"type": "string"}}}}]
THINKING_REQUEST = {"model": "claude-test", "max_tokens": 2048, "tools": BALANCE_TOOLS,
                    "thinking": {"type": "enabled", "budget_tokens": 1024}}


def _follow_up(messages: list, first: typing.Any, result: dict) -> list:
    use = next(block for block in first.content if block.type == "tool_use")
    return [*messages, {"role": "assistant", "content": [block.to_dict() for block in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                          "content": json.dumps(result)}]}]


def event_kinds(events: typing.Iterable) -> list[str]:
    """What a MessageStream gave, in order: each API event (a delta by its type) with the
    helper's own events that follow it (text, thinking, ...), and a run of the same counted
    once: a replay streams each block in one delta where the API may have sent several."""
    api_events = type_literals(anthropic.types.RawMessageStreamEvent)
    groups: list[str] = []
    for event in events:
        if event.type not in api_events and groups:
            groups[-1] += f"+{event.type}"
        else:
            groups.append(f"{event.type}:{event.delta.type}" if event.type == "content_block_delta" else event.type)
    return [kind for i, kind in enumerate(groups) if i == 0 or groups[i - 1] != kind]


def _assert_stream_helper_round_trip(provider, recorded, replayed, report, spans, served) -> None:
    assert served == 2  # live once; the replay sent no request
    first, second = (json.loads(m) for m in recorded["messages"])
    assert [b["type"] for b in first["content"]] == ["thinking", "redacted_thinking", "tool_use"]
    assert first["content"][0]["signature"] and first["content"][0]["thinking"]
    assert [b["type"] for b in second["content"]] == ["thinking", "redacted_thinking", "text"]
    assert second["content"][2]["citations"]
    assert recorded["events"] and recorded["texts"][-1] == "The balance is 120.50."  # read as it came
    assert replayed == recorded  # final messages byte for byte, the same events and text
    assert report["counts"]["llm_cassette"] == 2 and report["counts"].get("llm_live", 0) == 0
    chats = sorted((s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == "chat"),
                   key=lambda s: s.attributes[sc.STEP])
    assert len(chats) == 2 and all(s.attributes[sc.STREAM] for s in chats)  # one span per call
    raw = json.loads(chats[0].attributes[sc.RESPONSE_RAW])
    assert as_message_json(raw) == as_message_json(first)  # the span holds the whole message


def test_anthropic_stream_helper_thinking_turns_replay_byte_identical(provider, tmp_path, monkeypatch):
    """`messages.stream()` posts without `messages.create`: it is traced and replayed all
    the same, read through `text_stream` in one turn and event by event in the next."""
    @tracefix.tool
    def get_balance(account_id: str) -> dict:
        return {"account_id": account_id, "balance": 120.5}

    def agent_run() -> dict:
        client = anthropic.Anthropic(base_url=provider.url, api_key="sk-ant-test", max_retries=0)
        messages: list = [{"role": "user", "content": "What is the balance of ACC-1?"}]
        with client.messages.stream(**THINKING_REQUEST, messages=messages) as stream:
            texts = ["".join(stream.text_stream)]
            first = stream.get_final_message()
        use = next(block for block in first.content if block.type == "tool_use")
        messages = _follow_up(messages, first, get_balance(**use.input))
        with client.messages.stream(**THINKING_REQUEST, messages=messages) as stream:
            events = event_kinds(stream)
            texts.append(stream.get_final_text())
            second = stream.get_final_message()
        return {"messages": [first.to_json(indent=None), second.to_json(indent=None)], "events": events,
                "texts": texts}

    run = tracefix.session(entrypoint="tests:agent_run")(agent_run)
    before = len(provider.requests)
    recorded, replayed, report, spans = _record_then_replay(run, tmp_path, monkeypatch, "s-stream-helper")
    _assert_stream_helper_round_trip(provider, recorded, replayed, report, spans, len(provider.requests) - before)
    helper_events = {kind.split("+")[1] for kind in recorded["events"] if "+" in kind}
    assert helper_events == {"thinking", "signature", "citation", "text"}  # the SDK's own, replayed too


def test_anthropic_async_stream_helper_thinking_turns_replay_byte_identical(provider, tmp_path, monkeypatch):
    import asyncio

    @tracefix.tool
    def get_balance(account_id: str) -> dict:
        return {"account_id": account_id, "balance": 120.5}

    async def turns() -> dict:
        client = anthropic.AsyncAnthropic(base_url=provider.url, api_key="sk-ant-test", max_retries=0)
        messages: list = [{"role": "user", "content": "What is the balance of ACC-1?"}]
        async with client.messages.stream(**THINKING_REQUEST, messages=messages) as stream:
            events = event_kinds([event async for event in stream])
            first = await stream.get_final_message()
        use = next(block for block in first.content if block.type == "tool_use")
        messages = _follow_up(messages, first, get_balance(**use.input))
        async with client.messages.stream(**THINKING_REQUEST, messages=messages) as stream:
            texts = ["".join([text async for text in stream.text_stream])]
            second = await stream.get_final_message()
        await client.close()
        return {"messages": [first.to_json(indent=None), second.to_json(indent=None)], "events": events,
                "texts": texts}

    run = tracefix.session(entrypoint="tests:agent_run")(lambda: asyncio.run(turns()))
    before = len(provider.requests)
    recorded, replayed, report, spans = _record_then_replay(run, tmp_path, monkeypatch, "s-async-stream-helper")
    _assert_stream_helper_round_trip(provider, recorded, replayed, report, spans, len(provider.requests) - before)


def test_anthropic_stream_helper_span_ends_when_the_block_is_left_early(provider, spans):
    client = anthropic.Anthropic(base_url=provider.url, api_key="sk-ant-test", max_retries=0)
    with client.messages.stream(**THINKING_REQUEST, messages=[{"role": "user", "content": "Hi"}]) as stream:
        assert isinstance(stream, anthropic.lib.streaming.MessageStream)
        next(iter(stream))  # message_start only
        assert not spans.get_finished_spans()
    chat, = spans.get_finished_spans()
    assert chat.end_time is not None and chat.attributes[sc.GEN_AI_REQUEST_MODEL] == "claude-test"
    assert json.loads(chat.attributes[sc.RESPONSE_RAW])["id"] == "msg_01"  # what it got before leaving


def test_shutdown_puts_the_sdks_stream_helper_back():
    from anthropic.resources.messages import AsyncMessages, Messages

    originals = (Messages.__dict__["stream"], AsyncMessages.__dict__["stream"])
    handle = tracefix.init(span_processor=SimpleSpanProcessor(InMemorySpanExporter()))
    assert Messages.__dict__["stream"] is not originals[0] and AsyncMessages.__dict__["stream"] is not originals[1]
    handle.shutdown()
    assert (Messages.__dict__["stream"], AsyncMessages.__dict__["stream"]) == originals


def test_anthropic_stream_helper_request_that_fails_ends_its_span_with_the_error(spans):
    import socket

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0)
    with pytest.raises(anthropic.APIConnectionError):
        with client.messages.stream(**THINKING_REQUEST, messages=[{"role": "user", "content": "Hi"}]):
            pass
    chat, = spans.get_finished_spans()
    assert chat.status.status_code.name == "ERROR" and chat.attributes[sc.ERROR_TYPE] == "APIConnectionError"
