"""Adapter for OpenAI `chat.completions.create`: request, response, stream chunks, replay types.

A stream is recorded as the ChatCompletion it assembles to (:class:`ChatAccumulator`) and as
its chunks, replayed as recorded; without them (a recording too large for
TRACEFIX_MAX_PAYLOAD_BYTES, or an older one) as chunks that assemble to it again
(:func:`stream_chunks`). Imports `openai` only
inside functions: `import tracefix` stays free of it.
"""
from __future__ import annotations

import functools
import time
from typing import Any

from .llm import Request, Summary, parsed, rehydrate_model, is_given, request_params
from .fingerprints import normalize_messages

_CONSUMED = ("model", "messages", "tools", "stream", "extra_headers", "extra_query", "extra_body", "timeout")


def merge_delta(acc: dict, delta: dict) -> dict:
    """Fold one delta (JSON) into `acc` the way the SDK's `accumulate_delta` does: strings
    concatenate, numbers add, objects merge, lists of ``index``ed objects merge by index,
    other lists extend; ``index`` and ``type`` are replaced, never accumulated."""
    for key, value in delta.items():
        current = acc.get(key)
        if current is None:
            if isinstance(value, list) and any(isinstance(v, dict) and "index" in v for v in value):
                current = acc[key] = []  # indexed: merged entry by entry below
            else:
                acc[key] = value
                continue
        if key in ("index", "type"):
            acc[key] = value
        elif isinstance(current, str) and isinstance(value, str):
            acc[key] = current + value
        elif isinstance(current, (int, float)) and isinstance(value, (int, float)) and not isinstance(value, bool):
            acc[key] = current + value
        elif isinstance(current, dict) and isinstance(value, dict):
            merge_delta(current, value)
        elif isinstance(current, list) and isinstance(value, list):
            for entry in value:
                index = entry.get("index") if isinstance(entry, dict) else None
                if not isinstance(index, int):
                    current.append(entry)  # un-indexed entries (annotations) only ever add
                elif index < len(current) and isinstance(current[index], dict):
                    merge_delta(current[index], entry)
                else:
                    current.insert(index, dict(entry))
    return acc


class _Choice:
    __slots__ = ("content", "refusal", "message", "logprobs", "finish_reason", "extra")

    def __init__(self) -> None:
        self.content: list[str] | None = None  # None: no content delta at all (not even "")
        self.refusal: list[str] | None = None
        self.message: dict[str, Any] = {}  # role, tool_calls, function_call, audio, provider fields
        self.logprobs: dict[str, list] | None = None
        self.finish_reason: str | None = None
        self.extra: dict[str, Any] = {}


class ChatAccumulator:
    """Folds ChatCompletionChunks into the ChatCompletion JSON they stand for, field for field
    as the SDK's `ChatCompletionStreamState` does: content, refusal, role, tool calls, the
    legacy function_call, audio, logprobs (content and refusal tokens), and every field a
    provider adds to a delta (annotations, reasoning text, ...), merged the SDK's way
    (:func:`merge_delta`). Not `ChatCompletionStreamState` itself: it dumps and rebuilds
    the whole message on every chunk, 2.9 ms for a 21-chunk stream where this takes 30 µs,
    which alone would be several times tracefix's whole overhead on a streamed call. Tests
    hold the two to the same result."""

    def __init__(self) -> None:
        self.head: dict[str, Any] | None = None
        self.choices: dict[int, _Choice] = {}

    def add(self, chunk: Any) -> None:
        # attribute reads only on the common path: a model_dump per chunk would cost more
        # than all the rest; the rare fields are dumped when they appear. getattr for the
        # fields newer than the oldest SDK supported (openai 1.40)
        head = self.head
        if head is None:
            head = self.head = {"id": chunk.id, "object": "chat.completion", "created": chunk.created,
                                "model": chunk.model}
        if chunk.system_fingerprint is not None:
            head["system_fingerprint"] = chunk.system_fingerprint
        if getattr(chunk, "service_tier", None) is not None:
            head["service_tier"] = chunk.service_tier
        if chunk.usage is not None:  # the last chunk's, with stream_options.include_usage
            head["usage"] = chunk.usage.model_dump(mode="json", exclude_unset=True)
        if getattr(chunk, "moderation", None) is not None:
            head["moderation"] = chunk.moderation.model_dump(mode="json", exclude_unset=True)
        extra = chunk.model_extra
        if extra:  # a provider's own top-level fields
            head.update({k: v for k, v in extra.items() if v is not None and k != "obfuscation"})
        for choice in chunk.choices:
            acc = self.choices.get(choice.index)
            if acc is None:
                acc = self.choices[choice.index] = _Choice()
            delta = choice.delta
            if delta is not None:
                content = delta.content
                if content is not None:
                    if acc.content is None:
                        acc.content = []
                    acc.content.append(content)
                refusal = getattr(delta, "refusal", None)
                if refusal is not None:
                    if acc.refusal is None:
                        acc.refusal = []
                    acc.refusal.append(refusal)
                if delta.role:
                    acc.message["role"] = delta.role
                if delta.tool_calls is not None:
                    merge_delta(acc.message, {"tool_calls": [call.to_dict() for call in delta.tool_calls]})
                if delta.function_call is not None:
                    merge_delta(acc.message, {"function_call": delta.function_call.to_dict()})
                if getattr(delta, "audio", None) is not None:
                    merge_delta(acc.message, {"audio": delta.audio.to_dict()})
                extra = delta.model_extra
                if extra:  # annotations, provider fields (reasoning_content, ...)
                    merge_delta(acc.message, dict(extra))
            logprobs = choice.logprobs
            if logprobs is not None:
                if acc.logprobs is None:
                    acc.logprobs = {"content": None, "refusal": None}
                for key, tokens in (("content", logprobs.content), ("refusal", logprobs.refusal)):
                    if tokens is not None:
                        if acc.logprobs[key] is None:
                            acc.logprobs[key] = []
                        acc.logprobs[key].extend(tokens)
            if choice.finish_reason:
                acc.finish_reason = choice.finish_reason
            extra = choice.model_extra
            if extra:
                acc.extra.update(extra)

    def raw(self) -> dict | None:
        if self.head is None:
            return None
        choices = []
        for index in sorted(self.choices):
            acc = self.choices[index]
            message: dict[str, Any] = {"role": "assistant",
                                       "content": "".join(acc.content) if acc.content is not None else None}
            if acc.refusal is not None:
                message["refusal"] = "".join(acc.refusal)
            message.update(acc.message)
            if "tool_calls" in message:
                message["tool_calls"] = [{k: v for k, v in call.items() if k != "index"}
                                         for call in message["tool_calls"]]
            logprobs = None if acc.logprobs is None else {
                key: None if tokens is None else [t.model_dump(mode="json", exclude_unset=True) for t in tokens]
                for key, tokens in acc.logprobs.items()}
            choice = {"index": index, "message": message, "logprobs": logprobs, "finish_reason": acc.finish_reason}
            choices.append({**acc.extra, **choice})
        return {**self.head, "choices": choices}


