"""Adapter for OpenAI `responses.create`: input items as chat messages, output items back.

Recorded as a `chat` operation like chat completions: the input (``instructions`` first,
as a system message) and the output (text and function calls) are written in the same
chat-message JSON, so the collector and the replay read one format. A stream is recorded as
the Response it assembles to (:class:`ResponsesAccumulator`) and replayed as the API's event
sequence for it (:func:`stream_events`).
"""
from __future__ import annotations

import copy
import itertools
import time
from typing import Any

from .attributes import warn_once
from .llm import Request, Summary, parsed, rehydrate_model, rehydrate_union, is_given, request_params
from .fingerprints import normalize_messages, normalize_tools

_CONSUMED = ("model", "input", "instructions", "tools", "stream", "extra_headers", "extra_query", "extra_body",
             "timeout")


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


_FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
_LIFECYCLE_EVENTS = ("response.created", "response.in_progress", "response.queued", *_FINAL_EVENTS)
# delta events: (item field holding a list, index field of the event, part field) or
# (None, None, item field) for a field of the item itself
_DELTAS = {
    "response.output_text.delta": ("content", "content_index", "text"),
    "response.refusal.delta": ("content", "content_index", "refusal"),
    "response.reasoning_text.delta": ("content", "content_index", "text"),
    "response.reasoning_summary_text.delta": ("summary", "summary_index", "text"),
    "response.function_call_arguments.delta": (None, None, "arguments"),
    "response.custom_tool_call_input.delta": (None, None, "input"),
    "response.mcp_call_arguments.delta": (None, None, "arguments"),
    "response.code_interpreter_call_code.delta": (None, None, "code"),
}
_PARTS_ADDED = {"response.content_part.added": ("content", "content_index"),
                "response.reasoning_summary_part.added": ("summary", "summary_index")}
# Events whose content reaches the record another way: the item's `output_item.done`, the
# final response, or nowhere in a Response (progress notices, audio, partial images).
UNFOLDED_EVENTS = frozenset({
    "error", "response.output_text.done", "response.refusal.done", "response.content_part.done",
    "response.reasoning_text.done", "response.reasoning_summary_text.done", "response.reasoning_summary_part.done",
    "response.function_call_arguments.done", "response.custom_tool_call_input.done",
    "response.mcp_call_arguments.done", "response.code_interpreter_call_code.done",
    "response.audio.delta", "response.audio.done", "response.audio.transcript.delta",
    "response.audio.transcript.done", "response.compaction.compacting",
    "response.code_interpreter_call.in_progress", "response.code_interpreter_call.interpreting",
    "response.code_interpreter_call.completed", "response.file_search_call.in_progress",
    "response.file_search_call.searching", "response.file_search_call.completed",
    "response.web_search_call.in_progress", "response.web_search_call.searching",
    "response.web_search_call.completed", "response.image_generation_call.in_progress",
    "response.image_generation_call.generating", "response.image_generation_call.partial_image",
    "response.image_generation_call.completed", "response.mcp_call.in_progress", "response.mcp_call.completed",
    "response.mcp_call.failed", "response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed",
    "response.mcp_list_tools.failed", "response.shell_call_command.added", "response.shell_call_command.delta",
    "response.shell_call_command.done", "response.shell_call_output_content.delta",
    "response.shell_call_output_content.done",
})
FOLDED_EVENTS = frozenset({*_LIFECYCLE_EVENTS, "response.output_item.added", "response.output_item.done",
                           "response.output_text.annotation.added", *_DELTAS, *_PARTS_ADDED})


