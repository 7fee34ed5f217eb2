"""The floor of instrumentation_overhead.py: a hand-written OpenTelemetry span around one
`chat.completions.create`, carrying the content tracefix records, written the cheapest way a
person would for the bench's known request (no tracefix import, no wrapper, no general
normalization): the GenAI attributes, the messages in the conventions' parts shape, the
tool definitions, the request's parameters, the session id, and after the call the response
(its raw JSON, the output message in parts, finish reason, usage), for a stream also every
chunk as JSON. What tracefix adds beyond it (step numbering, the request's fingerprint,
tool-call linking, size limits, replay) is what the bench's ratio to the floor prices.

Runs under any interpreter with openai, httpx and the OpenTelemetry SDK (the OpenLit venv too).
"""
from __future__ import annotations

import json
from typing import Any

SESSION_ID = "bench-session"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def input_parts(messages: list[dict]) -> list[dict]:
    """The bench's messages (text, an assistant's tool calls, a tool result) in parts."""
    out = []
    for m in messages:
        if m["role"] == "tool":
            out.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": m["tool_call_id"],
                                                   "response": m["content"]}]})
            continue
        parts = [{"type": "text", "content": m["content"]}] if m.get("content") is not None else []
        parts += [{"type": "tool_call", "id": c["id"], "name": c["function"]["name"],
                   "arguments": c["function"]["arguments"]} for c in m.get("tool_calls") or ()]
        out.append({"role": m["role"], "parts": parts})
    return out


def _request_attributes(model: str, messages: list[dict], tools: list | None, params: dict) -> dict:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": model,
             "server.address": "bench.invalid", "server.port": 80, "tracefix.session.id": SESSION_ID,
             "gen_ai.conversation.id": SESSION_ID, "tracefix.step": 0,
             "gen_ai.input.messages": _dumps(input_parts(messages))}
    if tools:
        attrs["gen_ai.tool.definitions"] = _dumps(tools)
    if params:
        attrs["tracefix.request.params"] = _dumps(params)
    if "temperature" in params:
        attrs["gen_ai.request.temperature"] = params["temperature"]
    return attrs


def _response_attributes(raw: dict) -> dict:
    choice = raw["choices"][0]
    message = choice["message"]
    parts = [{"type": "text", "content": message["content"]}] if message.get("content") is not None else []
    parts += [{"type": "tool_call", "id": c["id"], "name": c["function"]["name"],
               "arguments": c["function"]["arguments"]} for c in message.get("tool_calls") or ()]
    reason = choice["finish_reason"]
    usage = raw.get("usage") or {}
    return {"gen_ai.response.model": raw["model"], "gen_ai.response.id": raw["id"],
            "gen_ai.response.finish_reasons": [reason],
            "gen_ai.usage.input_tokens": usage.get("prompt_tokens"),
            "gen_ai.usage.output_tokens": usage.get("completion_tokens"),
            "gen_ai.output.messages": _dumps([{"role": "assistant", "parts": parts, "finish_reason": {
                "tool_calls": "tool_call"}.get(reason, reason)}]),
            "tracefix.response.raw": _dumps(raw)}


def plain(tracer: Any, client: Any, model: str, messages: list[dict], tools: list, temperature: float) -> None:
    from opentelemetry.trace import SpanKind

    attrs = _request_attributes(model, messages, tools, {"temperature": temperature})
    with tracer.start_as_current_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attrs) as span:
        response = client.chat.completions.create(model=model, messages=messages, tools=tools,
                                                  temperature=temperature)
        span.set_attributes(_response_attributes(response.model_dump(mode="json", exclude_unset=True)))


def streamed(tracer: Any, client: Any, model: str, messages: list[dict]) -> None:
    """The bench's text stream, its chunks kept and folded once at the end."""
    from opentelemetry.trace import SpanKind

    options = {"include_usage": True}
    attrs = _request_attributes(model, messages, None, {"stream_options": options})
    with tracer.start_as_current_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attrs) as span:
        chunks = list(client.chat.completions.create(model=model, messages=messages, stream=True,
                                                     stream_options=options))
        events = [chunk.model_dump(mode="json", exclude_unset=True) for chunk in chunks]
        text, reason, usage = [], None, None
        for event in events:
            for choice in event["choices"]:
                content = choice["delta"].get("content")
                if content:
                    text.append(content)
                reason = choice.get("finish_reason") or reason
            usage = event.get("usage") or usage
        first = events[0]
        raw = {"id": first["id"], "object": "chat.completion", "created": first["created"], "model": first["model"],
               "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(text)},
                            "logprobs": None, "finish_reason": reason}], "usage": usage}
        span.set_attributes({**_response_attributes(raw), "tracefix.response.stream": _dumps(events)})
