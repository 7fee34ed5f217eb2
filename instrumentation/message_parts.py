"""Messages in the GenAI semantic conventions' shape: a role and a list of typed `parts`.

What `gen_ai.input.messages`, `gen_ai.output.messages` and `gen_ai.system_instructions`
hold (semconv.GENAI_SEMCONV_VERSION; docs/contracts.md §2 has the shape). Each is a second
serialization of the request and the response: the request as the SDK sent it is what
tracefix hashes (`tracefix.request.fingerprint`) and what a replay compares, and the
response as the provider sent it (`tracefix.response.raw`, `tracefix.response.stream`) is
what a replay serves. These are for the readers of the conventions (other GenAI consumers,
the collector). Pure functions of already-normalized JSON (`fingerprints.normalize_messages`).

A tool call's `arguments` are kept as the model wrote them (a JSON string from OpenAI, an
object from Anthropic): the conventions allow any value, and the string is the only form
that gives the call back byte for byte. A part of a kind the conventions do not name
(files, audio transcripts, a provider's own) goes through as it is (their GenericPart).
"""
from __future__ import annotations

from typing import Any

from .attributes import dumps

# provider finish reasons -> the conventions' FinishReason (any other value is kept as it is)
_FINISH_REASONS = {
    "tool_calls": "tool_call", "function_call": "tool_call", "tool_use": "tool_call",  # OpenAI, Anthropic
    "end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "refusal": "content_filter",
    "completed": "stop", "incomplete": "length", "failed": "error",  # a Response's status
}
_TEXT_TYPES = ("text", "input_text", "output_text")


def text_part(content: Any) -> dict:
    """A TextPart; its content is text (none for null, any other value as JSON)."""
    if type(content) is not str:
        content = "" if content is None else dumps(content)
    return {"type": "text", "content": content}


def _tool_call(call_id: Any, name: Any, arguments: Any) -> dict:
    return {"type": "tool_call", "id": call_id, "name": name if type(name) is str else str(name), "arguments": arguments}


def _response_value(content: Any) -> Any:
    """A tool result as the model saw it: text parts joined to their text, else as it is."""
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") in _TEXT_TYPES for p in content):
        return "".join(p.get("text") or "" for p in content)
    return content


def _media(modality: str, url: Any) -> dict:
    """An image or audio given by URL: a `data:` URL inline (BlobPart), any other by reference (UriPart)."""
    if type(url) is str and url.startswith("data:") and ";base64," in url:
        head, _, data = url.partition(";base64,")
        return {"type": "blob", "modality": modality, "mime_type": head[5:] or None, "content": data}
    return {"type": "uri", "modality": modality, "uri": url}


def _part(item: Any) -> dict:
    """One content block (OpenAI chat or Responses, Anthropic) as a part."""
    if type(item) is not dict:
        return text_part(item)
    kind = item.get("type")
    if kind in _TEXT_TYPES:
        return text_part(item.get("text"))
    if kind == "image_url":
        image = item.get("image_url")
        return _media("image", image.get("url") if isinstance(image, dict) else image)
    if kind == "input_image" and item.get("image_url"):
        return _media("image", item["image_url"])
    if kind == "input_audio" and isinstance(item.get("input_audio"), dict):
        audio = item["input_audio"]
        return {"type": "blob", "modality": "audio", "mime_type": f"audio/{audio.get('format')}",
                "content": audio.get("data")}
    if kind == "image" and isinstance(item.get("source"), dict):  # Anthropic
        source = item["source"]
        if source.get("type") == "base64":
            return {"type": "blob", "modality": "image", "mime_type": source.get("media_type"),
                    "content": source.get("data")}
        return _media("image", source.get("url"))
    if kind == "tool_use":  # Anthropic: the assistant's call
        return _tool_call(item.get("id"), item.get("name"), item.get("input"))
    if kind == "tool_result":  # Anthropic: its result, in the user's turn
        return {"type": "tool_call_response", "id": item.get("tool_use_id"),
                "response": _response_value(item.get("content"))}
    if kind == "thinking":
        return {"type": "reasoning", "content": item.get("thinking") or ""}
    if type(kind) is str:
        return item
    return text_part(item.get("text") if "text" in item else item)


