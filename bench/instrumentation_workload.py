"""The call every instrumentation bench makes (instrumentation_overhead.py and
instrumentation_instructions.py): `chat.completions.create` through an OpenAI client whose in-process `httpx.MockTransport` returns
a canned, realistic answer (a worker-agent turn with a tool call; for a stream 21 SSE chunks
and a final usage chunk), and the request it sends (messages with a tool call and its result,
three tools)."""
from __future__ import annotations

import json

MODEL = "bank-agent"

SYSTEM = ("You are AccountAgent, a worker of the bank's support team with the tools lookup_customer, "
          "get_accounts, get_balance. Carry out the Orchestrator's instruction with your tools, one call at a "
          "time, then reply with a short REPORT of what you found or did. ") * 3
MESSAGES = [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": "AccountAgent: look up customer Alice Chen and get her accounts."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "lookup_customer", "arguments": "{\"name\": \"Alice Chen\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1",
             "content": json.dumps({"customer_id": "CUST-001", "name": "Alice Chen", "segment": "retail"})}]
TOOLS = [{"type": "function", "function": {"name": name, "description": f"{name} of the bank",
                                           "parameters": {"type": "object", "properties": {
                                               "customer_id": {"type": "string"}}}}}
         for name in ("lookup_customer", "get_accounts", "get_balance")]
COMPLETION = {
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 1700000000, "model": MODEL,
    "system_fingerprint": "fp_bench",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
        "role": "assistant", "content": None, "tool_calls": [{
            "id": "call_2", "type": "function",
            "function": {"name": "get_accounts", "arguments": "{\"customer_id\": \"CUST-001\"}"}}]}}],
    "usage": {"prompt_tokens": 412, "completion_tokens": 24, "total_tokens": 436}}


def _stream_body() -> bytes:
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000, "model": MODEL}
    text = "REPORT from AccountAgent: customer Alice Chen is CUST-001 with checking ACC-1001 and savings ACC-1002."
    pieces = [text[i:i + 6] for i in range(0, len(text), 6)]
    chunks = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    chunks += [{**head, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    chunks.append({**head, "choices": [], "usage": {"prompt_tokens": 412, "completion_tokens": 30,
                                                    "total_tokens": 442}})
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()


def _client():
    import httpx
    import openai

    completion, stream_body = json.dumps(COMPLETION).encode(), _stream_body()

    def handler(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            return httpx.Response(200, content=stream_body, headers={"content-type": "text/event-stream"})
        return httpx.Response(200, content=completion, headers={"content-type": "application/json"})

    return openai.OpenAI(api_key="sk-bench", base_url="http://bench.invalid/v1", max_retries=0,
                         http_client=httpx.Client(transport=httpx.MockTransport(handler)))
