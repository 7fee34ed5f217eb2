"""Adapter for Anthropic `messages.create`: recorded in the same chat-message JSON as OpenAI.

``system`` becomes a leading system message; ``tool_use`` blocks become ``tool_calls``.
A stream is recorded as the Message it assembles to, thinking and its signature included
(:class:`MessageAccumulator`), and as the API's events, replayed as recorded; without them
(too large for TRACEFIX_MAX_PAYLOAD_BYTES, or an older recording) as events made for the
Message (:func:`stream_events`).
"""
from __future__ import annotations

import json
from typing import Any

from .attributes import warn_once
from .llm import Request, Summary, parsed, rehydrate_model, rehydrate_union, is_given, request_params
from .fingerprints import normalize_messages, normalize_tools

_CONSUMED = ("model", "messages", "system", "tools", "stream", "extra_headers", "extra_query", "extra_body",
             "timeout")


class MessageAccumulator:
    """Folds Anthropic stream events into the Message JSON they stand for, as the SDK's own
    `MessageStream` does (its fold, `accumulate_event`, is private): every
    `RawContentBlockDelta` type, and every field a ``message_delta`` carries. A delta type
    this does not know is reported once, not dropped silently; a test enumerates the SDK's
    delta union so a new type fails CI first."""

    def __init__(self) -> None:
        self.message: dict | None = None
        self.blocks: dict[int, dict] = {}
        # streamed text per (block index, field), joined once at the end: no quadratic appends
        self.pieces: dict[tuple[int, str], list[str]] = {}
        self.citations: dict[int, list[dict]] = {}

    def add(self, event: Any) -> None:
        kind = event.type
        if kind == "content_block_delta":  # by far the most frequent
            self._add_delta(event.index, event.delta)
        elif kind == "message_start":
            self.message = event.message.model_dump(mode="json", exclude_unset=True)
        elif kind == "content_block_start":
            self.blocks[event.index] = event.content_block.model_dump(mode="json", exclude_unset=True)
        elif kind == "message_delta" and self.message is not None:
            # stop_* are the delta's answer even when null; other fields (container, ...) only
            # when present; usage counts are cumulative, so they overwrite
            delta = event.delta.model_dump(mode="json")
            self.message.update({k: v for k, v in delta.items() if v is not None or k.startswith("stop_")})
            usage = self.message.setdefault("usage", {})
            usage.update(event.usage.model_dump(mode="json", exclude_none=True))

    def _add_delta(self, index: int, delta: Any) -> None:
        kind = delta.type
        if kind == "text_delta":
            self.pieces.setdefault((index, "text"), []).append(delta.text)
        elif kind == "input_json_delta":
            self.pieces.setdefault((index, "input"), []).append(delta.partial_json)
        elif kind == "thinking_delta":
            self.pieces.setdefault((index, "thinking"), []).append(delta.thinking)
        elif kind == "signature_delta":
            self.blocks.setdefault(index, {"type": "thinking"})["signature"] = delta.signature  # one, whole
        elif kind == "citations_delta":
            self.citations.setdefault(index, []).append(delta.citation.model_dump(mode="json", exclude_unset=True))
        else:
            warn_once(f"anthropic-delta:{kind}", "tracefix: Anthropic stream delta %r is not recorded", kind)

    def raw(self) -> dict | None:
        if self.message is None:
            return None
        blocks = {index: dict(block) for index, block in self.blocks.items()}
        for (index, field), pieces in self.pieces.items():
            block = blocks.setdefault(index, {"type": field if field != "input" else "tool_use"})
            text = "".join(pieces)
            if field == "input":
                try:
                    block["input"] = json.loads(text) if text else block.get("input", {})
                except ValueError:  # cut off mid-JSON (an abandoned stream): keep what came
                    block["input"] = text
            else:
                block[field] = (block.get(field) or "") + text
        for index, citations in self.citations.items():
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            block["citations"] = [*(block.get("citations") or []), *citations]
        return {**self.message, "content": [blocks[index] for index in sorted(blocks)]}


