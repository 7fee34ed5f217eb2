"""The official openai client, unchanged, against `tracefix sim` running as a subprocess."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import openai
import pytest

from tracefix.demo.team import system_prompt, tools_for

WORKER_MESSAGES = [
    {"role": "system", "content": system_prompt("AccountAgent")},
    {"role": "user", "content": 'Look up the customer named "Alice Chen" with lookup_customer, then list their '
                                "accounts with get_accounts."},
]


def _client(sim_url: str, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim_url, api_key="test", max_retries=0, **kw)


def test_sync_non_stream_returns_tool_call_and_usage(sim_url):
    r = _client(sim_url).chat.completions.create(model="bank-agent", messages=WORKER_MESSAGES,
                                                 tools=tools_for("AccountAgent"))
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "lookup_customer"
    assert json.loads(call.function.arguments) == {"name": "Alice Chen"}
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_logprobs_annotations_and_the_legacy_function_shape_as_the_api_answers_them(sim_url):
    client = _client(sim_url)
    r = client.chat.completions.create(model="bank-agent", messages=[{"role": "user", "content": "Say hello."}],
                                       logprobs=True, top_logprobs=2, web_search_options={})
    choice = r.choices[0]
    tokens = choice.logprobs.content
    assert "".join(t.token for t in tokens) == choice.message.content
    assert all(len(t.top_logprobs) == 2 and t.top_logprobs[0].token == t.token for t in tokens)
    (annotation,) = choice.message.annotations
    assert annotation.type == "url_citation" and annotation.url_citation.end_index <= len(choice.message.content)
    # legacy: `functions` in, `function_call` out, a `function` message with the result back
    functions = [tool["function"] for tool in tools_for("AccountAgent")]
    first = client.chat.completions.create(model="bank-agent", messages=WORKER_MESSAGES, functions=functions)
    call = first.choices[0].message.function_call
    assert first.choices[0].finish_reason == "function_call" and call.name == "lookup_customer"
    assert not first.choices[0].message.tool_calls
    second = client.chat.completions.create(model="bank-agent", functions=functions, messages=[
        *WORKER_MESSAGES, {"role": "assistant", "content": None, "function_call": call.model_dump()},
        {"role": "function", "name": call.name, "content": json.dumps({"customer_id": "CUST-001"})}])
    assert second.choices[0].message.function_call.name == "get_accounts"


def test_sync_stream_tool_call_deltas_reassemble_to_the_non_stream_call(sim_url):
    client = _client(sim_url)
    plain = client.chat.completions.create(model="bank-agent", messages=WORKER_MESSAGES,
                                           tools=tools_for("AccountAgent"))
    stream = client.chat.completions.create(model="bank-agent", messages=WORKER_MESSAGES,
                                            tools=tools_for("AccountAgent"), stream=True,
                                            stream_options={"include_usage": True})
    ids, names, arguments, finish, usage, argument_deltas = [], [], "", None, None, 0
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                if tc.id:
                    ids.append(tc.id)
                if tc.function and tc.function.name:
                    names.append(tc.function.name)
                if tc.function and tc.function.arguments:
                    arguments += tc.function.arguments
                    argument_deltas += 1
            finish = choice.finish_reason or finish
    expected = plain.choices[0].message.tool_calls[0]
    assert names == [expected.function.name] and len(ids) == 1
    assert json.loads(arguments) == json.loads(expected.function.arguments)
    assert argument_deltas > 1  # arguments really arrive split over several deltas
    assert finish == "tool_calls"
    assert usage is not None and usage.completion_tokens > 0


def test_stream_without_include_usage_has_no_usage_chunk(sim_url):
    chunks = list(_client(sim_url).chat.completions.create(
        model="bank-agent", messages=[{"role": "user", "content": "hello"}], stream=True))
    assert all(c.usage is None for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "bank-agent" in text


async def test_async_client_stream_and_non_stream(sim_url):
    client = openai.AsyncOpenAI(base_url=sim_url, api_key="test", max_retries=0)
    try:
        r = await client.chat.completions.create(model="bank-agent", messages=WORKER_MESSAGES,
                                                 tools=tools_for("AccountAgent"))
        assert r.choices[0].message.tool_calls[0].function.name == "lookup_customer"
        stream = await client.chat.completions.create(
            model="bank-agent", messages=[{"role": "user", "content": "hi"}], stream=True,
            stream_options={"include_usage": True})
        text, usage = "", None
        async for chunk in stream:
            usage = chunk.usage or usage
            text += "".join(c.delta.content or "" for c in chunk.choices)
        assert "scripted demo model" in text and usage.total_tokens > 0
    finally:
        await client.close()


def test_models_endpoint_lists_bank_agent(sim_url):
    ids = [m.id for m in _client(sim_url).models.list()]
    assert "bank-agent" in ids


def test_unknown_model_is_404_model_not_found(sim_url):
    with pytest.raises(openai.NotFoundError) as info:
        _client(sim_url).chat.completions.create(model="gpt-nope", messages=WORKER_MESSAGES)
    assert info.value.code == "model_not_found"


def _post(url: str, body: bytes) -> tuple[int, dict]:
    req = urllib.request.Request(url + "/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.parametrize("body, param", [
    (b"{not json", None),
    (b'{"model": "bank-agent"}', "messages"),
    (b'{"model": "bank-agent", "messages": "hi"}', "messages"),
    (b'{"model": "bank-agent", "messages": [{"role": "wizard", "content": "x"}]}', "messages[0]"),
    (b'{"messages": [{"role": "user", "content": "x"}]}', "model"),
    (b"[1, 2]", None),
])
def test_bad_input_is_4xx_openai_error_and_server_keeps_serving(sim_url, body, param):
    status, payload = _post(sim_url, body)
    assert 400 <= status < 500
    assert set(payload["error"]) == {"message", "type", "param", "code"}
    assert payload["error"]["param"] == param
    status, payload = _post(sim_url, json.dumps({"model": "bank-agent", "messages": WORKER_MESSAGES}).encode())
    assert status == 200 and payload["choices"][0]["message"]["tool_calls"]


def test_missing_messages_raises_bad_request_in_the_client(sim_url):
    with pytest.raises(openai.BadRequestError):
        _client(sim_url).chat.completions.create(model="bank-agent", messages=[])


def test_stats_count_requests_per_session_header(sim_url):
    client = _client(sim_url, default_headers={"X-Demo-Session": "stats-probe"})
    for _ in range(3):
        client.chat.completions.create(model="bank-agent", messages=WORKER_MESSAGES)
    with urllib.request.urlopen(sim_url.rsplit("/v1", 1)[0] + "/_sim/stats") as r:
        stats = json.loads(r.read())
    assert stats["by_session"]["stats-probe"] == 3
    assert stats["requests"] >= 3


def test_oversized_and_chunked_bodies(sim_url):
    import http.client
    from urllib.parse import urlparse

    u = urlparse(sim_url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    conn.request("POST", "/v1/chat/completions", body=b"", headers={"Content-Length": str(64 * 1024 * 1024)})
    r = conn.getresponse()
    assert r.status == 413 and json.loads(r.read())["error"]["code"] == "request_too_large"
    conn.close()
    body = json.dumps({"model": "bank-agent", "messages": WORKER_MESSAGES}).encode()
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    conn.request("POST", "/v1/chat/completions", body=iter([body[:50], body[50:]]),
                 headers={"Content-Type": "application/json"}, encode_chunked=True)
    r = conn.getresponse()
    assert r.status == 200 and json.loads(r.read())["choices"][0]["message"]["tool_calls"]
    conn.close()


def test_retrieve_model_and_content_parts(sim_url):
    client = _client(sim_url)
    assert client.models.retrieve("bank-agent").id == "bank-agent"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-nope")
    parts = [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]} for m in WORKER_MESSAGES]
    r = client.chat.completions.create(model="bank-agent", messages=parts, tools=tools_for("AccountAgent"))
    assert r.choices[0].message.tool_calls[0].function.name == "lookup_customer"


def test_other_methods_are_405_json(sim_url):
    req = urllib.request.Request(sim_url + "/chat/completions", data=b"{}", method="PUT")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=5)
    assert info.value.code == 405 and json.loads(info.value.read())["error"]["code"] == "method_not_allowed"
