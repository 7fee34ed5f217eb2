"""A JSON Schema of the GenAI semantic conventions' message attributes (v1.41.0), written
from the conventions' text (docs/gen-ai/gen-ai-spans.md, gen-ai-input-messages.json,
gen-ai-output-messages.json, gen-ai-system-instructions.json; the published files are on no
registry reachable here), and the inference span's attribute rules the tests hold spans to.

Written here, never imported by tracefix: the instrumentation cannot pass by agreeing with
itself. What the conventions leave open stays open (a role or finish reason outside the
enums is a string; any part type is a GenericPart; objects admit more properties).
"""
from __future__ import annotations

import json
from typing import Any

import jsonschema

_TYPED = {"type": "string"}
DEFS: dict[str, Any] = {
    "Role": {"enum": ["system", "user", "assistant", "tool"], "type": "string"},
    "FinishReason": {"enum": ["stop", "length", "content_filter", "tool_call", "error"], "type": "string"},
    "Modality": {"enum": ["image", "video", "audio"], "type": "string"},
    "TextPart": {"type": "object", "additionalProperties": True, "required": ["type", "content"],
                 "properties": {"type": {"const": "text"}, "content": {"type": "string"}}},
    "ToolCallRequestPart": {"type": "object", "additionalProperties": True, "required": ["type", "name"],
                            "properties": {"type": {"const": "tool_call"}, "id": {"type": ["string", "null"]},
                                           "name": {"type": "string"}, "arguments": {}}},
    "ToolCallResponsePart": {"type": "object", "additionalProperties": True, "required": ["type", "response"],
                             "properties": {"type": {"const": "tool_call_response"},
                                            "id": {"type": ["string", "null"]}, "response": {}}},
    "BlobPart": {"type": "object", "additionalProperties": True, "required": ["type", "modality", "content"],
                 "properties": {"type": {"const": "blob"}, "mime_type": {"type": ["string", "null"]},
                                "modality": {"anyOf": [{"$ref": "#/$defs/Modality"}, _TYPED]},
                                "content": {"type": "string"}}},
    "UriPart": {"type": "object", "additionalProperties": True, "required": ["type", "modality", "uri"],
                "properties": {"type": {"const": "uri"}, "mime_type": {"type": ["string", "null"]},
                               "modality": {"anyOf": [{"$ref": "#/$defs/Modality"}, _TYPED]},
                               "uri": {"type": "string"}}},
    "ReasoningPart": {"type": "object", "additionalProperties": True, "required": ["type", "content"],
                      "properties": {"type": {"const": "reasoning"}, "content": {"type": "string"}}},
    # any other type; the named ones must match their own definition (a "text" part without
    # content is no GenericPart)
    "GenericPart": {"type": "object", "additionalProperties": True, "required": ["type"],
                    "properties": {"type": {"type": "string", "not": {"enum": [
                        "text", "tool_call", "tool_call_response", "blob", "uri", "reasoning"]}}}},
    "Part": {"anyOf": [{"$ref": f"#/$defs/{name}"} for name in (
        "TextPart", "ToolCallRequestPart", "ToolCallResponsePart", "BlobPart", "UriPart", "ReasoningPart",
        "GenericPart")]},
    "ChatMessage": {"type": "object", "additionalProperties": True, "required": ["role", "parts"],
                    "properties": {"role": {"anyOf": [{"$ref": "#/$defs/Role"}, _TYPED]},
                                   "name": {"type": ["string", "null"]},
                                   "parts": {"type": "array", "items": {"$ref": "#/$defs/Part"}}}},
    "OutputMessage": {"allOf": [{"$ref": "#/$defs/ChatMessage"}, {
        "required": ["finish_reason"],
        "properties": {"finish_reason": {"anyOf": [{"$ref": "#/$defs/FinishReason"}, _TYPED]}}}]},
}
INPUT_MESSAGES = {"$defs": DEFS, "type": "array", "items": {"$ref": "#/$defs/ChatMessage"}}
OUTPUT_MESSAGES = {"$defs": DEFS, "type": "array", "items": {"$ref": "#/$defs/OutputMessage"}}
SYSTEM_INSTRUCTIONS = {"$defs": DEFS, "type": "array", "items": {"$ref": "#/$defs/Part"}}

_MESSAGE_ATTRIBUTES = {"gen_ai.input.messages": INPUT_MESSAGES, "gen_ai.output.messages": OUTPUT_MESSAGES,
                       "gen_ai.system_instructions": SYSTEM_INSTRUCTIONS}
# the inference span's Required attributes, and the types of those the tests check
_REQUIRED = ("gen_ai.operation.name", "gen_ai.provider.name")
_TYPES = {"gen_ai.request.model": str, "server.address": str, "server.port": int,
          "gen_ai.usage.input_tokens": int, "gen_ai.usage.output_tokens": int, "gen_ai.response.id": str}


def check_inference_span(attrs: Any) -> None:
    """Raise AssertionError / jsonschema.ValidationError unless `attrs` (a span's attributes)
    follow the conventions for an inference span with content captured."""
    attrs = dict(attrs)
    for key in _REQUIRED:
        assert attrs.get(key), f"{key} is required"
    for key, kind in _TYPES.items():
        if key in attrs:
            assert type(attrs[key]) is kind, f"{key}: {attrs[key]!r} is no {kind.__name__}"
    if "server.address" in attrs:  # Conditionally Required: if server.address is set
        assert "server.port" in attrs, "server.port is required where server.address is set"
    finish = attrs.get("gen_ai.response.finish_reasons")
    if finish is not None:
        assert isinstance(finish, (list, tuple)) and all(type(r) is str for r in finish), finish
    for key, schema in _MESSAGE_ATTRIBUTES.items():
        if key in attrs:
            assert type(attrs[key]) is str, f"{key} is written as JSON text"
            jsonschema.validate(json.loads(attrs[key]), schema)
