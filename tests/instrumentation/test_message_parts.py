"""The GenAI conventions' message shape on real SDK calls, held to a JSON Schema written from
the conventions' text (genai_schema), and the attribute names held to
opentelemetry-semantic-conventions' own."""
from __future__ import annotations

import json
from urllib.parse import urlsplit

import jsonschema
import openai
import pytest
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes, server_attributes

import tracefix
from tracefix import semconv as sc

from genai_schema import INPUT_MESSAGES, OUTPUT_MESSAGES, check_inference_span
from instr_support import by_name

MODEL = "bank-agent"
PIXEL = "data:image/png;base64,iVBORw0KGgo="
# a history in every chat-completions shape an app sends (written here, not by tracefix)
HISTORY = [
    {"role": "developer", "content": "Answer in French."},
    {"role": "user", "name": "alice", "content": [
        {"type": "text", "text": "What is on "}, {"type": "text", "text": "these pictures?"},
        {"type": "image_url", "image_url": {"url": "https://example.org/cat.png", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": PIXEL}}]},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "describe", "arguments": '{"n":2}'}},
        {"id": "call_b", "type": "function", "function": {"name": "not_json", "arguments": "{oops"}}]},
    {"role": "tool", "tool_call_id": "call_a", "content": [{"type": "text", "text": "a cat"},
                                                            {"type": "text", "text": " and a pixel"}]},
    {"role": "tool", "tool_call_id": "call_b", "content": "error: bad arguments"},
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "I will not."}]},
    {"role": "assistant", "content": None, "function_call": {"name": "legacy", "arguments": "{}"}},
    {"role": "function", "name": "legacy", "content": "42"},
]
EXPECTED = [
    {"role": "developer", "parts": [{"type": "text", "content": "Answer in French."}]},
    {"role": "user", "name": "alice", "parts": [
        {"type": "text", "content": "What is on "}, {"type": "text", "content": "these pictures?"},
        {"type": "uri", "modality": "image", "uri": "https://example.org/cat.png"},
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "iVBORw0KGgo="}]},
    {"role": "assistant", "parts": [
        {"type": "text", "content": ""},
        {"type": "tool_call", "id": "call_a", "name": "describe", "arguments": '{"n":2}'},
        {"type": "tool_call", "id": "call_b", "name": "not_json", "arguments": "{oops"}]},
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_a", "response": "a cat and a pixel"}]},
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_b", "response": "error: bad arguments"}]},
    {"role": "assistant", "parts": [{"type": "refusal", "refusal": "I will not."}]},
    {"role": "assistant", "parts": [{"type": "tool_call", "id": None, "name": "legacy", "arguments": "{}"}]},
    {"role": "tool", "name": "legacy", "parts": [{"type": "tool_call_response", "id": None, "response": "42"}]},
]


def test_attribute_names_are_the_semantic_conventions_package_own():
    ours = {name: value for name, value in vars(sc).items() if name.startswith(("GEN_AI_", "SERVER_", "ERROR_"))
            and isinstance(value, str)}
    theirs = {**vars(gen_ai_attributes), **vars(server_attributes)}
    from opentelemetry.semconv.attributes import error_attributes

    theirs.update(vars(error_attributes))
    shared = {name for name in ours if name in theirs}
    assert {"GEN_AI_INPUT_MESSAGES", "GEN_AI_OUTPUT_MESSAGES", "GEN_AI_SYSTEM_INSTRUCTIONS", "SERVER_ADDRESS",
            "SERVER_PORT", "GEN_AI_PROVIDER_NAME"} <= shared
    assert {name: ours[name] for name in shared} == {name: theirs[name] for name in shared}
    # a name of ours the package lacks is an event's or a value's, never a renamed attribute
    assert {value for name, value in ours.items() if name not in shared} <= {
        "gen_ai.evaluation.result", "gen_ai.evaluation.score.value"} | {v for v in vars(gen_ai_attributes).values()
                                                                          if isinstance(v, str)}


@pytest.mark.parametrize("wrong", [
    [{"role": "user", "content": "the old chat shape"}],
    [{"role": "user", "parts": [{"type": "text", "text": "text under the wrong key"}]}],
    [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c", "arguments": {}}]}],  # no name
    [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "c"}]}],  # no response
    [{"parts": [{"type": "text", "content": "no role"}]}],
], ids=["chat-shape", "text-key", "call-without-name", "response-without-response", "no-role"])
def test_the_schema_refuses_what_the_conventions_do_not_allow(wrong):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, INPUT_MESSAGES)
    with pytest.raises(jsonschema.ValidationError):  # an output message needs its finish reason
        jsonschema.validate([{"role": "assistant", "parts": [{"type": "text", "content": "x"}]}], OUTPUT_MESSAGES)


def test_every_message_shape_is_written_in_parts_with_server_address(spans, sim_url):
    client = openai.OpenAI(base_url=sim_url, api_key="sim-key", max_retries=0)
    with tracefix.session("shapes"):
        client.chat.completions.create(model=MODEL, messages=HISTORY)
    client.close()
    (span,) = by_name(spans, "chat ")
    a = span.attributes
    check_inference_span(a)
    assert json.loads(a[sc.GEN_AI_INPUT_MESSAGES]) == EXPECTED
    assert sc.GEN_AI_SYSTEM_INSTRUCTIONS not in a  # a system message of the history stays a message
    url = urlsplit(sim_url)
    assert (a[sc.SERVER_ADDRESS], a[sc.SERVER_PORT]) == (url.hostname, url.port)
    (out,) = json.loads(a[sc.GEN_AI_OUTPUT_MESSAGES])
    assert out["role"] == "assistant" and out["finish_reason"] in ("stop", "tool_call")


def test_a_failed_call_names_the_default_port_of_its_scheme(spans):
    client = openai.OpenAI(base_url="https://tracefix-test.invalid/v1", api_key="k", max_retries=0, timeout=5)
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    client.close()
    (span,) = by_name(spans, "chat ")
    assert (span.attributes[sc.SERVER_ADDRESS], span.attributes[sc.SERVER_PORT]) == ("tracefix-test.invalid", 443)
    assert sc.GEN_AI_OUTPUT_MESSAGES not in span.attributes
    check_inference_span(span.attributes)


def test_a_stream_cut_short_says_so_in_its_finish_reason(spans, sim_url):
    client = openai.OpenAI(base_url=sim_url, api_key="sim-key", max_retries=0)
    with client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hello"}],
                                        stream=True) as stream:
        chunks = [next(iter(stream))]
    client.close()
    (span,) = by_name(spans, "chat ")
    assert chunks and sc.GEN_AI_RESPONSE_FINISH_REASONS not in span.attributes
    (out,) = json.loads(span.attributes[sc.GEN_AI_OUTPUT_MESSAGES])
    assert out["finish_reason"] == "error"  # no finish reason came: never "stop"
    check_inference_span(span.attributes)
