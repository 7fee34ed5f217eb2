"""Adapter for Anthropic `messages.create`: recorded in the same chat-message JSON as OpenAI.

``system`` becomes a leading system message; ``tool_use`` blocks become ``tool_calls``.
"""
from __future__ import annotations

import json
from typing import Any

from .llm import Request, Summary, parsed, rehydrate_model, is_given, request_params
from .replay_mode import normalize_messages, normalize_tools

_CONSUMED = ("model", "messages", "system", "tools", "stream", "extra_headers", "extra_query", "extra_body",
             "timeout")


class MessageAccumulator:
    """Folds Anthropic stream events into the equivalent Message JSON."""

    def __init__(self) -> None:
        self.message: dict | None = None
        self.blocks: dict[int, dict] = {}
        self.partial_json: dict[int, list[str]] = {}

    def add(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.message = event.message.model_dump(mode="json", exclude_unset=True)
        elif kind == "content_block_start":
            self.blocks[event.index] = event.content_block.model_dump(mode="json", exclude_unset=True)
        elif kind == "content_block_delta":
            block = self.blocks.setdefault(event.index, {"type": "text", "text": ""})
            delta = event.delta
            if delta.type == "text_delta":
                block["text"] = block.get("text", "") + delta.text
            elif delta.type == "input_json_delta":
                self.partial_json.setdefault(event.index, []).append(delta.partial_json)
        elif kind == "message_delta" and self.message is not None:
            self.message["stop_reason"] = event.delta.stop_reason
            self.message["stop_sequence"] = event.delta.stop_sequence
            usage = self.message.setdefault("usage", {})
            usage["output_tokens"] = event.usage.output_tokens
            if getattr(event.usage, "input_tokens", None):
                usage["input_tokens"] = event.usage.input_tokens

    def raw(self) -> dict | None:
        if self.message is None:
            return None
        content = []
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            if index in self.partial_json:
                text = "".join(self.partial_json[index])
                try:
                    block["input"] = json.loads(text) if text else {}
                except ValueError:
                    block["input"] = text
            content.append(block)
        return {**self.message, "content": content}


class AnthropicMessages:
    provider = "anthropic"
    operation = "chat"

    def parse_request(self, kwargs: dict) -> Request:
        messages = []
        system = kwargs.get("system")
        if is_given(system) and system:
            messages.append({"role": "system", "content": system if isinstance(system, str)
                             else normalize_messages(system)})
        messages.extend(normalize_messages(kwargs.get("messages")))
        return Request(model=kwargs.get("model"), messages=messages, tools=normalize_tools(kwargs.get("tools")),
                       params=request_params(kwargs, _CONSUMED),
                       stream=bool(kwargs.get("stream")) and is_given(kwargs.get("stream")))

    def add_messages(self, kwargs: dict, extra: list) -> dict:
        # Anthropic has no system role inside `messages`: added messages speak as the user
        converted = [{**m, "role": "user" if m.get("role") == "system" else m.get("role", "user")} for m in extra]
        return {**kwargs, "messages": [*kwargs.get("messages", ()), *converted]}

    def is_stream(self, result: Any) -> bool:
        return hasattr(result, "__next__") or hasattr(result, "__anext__")

    def response_raw(self, result: Any) -> dict:
        return parsed(result).model_dump(mode="json", exclude_unset=True)

    def summarize(self, raw: dict) -> Summary:
        text, tool_calls, pending = [], [], []
        for block in raw.get("content") or []:
            if block.get("type") == "text":
                text.append(block.get("text") or "")
            elif block.get("type") == "tool_use":
                arguments = block.get("input") or {}
                tool_calls.append({"id": block.get("id"), "type": "function",
                                   "function": {"name": block.get("name"), "arguments": json.dumps(arguments)}})
                pending.append((block.get("id"), block.get("name"), arguments))
        message: dict[str, Any] = {"role": "assistant"}
        if text:
            message["content"] = "".join(text)
        if tool_calls:
            message["tool_calls"] = tool_calls
        usage = raw.get("usage") or {}
        return Summary(response_model=raw.get("model"), response_id=raw.get("id"),
                       finish_reasons=[raw.get("stop_reason")], input_tokens=usage.get("input_tokens"),
                       output_tokens=usage.get("output_tokens"), output_messages=[message], tool_calls=pending)

    def new_accumulator(self) -> MessageAccumulator:
        return MessageAccumulator()

    def rehydrate(self, raw: dict, kwargs: dict | None = None) -> Any:
        from anthropic.types import Message

        return rehydrate_model(Message, raw)

    def synthesize(self, text: str, model: str | None) -> dict:
        return {"id": "msg_tracefix_intervention", "type": "message", "role": "assistant",
                "model": model or "unknown", "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": 0}}

    def fake_stream(self, raw: dict, kwargs: dict, is_async: bool) -> Any:
        from anthropic.types import (RawContentBlockDeltaEvent, RawContentBlockStartEvent,
                                     RawContentBlockStopEvent, RawMessageDeltaEvent, RawMessageStartEvent,
                                     RawMessageStopEvent)

        from .streaming import AsyncRecordedStream, RecordedStream

        usage = raw.get("usage") or {}
        start = {**raw, "content": [], "stop_reason": None, "stop_sequence": None}
        events: list = [rehydrate_model(RawMessageStartEvent, {"type": "message_start", "message": start})]
        for index, block in enumerate(raw.get("content") or []):
            if block.get("type") == "tool_use":
                events.append(rehydrate_model(RawContentBlockStartEvent, 
                    {"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}}))
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block.get("input") or {})}
            else:
                events.append(rehydrate_model(RawContentBlockStartEvent, 
                    {"type": "content_block_start", "index": index, "content_block": {**block, "text": ""}}))
                delta = {"type": "text_delta", "text": block.get("text") or ""}
            events.append(rehydrate_model(RawContentBlockDeltaEvent, 
                {"type": "content_block_delta", "index": index, "delta": delta}))
            events.append(rehydrate_model(RawContentBlockStopEvent, {"type": "content_block_stop", "index": index}))
        events.append(rehydrate_model(RawMessageDeltaEvent, 
            {"type": "message_delta", "delta": {"stop_reason": raw.get("stop_reason"),
                                                "stop_sequence": raw.get("stop_sequence")},
             "usage": {"output_tokens": usage.get("output_tokens", 0)}}))
        events.append(rehydrate_model(RawMessageStopEvent, {"type": "message_stop"}))
        return AsyncRecordedStream(events) if is_async else RecordedStream(events)
