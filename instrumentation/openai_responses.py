"""Adapter for OpenAI `responses.create`: input items as chat messages, output items back.

Recorded as a `chat` operation like chat completions: the input (``instructions`` first,
as a system message) and the output (text and function calls) are written in the same
chat-message JSON, so the collector and the replay read one format.
"""
from __future__ import annotations

import time
from typing import Any

from .attributes import from_json_text
from .llm import Request, Summary, parsed, rehydrate_model, is_given, request_params
from .replay_mode import normalize_messages, normalize_tools

_CONSUMED = ("model", "input", "instructions", "tools", "stream", "extra_headers", "extra_query", "extra_body",
             "timeout")
_FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


def input_messages(kwargs: dict) -> list:
    messages: list = []
    instructions = kwargs.get("instructions")
    if is_given(instructions) and instructions:
        messages.append({"role": "system", "content": instructions})
    items = kwargs.get("input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    elif is_given(items):
        messages.extend(normalize_messages(items))
    return messages


class ResponsesAccumulator:
    """Keeps the latest full `response` an event carried; the final event has all of it."""

    def __init__(self) -> None:
        self.response: dict | None = None
        self.final = False

    def add(self, event: Any) -> None:
        response = getattr(event, "response", None)
        if response is not None and not self.final:
            self.response = response.model_dump(mode="json", exclude_unset=True)
            self.final = getattr(event, "type", "") in _FINAL_EVENTS

    def raw(self) -> dict | None:
        return self.response


class OpenAIResponses:
    provider = "openai"
    operation = "chat"

    def parse_request(self, kwargs: dict) -> Request:
        return Request(model=kwargs.get("model"), messages=input_messages(kwargs),
                       tools=normalize_tools(kwargs.get("tools")), params=request_params(kwargs, _CONSUMED),
                       stream=bool(kwargs.get("stream")) and is_given(kwargs.get("stream")))

    def add_messages(self, kwargs: dict, extra: list) -> dict:
        items = kwargs.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        elif not is_given(items):
            items = []
        return {**kwargs, "input": [*items, *extra]}

    def is_stream(self, result: Any) -> bool:
        return hasattr(result, "__next__") or hasattr(result, "__anext__")

    def response_raw(self, result: Any) -> dict:
        return parsed(result).model_dump(mode="json", exclude_unset=True)

    def summarize(self, raw: dict) -> Summary:
        text: list[str] = []
        tool_calls: list[dict] = []
        pending: list[tuple[str, str, Any]] = []
        for item in raw.get("output") or []:
            kind = item.get("type")
            if kind == "message":
                for part in item.get("content") or []:
                    if part.get("type") == "output_text":
                        text.append(part.get("text") or "")
                    elif part.get("type") == "refusal":
                        text.append(part.get("refusal") or "")
            elif kind == "function_call":
                call_id = item.get("call_id") or item.get("id")
                tool_calls.append({"id": call_id, "type": "function",
                                   "function": {"name": item.get("name"), "arguments": item.get("arguments")}})
                pending.append((call_id, item.get("name"), from_json_text(item.get("arguments"))))
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text) if text else None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        usage = raw.get("usage") or {}
        finish = "tool_calls" if tool_calls else raw.get("status")
        return Summary(response_model=raw.get("model"), response_id=raw.get("id"), finish_reasons=[finish],
                       input_tokens=usage.get("input_tokens"), output_tokens=usage.get("output_tokens"),
                       output_messages=[{k: v for k, v in message.items() if v is not None}], tool_calls=pending)

    def new_accumulator(self) -> ResponsesAccumulator:
        return ResponsesAccumulator()

    def rehydrate(self, raw: dict, kwargs: dict | None = None) -> Any:
        from openai.types.responses import Response

        return rehydrate_model(Response, raw)

    def synthesize(self, text: str, model: str | None) -> dict:
        return {"id": "resp_tracefix_intervention", "object": "response", "created_at": time.time(),
                "model": model or "unknown", "status": "completed", "parallel_tool_calls": True,
                "tool_choice": "auto", "tools": [],
                "output": [{"type": "message", "id": "msg_tracefix_intervention", "role": "assistant",
                            "status": "completed",
                            "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                          "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}}}

    def fake_stream(self, raw: dict, kwargs: dict, is_async: bool) -> Any:
        """response.created then response.completed, both carrying the recorded response."""
        from openai.types.responses import ResponseCompletedEvent, ResponseCreatedEvent

        from .streaming import AsyncRecordedStream, RecordedStream

        events = [rehydrate_model(ResponseCreatedEvent, {"type": "response.created", "sequence_number": 0,
                                                         "response": {**raw, "status": "in_progress"}}),
                  rehydrate_model(ResponseCompletedEvent, {"type": "response.completed", "sequence_number": 1,
                                                           "response": raw})]
        return AsyncRecordedStream(events) if is_async else RecordedStream(events)