def _content_parts(content: Any) -> list[dict]:
    if content is None:
        return []
    if type(content) is str:
        return [{"type": "text", "content": content}]
    if isinstance(content, list):
        return [_part(item) for item in content]
    return [text_part(content)]


def _item_message(item: dict) -> dict:
    """A Responses input item that is no message (a function call, its output, reasoning)."""
    kind = item.get("type")
    if kind in ("function_call", "custom_tool_call"):
        arguments = item.get("arguments") if kind == "function_call" else item.get("input")
        return {"role": "assistant", "parts": [_tool_call(item.get("call_id") or item.get("id"), item.get("name"),
                                                          arguments)]}
    if kind in ("function_call_output", "custom_tool_call_output"):
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": item.get("call_id"),
                                           "response": _response_value(item.get("output"))}]}
    if kind == "reasoning":
        summary = "".join(p.get("text") or "" for p in item.get("summary") or () if isinstance(p, dict))
        return {"role": "assistant", "parts": [{"type": "reasoning", "content": summary}]}
    return {"role": "user", "parts": [item]}


def message(msg: Any) -> dict:
    """One chat message (OpenAI chat, a Responses input item, Anthropic) in the parts shape."""
    if type(msg) is not dict:
        return {"role": "user", "parts": [text_part(msg)]}
    role = msg.get("role")
    if len(msg) == 2 and type(msg.get("content")) is str and type(role) is str and role not in ("tool", "function"):
        return {"role": role, "parts": [{"type": "text", "content": msg["content"]}]}  # most messages: a role's text
    if role is None and msg.get("type") not in (None, "message"):
        return _item_message(msg)
    content = msg.get("content")
    if role in ("tool", "function"):  # a tool's result (chat completions; "function" is the legacy name)
        parts = [{"type": "tool_call_response", "id": msg.get("tool_call_id"), "response": _response_value(content)}]
        out: dict[str, Any] = {"role": "tool", "parts": parts}
    else:
        parts = _content_parts(content)
        for call in msg.get("tool_calls") or ():
            if isinstance(call, dict):
                function = call.get("function") or call.get("custom") or {}
                parts.append(_tool_call(call.get("id"), function.get("name"),
                                        function.get("arguments", function.get("input"))))
        legacy = msg.get("function_call")
        if isinstance(legacy, dict):
            parts.append(_tool_call(None, legacy.get("name"), legacy.get("arguments")))
        out = {"role": role or "user", "parts": parts}
    if msg.get("name"):
        out["name"] = msg["name"]
    return out


def input_messages(messages: list, separate_system: bool = False) -> tuple[list[dict] | None, list[dict]]:
    """(system instructions, input messages) in the parts shape. With `separate_system` the
    request's leading system message came from a parameter of its own (Anthropic's `system`,
    a Response's `instructions`): the conventions put that in `gen_ai.system_instructions`,
    and a system message that is part of the chat history stays in the messages."""
    system = None
    if separate_system and messages and isinstance(messages[0], dict) and messages[0].get("role") == "system":
        system = _content_parts(messages[0].get("content"))
        messages = messages[1:]
    return system, [message(m) for m in messages]


def finish_reason(reason: Any) -> str:
    """The conventions' finish reason; "error" where the provider gave none (a stream cut
    short before its last chunk: the generation did not finish)."""
    if reason is None:
        return "error"
    return _FINISH_REASONS.get(reason, reason) if type(reason) is str else str(reason)


def output_messages(messages: list, finish_reasons: list) -> list[dict]:
    """The response's messages (an adapter's `Summary.output_messages`, OpenAI chat shape)
    in the parts shape, each with its choice's finish reason."""
    out = []
    for index, msg in enumerate(messages):
        converted = message(msg)
        converted["role"] = converted["role"] if msg.get("role") else "assistant"
        reason = finish_reasons[index] if index < len(finish_reasons) else None
        converted["finish_reason"] = finish_reason(reason)
        out.append(converted)
    return out