class ResponsesAccumulator:
    """Folds Responses stream events into the Response JSON. The lifecycle events carry the
    response (the last one wins); its output is rebuilt from the stream's items when the
    final event leaves `output` out (the API may: the SDK's stream helper recovers it the
    same way) or the stream ended early: each item as `output_item.done` gave it whole, else
    as far as its added event and deltas got. Deltas are kept as pieces and joined only
    when needed, so a completed stream costs a list append per delta."""

    def __init__(self) -> None:
        self.response: dict | None = None
        self.final = False
        self.items: dict[int, dict] = {}
        self.done: set[int] = set()
        self.pieces: dict[tuple[int, str | None, int | None, str], list[str]] = {}
        self.annotations: list[tuple[int, int, dict]] = []

    def add(self, event: Any) -> None:
        kind = event.type
        fold = _DELTAS.get(kind)
        if fold is not None:  # by far the most frequent
            container, index_field, field = fold
            key = (event.output_index, container, getattr(event, index_field) if index_field else None, field)
            self.pieces.setdefault(key, []).append(event.delta)
        elif kind in _LIFECYCLE_EVENTS:
            if not self.final:
                self.response = event.response.model_dump(mode="json", exclude_unset=True)
                self.final = kind in _FINAL_EVENTS
        elif kind == "response.output_item.added" and getattr(event, "item", None) is not None:
            self.items.setdefault(event.output_index, event.item.model_dump(mode="json", exclude_unset=True))
        elif kind == "response.output_item.done":
            self.items[event.output_index] = event.item.model_dump(mode="json", exclude_unset=True)
            self.done.add(event.output_index)
        elif kind in _PARTS_ADDED:
            container, index_field = _PARTS_ADDED[kind]
            item = self.items.get(event.output_index)
            if item is not None and event.output_index not in self.done:
                parts = item.setdefault(container, [])
                index = getattr(event, index_field)
                if index == len(parts):
                    parts.append(event.part.model_dump(mode="json", exclude_unset=True))
        elif kind == "response.output_text.annotation.added" and event.annotation is not None:
            annotation = event.annotation
            self.annotations.append((event.output_index, event.content_index,
                                     annotation.model_dump(mode="json", exclude_unset=True)
                                     if hasattr(annotation, "model_dump") else annotation))
        elif kind not in UNFOLDED_EVENTS:
            warn_once(f"responses-event:{kind}", "tracefix: Responses stream event %r is not recorded", kind)

    def raw(self) -> dict | None:
        if self.response is None:
            return None
        if self.final and self.response.get("output") is not None:
            return self.response
        return {**self.response, "output": [self._item(index) for index in sorted(self.items)]}

    def _item(self, index: int) -> dict:
        """An output item as the stream built it: whole if done, else added plus deltas."""
        item = copy.deepcopy(self.items[index])  # pieces go into a copy: raw() may run twice
        if index in self.done:
            return item
        for (output_index, container, part_index, field), pieces in self.pieces.items():
            if output_index != index:
                continue
            target = item
            if container is not None:
                parts = item.setdefault(container, [])
                if part_index is None or part_index >= len(parts):
                    continue
                target = parts[part_index]
            target[field] = (target.get(field) or "") + "".join(pieces)
        for output_index, content_index, annotation in self.annotations:
            parts = item.get("content") or []
            if output_index == index and content_index < len(parts):
                parts[content_index].setdefault("annotations", []).append(annotation)
        return item


class OpenAIResponses:
    provider = "openai"
    operation = "chat"

    def parse_request(self, kwargs: dict) -> Request:
        instructions = kwargs.get("instructions")
        return Request(model=kwargs.get("model"), messages=input_messages(kwargs),
                       tools=normalize_tools(kwargs.get("tools")), params=request_params(kwargs, _CONSUMED),
                       stream=bool(kwargs.get("stream")) and is_given(kwargs.get("stream")),
                       separate_system=bool(instructions) and is_given(instructions))

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
                pending.append((call_id, item.get("name"), item.get("arguments")))
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

    def stream_event(self, event: Any) -> dict:
        """An event as the API sent it (the fields it set, no defaults), to stream again: every
        event `create(stream=True)` yields is the API's; `responses.stream()` derives its own
        from them again on replay."""
        return event.model_dump(mode="json", exclude_unset=True)

    def fake_stream(self, raw: dict, kwargs: dict, is_async: bool, recorded: list[dict] | None = None) -> Any:
        """The events recorded live, in order (`recorded`), else events made from `raw`."""
        from openai.types.responses import ResponseStreamEvent

        from .streaming import AsyncRecordedStream, RecordedStream

        events = [rehydrate_union(ResponseStreamEvent, event) for event in recorded or stream_events(raw)]
        return AsyncRecordedStream(events) if is_async else RecordedStream(events)