class OpenAIChat:
    provider = "openai"
    operation = "chat"

    def parse_request(self, kwargs: dict) -> Request:
        tools = kwargs.get("tools")
        return Request(model=kwargs.get("model"), messages=normalize_messages(kwargs.get("messages")),
                       tools=list(tools) if is_given(tools) and tools else [],  # normalized only if need be
                       params=request_params(kwargs, _CONSUMED),
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
                tool_calls.append((tc.get("id"), function.get("name"), function.get("arguments")))
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

    def stream_event(self, chunk: Any) -> dict:
        """A chunk as the provider sent it (the fields it set, no defaults), to stream again."""
        return chunk.model_dump(mode="json", exclude_unset=True)

    def stream_events_json(self, chunks: list) -> str:
        """`[stream_event(c) for c in chunks]` as JSON text, written by pydantic in one call:
        a model_dump per chunk and the JSON of their list cost twice as much."""
        return _chunk_list().dump_json(chunks, exclude_unset=True, warnings=False).decode("utf-8")

    def fake_stream(self, raw: dict, kwargs: dict, is_async: bool, recorded: list[dict] | None = None) -> Any:
        """The chunks recorded live, in order (`recorded`), else chunks made from `raw`."""
        from openai.types.chat import ChatCompletionChunk

        from .streaming import AsyncRecordedStream, RecordedStream

        chunks = recorded if recorded else stream_chunks(raw, kwargs)
        objects = [rehydrate_model(ChatCompletionChunk, c) for c in chunks]
        return AsyncRecordedStream(objects) if is_async else RecordedStream(objects)


@functools.lru_cache(maxsize=1)
def _chunk_list() -> Any:
    from openai.types.chat import ChatCompletionChunk
    from pydantic import TypeAdapter

    return TypeAdapter(list[ChatCompletionChunk])


def stream_chunks(raw: dict, kwargs: dict) -> list[dict]:
    """The chunks (JSON) that stream the ChatCompletion `raw`: per choice, one delta with the
    whole message (content, refusal, tool calls, function_call, audio, annotations, any
    provider field) and its logprobs, then the finish reason; then usage when the request
    asked for it (stream_options). Folded by the SDK (or :class:`ChatAccumulator`) they
    give `raw` back."""
    head = {key: value for key, value in raw.items() if key not in ("choices", "usage", "object")}
    head.update({"object": "chat.completion.chunk", "created": raw.get("created") or 0})
    chunks = []
    for choice in raw.get("choices") or []:
        index = choice.get("index", 0)
        message = choice.get("message") or {}
        delta: dict[str, Any] = {key: value for key, value in message.items() if value is not None}
        delta["role"] = message.get("role") or "assistant"
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        extra = {key: value for key, value in choice.items()
                 if key not in ("index", "message", "finish_reason", "logprobs")}
        first = {**extra, "index": index, "delta": delta, "logprobs": choice.get("logprobs"), "finish_reason": None}
        chunks.append({**head, "choices": [first]})
        chunks.append({**head, "choices": [{"index": index, "delta": {}, "logprobs": None,
                                            "finish_reason": choice.get("finish_reason")}]})
    options = kwargs.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") and raw.get("usage"):
        chunks.append({**head, "choices": [], "usage": raw["usage"]})
    return chunks


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
