"""Adapter for OpenAI `chat.completions.create`: request, response, stream chunks, replay types.

Imports `openai` only inside functions: `import tracefix` stays free of it.
"""
from __future__ import annotations

import time
from typing import Any

from .attributes import from_json_text
from .llm import Request, Summary, parsed, rehydrate_model, is_given, request_params
from .replay_mode import normalize_messages, normalize_tools

_CONSUMED = ("model", "messages", "tools", "stream", "extra_headers", "extra_query", "extra_body", "timeout")


class ChatAccumulator:
    """Folds ChatCompletionChunks into the equivalent ChatCompletion JSON."""

    def __init__(self) -> None:
        self.id = self.model = self.created = self.system_fingerprint = self.service_tier = None
        self.choices: dict[int, dict] = {}
        self.usage: dict | None = None

    def add(self, chunk: Any) -> None:
        if self.id is None:
            self.id, self.model, self.created = chunk.id, chunk.model, chunk.created
        if getattr(chunk, "system_fingerprint", None):
            self.system_fingerprint = chunk.system_fingerprint
        if getattr(chunk, "service_tier", None):
            self.service_tier = chunk.service_tier
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = usage.model_dump(mode="json", exclude_none=True)
        for choice in chunk.choices or ():
            acc = self.choices.get(choice.index)
            if acc is None:
                acc = self.choices[choice.index] = {"role": None, "content": [], "refusal": [],
                                                    "tool_calls": {}, "finish_reason": None}
            delta = choice.delta
            if delta is not None:
                if delta.role:
                    acc["role"] = delta.role
                if delta.content:
                    acc["content"].append(delta.content)
                if getattr(delta, "refusal", None):
                    acc["refusal"].append(delta.refusal)
                for tc in delta.tool_calls or ():
                    entry = acc["tool_calls"].get(tc.index)
                    if entry is None:
                        entry = acc["tool_calls"][tc.index] = {"id": None, "type": "function", "name": [],
                                                               "arguments": []}
                    if tc.id:
                        entry["id"] = tc.id
                    if tc.function is not None:
                        if tc.function.name:
                            entry["name"].append(tc.function.name)
                        if tc.function.arguments:
                            entry["arguments"].append(tc.function.arguments)
            if choice.finish_reason:
                acc["finish_reason"] = choice.finish_reason

    def raw(self) -> dict | None:
        if self.id is None:
            return None
        choices = []
        for index in sorted(self.choices):
            acc = self.choices[index]
            message: dict[str, Any] = {"role": acc["role"] or "assistant",
                                       "content": "".join(acc["content"]) if acc["content"] else None}
            if acc["refusal"]:
                message["refusal"] = "".join(acc["refusal"])
            if acc["tool_calls"]:
                message["tool_calls"] = [
                    {"id": e["id"], "type": e["type"],
                     "function": {"name": "".join(e["name"]), "arguments": "".join(e["arguments"])}}
                    for _, e in sorted(acc["tool_calls"].items())]
            choices.append({"index": index, "message": message, "finish_reason": acc["finish_reason"]})
        raw: dict[str, Any] = {"id": self.id, "object": "chat.completion", "created": self.created,
                               "model": self.model, "choices": choices}
        if self.usage is not None:
            raw["usage"] = self.usage
        if self.system_fingerprint:
            raw["system_fingerprint"] = self.system_fingerprint
        if self.service_tier:
            raw["service_tier"] = self.service_tier
        return raw


