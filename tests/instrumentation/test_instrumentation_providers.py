"""Anthropic messages.create and OpenAI responses.create: spans, streams, tool links, replay types."""
from __future__ import annotations

import json

import anthropic
import openai
import pytest

import tracefix
from tracefix import semconv as sc
from tracefix.anthropic_messages import AnthropicMessages
from tracefix.openai_responses import OpenAIResponses

from genai_schema import check_inference_span
from instr_support import by_name
from provider_server import ANSWER, ProviderServer

TOOLS_ANTHROPIC = [{"name": "get_balance", "description": "balance of an account",
                    "input_schema": {"type": "object", "properties": {"account_id": {"type": "string"}}}}]
TOOLS_RESPONSES = [{"type": "function", "name": "get_balance", "description": "balance of an account",
                    "parameters": {"type": "object", "properties": {"account_id": {"type": "string"}}}}]


@pytest.fixture(scope="module")
def provider():
    server = ProviderServer()
    yield server
    server.stop()


@tracefix.tool
def get_balance(account_id: str) -> dict:
    return {"account_id": account_id, "balance": 120.5}


def test_anthropic_messages_are_traced_and_tools_linked(spans, provider):
    client = anthropic.Anthropic(base_url=provider.url, api_key="sk-ant-testkey-123456789", max_retries=0)
    with tracefix.session("claude", session_id="s-claude"):
        messages = [{"role": "user", "content": "What is the balance of ACC-1?"}]
        first = client.messages.create(model="claude-test", max_tokens=100, system="You are a bank agent.",
                                       messages=messages, tools=TOOLS_ANTHROPIC)
        use = first.content[0]
        result = get_balance(**use.input)
        messages += [{"role": "assistant", "content": [use.model_dump()]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                   "content": json.dumps(result)}]}]
        with client.messages.create(model="claude-test", max_tokens=100, messages=messages, tools=TOOLS_ANTHROPIC,
                                    stream=True) as stream:
            text = "".join(e.delta.text for e in stream if e.type == "content_block_delta")
    assert text == ANSWER
    chats = sorted(by_name(spans, "chat claude-test"), key=lambda s: s.attributes[sc.STEP])
    assert len(chats) == 2
    a0, a1 = chats[0].attributes, chats[1].attributes
    assert a0[sc.GEN_AI_PROVIDER_NAME] == "anthropic"
    # `system` is a parameter of its own: the conventions' system instructions, not a message
    assert json.loads(a0[sc.GEN_AI_SYSTEM_INSTRUCTIONS]) == [{"type": "text", "content": "You are a bank agent."}]
    assert json.loads(a0[sc.GEN_AI_INPUT_MESSAGES]) == [
        {"role": "user", "parts": [{"type": "text", "content": "What is the balance of ACC-1?"}]}]
    # the second request's tool_use and tool_result blocks as a tool call and its response
    history = json.loads(a1[sc.GEN_AI_INPUT_MESSAGES])
    assert history[1]["parts"] == [{"type": "tool_call", "id": "toolu_01", "name": "get_balance",
                                    "arguments": {"account_id": "ACC-1"}}]
    assert history[2] == {"role": "user", "parts": [{"type": "tool_call_response", "id": "toolu_01",
                                                     "response": json.dumps(result)}]}
    assert [json.loads(a[sc.GEN_AI_OUTPUT_MESSAGES])[0]["finish_reason"] for a in (a0, a1)] == ["tool_call", "stop"]
    for a in (a0, a1):
        check_inference_span(a)
    assert a0[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_use",)
    assert (a0[sc.GEN_AI_USAGE_INPUT_TOKENS], a0[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (21, 9)
    (tool_span,) = by_name(spans, "execute_tool get_balance")
    assert tool_span.attributes[sc.GEN_AI_TOOL_CALL_ID] == "toolu_01" and tool_span.attributes[sc.STEP] == 0
    # the stream's accumulated message is the same Message the SDK would have returned
    streamed = anthropic.types.Message.model_validate(json.loads(a1[sc.RESPONSE_RAW]))
    assert streamed.content[0].text == ANSWER and streamed.stop_reason == "end_turn"
    assert a1[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 9
    assert "sk-ant-testkey" not in repr([s.attributes for s in spans.get_finished_spans()])


def test_openai_responses_are_traced_with_streams_and_tool_links(spans, provider):
    client = openai.OpenAI(base_url=f"{provider.url}/v1", api_key="k", max_retries=0)
    with tracefix.session("responses", session_id="s-resp"):
        first = client.responses.create(model="gpt-test", instructions="Be brief.", input="Balance of ACC-1?",
                                        tools=TOOLS_RESPONSES)
        call = first.output[0]
        result = get_balance(**json.loads(call.arguments))
        stream = client.responses.create(model="gpt-test", tools=TOOLS_RESPONSES, stream=True, input=[
            {"role": "user", "content": "Balance of ACC-1?"}, call.model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps(result)}])
        final = [e for e in stream if e.type == "response.completed"][0].response
    assert final.output_text == ANSWER
    chats = sorted(by_name(spans, "chat gpt-test"), key=lambda s: s.attributes[sc.STEP])
    a0, a1 = chats[0].attributes, chats[1].attributes
    assert json.loads(a0[sc.GEN_AI_SYSTEM_INSTRUCTIONS]) == [{"type": "text", "content": "Be brief."}]
    assert json.loads(a0[sc.GEN_AI_INPUT_MESSAGES]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Balance of ACC-1?"}]}]
    out0 = json.loads(a0[sc.GEN_AI_OUTPUT_MESSAGES])[0]
    assert out0["parts"] == [{"type": "tool_call", "id": "call_r1", "name": "get_balance",
                              "arguments": call.arguments}] and out0["finish_reason"] == "tool_call"
    # the second request's function call and its output, Responses input items without a role
    assert json.loads(a1[sc.GEN_AI_INPUT_MESSAGES])[1:] == [
        {"role": "assistant", "parts": [out0["parts"][0]]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_r1", "response": json.dumps(result)}]}]
    for a in (a0, a1):
        check_inference_span(a)
    assert by_name(spans, "execute_tool get_balance")[0].attributes[sc.GEN_AI_TOOL_CALL_ID] == "call_r1"
    assert json.loads(a1[sc.GEN_AI_OUTPUT_MESSAGES]) == [{"role": "assistant", "parts": [
        {"type": "text", "content": ANSWER}], "finish_reason": "stop"}]
    assert (a1[sc.GEN_AI_USAGE_INPUT_TOKENS], a1[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (30, 7)


@pytest.mark.parametrize("adapter", [AnthropicMessages(), OpenAIResponses()], ids=["anthropic", "responses"])
def test_recorded_responses_rehydrate_and_stream_back_as_sdk_types(adapter, provider):
    """What replay mode hands the app: the SDK's own objects, as a value or as a stream."""
    from provider_server import anthropic_message, openai_response

    body = {"model": "m", "tools": TOOLS_RESPONSES}
    raw = anthropic_message(body) if adapter.provider == "anthropic" else openai_response(body)
    assert adapter.rehydrate(raw).model_dump(mode="json", exclude_unset=True)["id"] == raw["id"]
    accumulator = adapter.new_accumulator()
    for event in adapter.fake_stream(raw, {}, is_async=False):
        accumulator.add(event)
    assert adapter.summarize(accumulator.raw()) == adapter.summarize(raw)
    synthesized = adapter.rehydrate(adapter.synthesize("replaced", "m"))
    assert adapter.summarize(adapter.response_raw(synthesized)).output_messages[0]["content"] == "replaced"