class AnthropicMessages:
    provider = "anthropic"
    operation = "chat"

    def parse_request(self, kwargs: dict) -> Request:
        messages = []
        system = kwargs.get("system")
        if is_given(system) and system:
            messages.append({"role": "system", "content": system if isinstance(system, str)
                             else normalize_messages(system)})
        separate_system = bool(messages)
        messages.extend(normalize_messages(kwargs.get("messages")))
        return Request(model=kwargs.get("model"), messages=messages, tools=normalize_tools(kwargs.get("tools")),
                       params=request_params(kwargs, _CONSUMED),
                       stream=bool(kwargs.get("stream")) and is_given(kwargs.get("stream")),
                       separate_system=separate_system)

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

    def stream_event(self, event: Any) -> dict | None:
        """An API event as the API sent it (the fields it set, no defaults), to stream again;
        None for the events `messages.stream()`'s MessageStream derives from them (text,
        thinking, ...), which it derives again on replay. Its stop events carry a snapshot
        the API did not send: left out."""
        kind = event.type
        if kind not in _API_EVENTS:
            return None
        data = event.model_dump(mode="json", exclude_unset=True)
        if kind == "content_block_stop":
            data.pop("content_block", None)
        elif kind == "message_stop":
            data.pop("message", None)
        return data

    def fake_stream(self, raw: dict, kwargs: dict, is_async: bool, recorded: list[dict] | None = None) -> Any:
        """The API events recorded live, in order (`recorded`), else events made from `raw`."""
        from anthropic.types import RawMessageStreamEvent

        from .streaming import AsyncRecordedStream, RecordedStream

        events = [rehydrate_union(RawMessageStreamEvent, event) for event in recorded or stream_events(raw)]
        return AsyncRecordedStream(events) if is_async else RecordedStream(events)


# the API's stream events (RawMessageStreamEvent); MessageStream adds its own between them
_API_EVENTS = frozenset({"message_start", "message_delta", "message_stop", "content_block_start",
                         "content_block_delta", "content_block_stop"})

# blocks whose `input` streams as input_json_delta (the SDK's TRACKS_TOOL_INPUT)
_TOOL_INPUT_BLOCKS = ("tool_use", "server_tool_use")


def _block_events(block: dict) -> tuple[dict, list[dict]]:
    """A content block as the API streams it: the start (streamed fields empty), then the deltas."""
    kind = block.get("type")
    if kind == "text":
        citations = block.get("citations")
        # the API sends a citation ahead of the text that cites it
        deltas = [{"type": "citations_delta", "citation": c} for c in citations or ()]
        deltas.append({"type": "text_delta", "text": block.get("text") or ""})
        return {**block, "text": "", **({"citations": None} if citations else {})}, deltas
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": block.get("thinking") or ""}]
        if block.get("signature"):
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        return {**block, "thinking": "", "signature": ""}, deltas
    if kind in _TOOL_INPUT_BLOCKS:
        value = block.get("input")
        text = value if isinstance(value, str) else json.dumps(value if value is not None else {})
        return {**block, "input": {}}, [{"type": "input_json_delta", "partial_json": text}]
    return block, []  # redacted thinking, server tool results: they arrive whole


def stream_events(raw: dict) -> list[dict]:
    """The stream events (JSON) the API sends for the Message `raw`: folded by the SDK's
    MessageStream (or by :class:`MessageAccumulator`) they give `raw` back."""
    start = {**raw, "content": [], "stop_reason": None, "stop_sequence": None}
    if "stop_details" in raw:
        start["stop_details"] = None
    events: list[dict] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(raw.get("content") or []):
        first, deltas = _block_events(block)
        events.append({"type": "content_block_start", "index": index, "content_block": first})
        events += [{"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas]
        events.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": raw.get("stop_reason"), "stop_sequence": raw.get("stop_sequence")}
    delta.update({key: raw[key] for key in ("stop_details", "container") if key in raw})
    events.append({"type": "message_delta", "delta": delta,
                   "usage": {"output_tokens": 0, **(raw.get("usage") or {})}})
    events.append({"type": "message_stop"})
    return events
