"""A stream read chunk by chunk is recorded exactly once it ends: its events as the server
sent them (written in one pass, not a dump per chunk) and the response they fold into,
against a real HTTP server that streams what plain chunks never carry: non-ASCII text,
tiny and negative-zero log probabilities, a tool call split over chunks, a provider's own
fields on a delta and on the chunk, a usage chunk."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState

import tracefix
from tracefix import semconv as sc

from genai_schema import check_inference_span
from instr_support import by_name

HEAD = {"id": "chatcmpl-odd", "object": "chat.completion.chunk", "created": 1700000001, "model": "odd-model",
        "system_fingerprint": "fp_odd"}
TOKEN = {"token": "caf", "logprob": -1.2345e-05, "bytes": [99, 97, 102], "top_logprobs": []}
CHUNKS = [
    {**HEAD, "obfuscation": "x1", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                               "logprobs": None, "finish_reason": None}]},
    {**HEAD, "choices": [{"index": 0, "delta": {"content": "café ", "reasoning_content": "thinking…"},
                          "logprobs": {"content": [TOKEN], "refusal": None}, "finish_reason": None}]},
    {**HEAD, "choices": [{"index": 0, "delta": {"content": "😀"},
                          "logprobs": {"content": [{**TOKEN, "token": "😀", "logprob": -0.0}], "refusal": None},
                          "finish_reason": None}]},
    {**HEAD, "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_odd", "type": "function", "function": {"name": "lookup", "arguments": "{\"na"}}]},
                          "finish_reason": None}]},
    {**HEAD, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "me\": 1}"}}]},
                          "finish_reason": "tool_calls"}]},
    {**HEAD, "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}},
]


@pytest.fixture(scope="module")
def odd_server():
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            body = "".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in CHUNKS) + "data: [DONE]\n\n"
            data = body.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def read_stream(base_url: str) -> list:
    client = openai.OpenAI(base_url=base_url, api_key="k", max_retries=0)
    with tracefix.session("odd"):
        chunks = list(client.chat.completions.create(model="odd-model", messages=[{"role": "user", "content": "hi"}],
                                                     stream=True, logprobs=True))
    client.close()
    return chunks


def test_stream_events_are_recorded_as_the_server_sent_them(spans, odd_server):
    chunks = read_stream(odd_server)
    (span,) = by_name(spans, "chat ")
    recorded = json.loads(span.attributes[sc.RESPONSE_STREAM])
    assert recorded == CHUNKS
    assert recorded == [chunk.model_dump(mode="json", exclude_unset=True) for chunk in chunks]  # the per-chunk form
    assert '"café "' in span.attributes[sc.RESPONSE_STREAM] and '"😀"' in span.attributes[sc.RESPONSE_STREAM]


def test_the_buffered_chunks_fold_into_the_sdks_own_completion(spans, odd_server):
    chunks = read_stream(odd_server)
    state = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(chunk)
    expected = state.get_final_completion().model_dump(mode="json", exclude_unset=True)
    (span,) = by_name(spans, "chat ")
    raw = json.loads(span.attributes[sc.RESPONSE_RAW])
    message = raw["choices"][0]["message"]
    assert message["content"] == "café 😀" and message["reasoning_content"] == "thinking…"
    assert message["tool_calls"] == [{"id": "call_odd", "type": "function",
                                      "function": {"name": "lookup", "arguments": "{\"name\": 1}"}}]
    assert raw["choices"][0]["logprobs"]["content"] == [TOKEN, {**TOKEN, "token": "😀", "logprob": -0.0}]
    for key in ("id", "model", "system_fingerprint", "usage"):
        assert raw[key] == expected[key]
    assert raw["choices"][0]["finish_reason"] == expected["choices"][0]["finish_reason"] == "tool_calls"
    a = span.attributes
    assert (a[sc.GEN_AI_USAGE_INPUT_TOKENS], a[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (7, 5)
    assert json.loads(a[sc.GEN_AI_OUTPUT_MESSAGES]) == [{"role": "assistant", "finish_reason": "tool_call", "parts": [
        {"type": "text", "content": "café 😀"},
        {"type": "tool_call", "id": "call_odd", "name": "lookup", "arguments": "{\"name\": 1}"}]}]
    check_inference_span(a)