def _item_events(index: int, item: dict) -> list[dict]:
    """One output item as the API streams it: added (its streamed fields empty), its parts
    and deltas with their done events, then done with the whole item."""
    kind, item_id = item.get("type"), item.get("id") or ""
    at = {"item_id": item_id, "output_index": index}
    events: list[dict] = []
    if kind == "message":
        events.append({"type": "response.output_item.added", "output_index": index,
                       "item": {**item, "content": [], "status": "in_progress"}})
        for c, part in enumerate(item.get("content") or []):
            at_part = {**at, "content_index": c}
            field = "refusal" if part.get("type") == "refusal" else "text"
            empty = {**part, field: ""}
            if field == "text":
                empty["annotations"] = []
                if "logprobs" in part:
                    empty["logprobs"] = []
            events.append({"type": "response.content_part.added", **at_part, "part": empty})
            value = part.get(field) or ""
            if field == "text":
                logprobs = part.get("logprobs") or []
                events.append({"type": "response.output_text.delta", **at_part, "delta": value, "logprobs": logprobs})
                for a, annotation in enumerate(part.get("annotations") or []):
                    events.append({"type": "response.output_text.annotation.added", **at_part,
                                   "annotation_index": a, "annotation": annotation})
                events.append({"type": "response.output_text.done", **at_part, "text": value, "logprobs": logprobs})
            else:
                events.append({"type": "response.refusal.delta", **at_part, "delta": value})
                events.append({"type": "response.refusal.done", **at_part, "refusal": value})
            events.append({"type": "response.content_part.done", **at_part, "part": part})
    elif kind == "function_call":
        arguments = item.get("arguments") or ""
        events.append({"type": "response.output_item.added", "output_index": index,
                       "item": {**item, "arguments": "", "status": "in_progress"}})
        events.append({"type": "response.function_call_arguments.delta", **at, "delta": arguments})
        events.append({"type": "response.function_call_arguments.done", **at, "arguments": arguments,
                       "name": item.get("name")})
    elif kind == "reasoning":
        events.append({"type": "response.output_item.added", "output_index": index,
                       "item": {**item, "summary": [], **({"content": []} if item.get("content") else {})}})
        for s, part in enumerate(item.get("summary") or []):
            at_part = {**at, "summary_index": s}
            text = part.get("text") or ""
            events.append({"type": "response.reasoning_summary_part.added", **at_part, "part": {**part, "text": ""}})
            events.append({"type": "response.reasoning_summary_text.delta", **at_part, "delta": text})
            events.append({"type": "response.reasoning_summary_text.done", **at_part, "text": text})
            events.append({"type": "response.reasoning_summary_part.done", **at_part, "part": part})
        for c, part in enumerate(item.get("content") or []):
            at_part = {**at, "content_index": c}
            text = part.get("text") or ""
            events.append({"type": "response.content_part.added", **at_part, "part": {**part, "text": ""}})
            events.append({"type": "response.reasoning_text.delta", **at_part, "delta": text})
            events.append({"type": "response.reasoning_text.done", **at_part, "text": text})
            events.append({"type": "response.content_part.done", **at_part, "part": part})
    else:  # tool calls of the platform (web search, file search, ...): they arrive whole
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def stream_events(raw: dict) -> list[dict]:
    """The stream events (JSON) the API sends for the Response `raw`: created and in
    progress, each output item with its deltas, then the final event (completed, incomplete or failed as its
    status says) carrying the whole response. Folded by the SDK's stream helper (or
    :class:`ResponsesAccumulator`) they give `raw` back."""
    final = {"incomplete": "response.incomplete", "failed": "response.failed"}.get(raw.get("status"),
                                                                                "response.completed")
    started = {**raw, "status": "in_progress", "output": []}
    events = [{"type": "response.created", "response": started}, {"type": "response.in_progress", "response": started}]
    for index, item in enumerate(raw.get("output") or []):
        events += _item_events(index, item)
    events.append({"type": final, "response": raw})
    sequence = itertools.count()
    return [{**event, "sequence_number": next(sequence)} for event in events]