class OpenAIChat:
    provider = "openai"
    operation = "chat"

    def parse_request(self, kwargs: dict) -> Request:
        return Request(model=kwargs.get("model"), messages=normalize_messages(kwargs.get("messages")),
                       tools=normalize_tools(kwargs.get("tools")), params=request_params(kwargs, _CONSUMED),
                       stream=bool(kwargs.get("stream")) and is_given(kwargs.get("stream")))

    def add_messages(self, kwargs: dict, extra: list) -> dict:
        return {**kwargs, "messages": [*kwargs.get("messages", ()), *extra]}

    def is_stream(self, result: Any) -> bool:
        return hasattr(result, "__next__") or hasattr(result, "__anext__")

    def response_raw(self, result: Any) -> dict:
        return parsed(result).model_dump(mode="json", exclude_unset=True)

    def summarize(self, raw: dict) -> Summary:
        choices = raw.get("choices") or []
        usage = raw.get("usage") or {}
        messages, tool_calls = [], []
        for choice in choices:
            message = {k: v for k, v in (choice.get("message") or {}).items() if v is not None}
            messages.append(message)
        if choices:
            for tc in (choices[0].get("message") or {}).get("tool_calls") or ():
                function = tc.get("function") or {}
                tool_calls.append((tc.get("id"), function.get("name"), from_json_text(function.get("arguments"))))
        return Summary(response_model=raw.get("model"), response_id=raw.get("id"),
                       finish_reasons=[c.get("finish_reason") for c in choices],
                       input_tokens=usage.get("prompt_tokens"), output_tokens=usage.get("completion_tokens"),
                       output_messages=messages, tool_calls=tool_calls)

    def new_accumulator(self) -> ChatAccumulator:
        return ChatAccumulator()

    def rehydrate(self, raw: dict, kwargs: dict | None = None) -> Any:
        from openai.types.chat import ChatCompletion

        return rehydrate_model(ChatCompletion, raw)

    def synthesize(self, text: str, model: str | None) -> dict:
        return {"id": "chatcmpl-tracefix-intervention", "object": "chat.completion", "created": int(time.time()),
                "model": model or "unknown",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}

    def fake_stream(self, raw: dict, kwargs: dict, is_async: bool) -> Any:
        """Chunks equivalent to the recorded response: content and tool calls, then the
        finish reason, then usage when the request asked for it (stream_options)."""
        from openai.types.chat import ChatCompletionChunk

        from .streaming import AsyncRecordedStream, RecordedStream

        head = {"id": raw.get("id"), "object": "chat.completion.chunk", "created": raw.get("created") or 0,
                "model": raw.get("model")}
        if raw.get("system_fingerprint"):
            head["system_fingerprint"] = raw["system_fingerprint"]
        chunks = []
        for choice in raw.get("choices") or []:
            message = choice.get("message") or {}
            delta: dict[str, Any] = {"role": message.get("role") or "assistant"}
            if message.get("content") is not None:
                delta["content"] = message["content"]
            if message.get("refusal"):
                delta["refusal"] = message["refusal"]
            if message.get("tool_calls"):
                delta["tool_calls"] = [{"index": i, "id": tc.get("id"), "type": "function",
                                        "function": tc.get("function")}
                                       for i, tc in enumerate(message["tool_calls"])]
            chunks.append({**head, "choices": [{"index": choice.get("index", 0), "delta": delta,
                                                "finish_reason": None}]})
            chunks.append({**head, "choices": [{"index": choice.get("index", 0), "delta": {},
                                                "finish_reason": choice.get("finish_reason")}]})
        options = kwargs.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage") and raw.get("usage"):
            chunks.append({**head, "choices": [], "usage": raw["usage"]})
        objects = [rehydrate_model(ChatCompletionChunk, c) for c in chunks]
        return AsyncRecordedStream(objects) if is_async else RecordedStream(objects)


class OpenAIChatParse(OpenAIChat):
    """`chat.completions.parse` (structured outputs): traced like create; a replay hands
    back a ParsedChatCompletion parsed against the request's response_format and tools."""

    def rehydrate(self, raw: dict, kwargs: dict | None = None) -> Any:
        completion = super().rehydrate(raw)
        try:
            from openai import NOT_GIVEN
            from openai.lib._parsing._completions import parse_chat_completion

            kwargs = kwargs or {}
            return parse_chat_completion(response_format=kwargs.get("response_format", NOT_GIVEN),
                                         input_tools=kwargs.get("tools", NOT_GIVEN), chat_completion=completion)
        except Exception:  # SDK internals moved: the plain completion still carries the content
            return completion
