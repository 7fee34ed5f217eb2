"""How each instrumentation describes an LLM call, read into one shape.

Three dialects: tracefix / OpenTelemetry GenAI (`gen_ai.input.messages` as a JSON list),
OpenInference (`llm.input_messages.N.message.*`, `input.value`, `session.id`) and
OpenLLMetry (`gen_ai.prompt.N.*`, `gen_ai.completion.N.*`). Each is read into the same
columns (kind, agent, model, tokens, tool call) and the same canonical chat messages.
Pure functions of a span's attributes.
"""
from __future__ import annotations

import json
import math
from typing import Any

from tracefix import semconv as sc
from tracefix.collector import document
from tracefix.collector.normalize.json_text import dumps_compact, json_text, loads_fast

# Attribute keys whose content moves to the messages table (rebuilt by get_spans), so the
# span row does not carry the session's growing history once per LLM call.
CONTENT_ADDRESSED_KEYS = (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES)

SESSION_ATTRS = {
    sc.ENTRYPOINT: "entrypoint",
    sc.INPUTS: "inputs",
    sc.USER_ID: "user_id",
    "user.id": "user_id",
    sc.METADATA: "metadata",
    sc.OUTCOME: "outcome",
    sc.OUTCOME_SCORE: "score",
    sc.EVALUATION: "evaluation",
    sc.FINAL_OUTPUT: "output",
    sc.REPLAYABLE: "replayable",
    sc.PARENT_SESSION_ID: "parent_session_id",
    sc.INTERVENTION_ID: "intervention_id",
    sc.INTERVENTION: "intervention",
}
SESSION_ATTR_KEYS = frozenset(SESSION_ATTRS)
JSON_SESSION_FIELDS = {"inputs", "metadata", "evaluation", "output", "intervention"}

SESSION_ID_KEYS = (sc.SESSION_ID, sc.GEN_AI_CONVERSATION_ID, "session.id",
                   "traceloop.association.properties.session_id")

# a tuple, not a set: `op in LLM_OPERATIONS` must not hash op, which may be a list
LLM_OPERATIONS = ("chat", "text_completion", "generate_content", "completion")

# Where each dialect puts a column's value, in order of preference.
AGENT_KEYS = (sc.GEN_AI_AGENT_NAME, "agent.name")
MODEL_KEYS = (sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_REQUEST_MODEL, "llm.model_name")
PROVIDER_KEYS = (sc.GEN_AI_PROVIDER_NAME, "gen_ai.system", "llm.provider", "llm.system")
INPUT_TOKEN_KEYS = (sc.GEN_AI_USAGE_INPUT_TOKENS, "llm.token_count.prompt", "gen_ai.usage.prompt_tokens")
OUTPUT_TOKEN_KEYS = (sc.GEN_AI_USAGE_OUTPUT_TOKENS, "llm.token_count.completion", "gen_ai.usage.completion_tokens")
FINISH_REASON_KEYS = (sc.GEN_AI_RESPONSE_FINISH_REASONS, "gen_ai.completion.0.finish_reason", "llm.finish_reason",
                      "llm.response.finish_reason")
TOOL_NAME_KEYS = (sc.GEN_AI_TOOL_NAME, "tool.name", "traceloop.entity.name")
TOOL_CALL_ID_KEYS = (sc.GEN_AI_TOOL_CALL_ID, "tool_call.id")
TOOL_ARGUMENTS_KEYS = (sc.GEN_AI_TOOL_CALL_ARGUMENTS, "tool.parameters", "input.value", "traceloop.entity.input")
TOOL_RESULT_KEYS = (sc.GEN_AI_TOOL_CALL_RESULT, "output.value", "traceloop.entity.output")

# --- messages -----------------------------------------------------------------------------

CANONICAL_KEYS = frozenset(("role", "content", "name", "tool_calls", "tool_call_id"))  # the last three only when truthy


def canonical_message(msg: Any) -> dict:
    """Reduce a chat message (OpenAI shape or GenAI `parts` shape) to the fields we keep, each
    of the type readers take it for (document.typed_message). A message already in that
    shape (most are) is returned as it is, not copied."""
    if type(msg) is dict:  # the usual shapes first, as `typed_message` would return them: unchanged
        role, content = msg.get("role"), msg.get("content")
        if type(role) is str and role and type(content) is str and (
                len(msg) == 2 or (len(msg) == 3 and type(msg.get("tool_call_id")) is str and msg["tool_call_id"])):
            return msg
    if (type(msg) is dict and type(msg.get("content")) is str and msg.get("role") and msg.get("name", True)
            and msg.get("tool_calls", True) and msg.get("tool_call_id", True) and msg.keys() <= CANONICAL_KEYS):
        return document.typed_message(msg)
    if not isinstance(msg, dict):
        return {"role": "user", "content": msg if isinstance(msg, str) else json.dumps(msg)}
    out: dict[str, Any] = {"role": msg.get("role") or "user"}
    content = msg.get("content")
    tool_calls = msg.get("tool_calls")
    tool_call_id = msg.get("tool_call_id")
    if content is None and isinstance(msg.get("parts"), list):  # GenAI semconv message parts
        texts, calls = [], []
        for part in msg["parts"]:
            if not isinstance(part, dict):
                continue
            ptype = part.get("type")
            if ptype == "text":
                texts.append(part_text(part.get("content")))
            elif ptype == "tool_call":
                args = part.get("arguments")
                calls.append({"id": part.get("id"), "type": "function",
                              "function": {"name": part.get("name"),
                                           "arguments": args if isinstance(args, str) else json.dumps(args)}})
            elif ptype == "tool_call_response":
                tool_call_id = part.get("id")
                resp = part.get("response")
                texts.append(resp if isinstance(resp, str) else json.dumps(resp))
        content = "".join(texts) if texts else None
        tool_calls = tool_calls or calls or None
    if isinstance(content, list):  # OpenAI content parts
        content = "".join(part_text(p.get("text") if isinstance(p, dict) else p) for p in content)
    out["content"] = content
    if msg.get("name"):
        out["name"] = msg["name"]
    if tool_calls:
        out["tool_calls"] = tool_calls
    if tool_call_id:
        out["tool_call_id"] = tool_call_id
    return document.typed_message(out)


def part_text(value: Any) -> str:
    """The text of one content part: a string as it is, none for null, any other value as
    JSON (a client may send a number or an object where the convention says text)."""
    if type(value) is str:
        return value
    return "" if value is None else dumps_compact(value)


def _json_attr(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return loads_fast(value)
        except ValueError:
            return value
    return value


def _indexed(attrs: dict, prefix: str) -> dict[int, dict[str, Any]]:
    """`prefix.N.rest = v` -> {N: {rest: v}} (flattened list attributes)."""
    out: dict[int, dict[str, Any]] = {}
    plen = len(prefix) + 1
    for key, value in attrs.items():
        if not key.startswith(prefix + "."):
            continue
        idx, _, rest = key[plen:].partition(".")
        if idx.isdigit() and rest:
            out.setdefault(int(idx), {})[rest] = value
    return dict(sorted(out.items()))


def _flat_tool_calls(fields: dict, prefix: str, name_key: str, args_key: str, id_key: str) -> list[dict]:
    calls = []
    for _, tc in _indexed(fields, prefix).items():
        args = tc.get(args_key)
        calls.append({"id": tc.get(id_key), "type": "function",
                      "function": {"name": tc.get(name_key),
                                   "arguments": args if isinstance(args, str) else json.dumps(args)}})
    return calls


def _openinference_messages(attrs: dict, prefix: str) -> list[dict]:
    msgs = []
    for _, f in _indexed(attrs, prefix).items():
        content = f.get("message.content")
        if content is None:
            parts = [v for k, v in sorted(f.items()) if k.startswith("message.contents.") and k.endswith("message_content.text")]
            content = "".join(map(part_text, parts)) if parts else None
        msg = {"role": f.get("message.role"), "content": content, "name": f.get("message.name"),
               "tool_call_id": f.get("message.tool_call_id"),
               "tool_calls": _flat_tool_calls(f, "message.tool_calls", "tool_call.function.name",
                                              "tool_call.function.arguments", "tool_call.id")}
        msgs.append(canonical_message(msg))
    return msgs


def _openllmetry_messages(attrs: dict, prefix: str) -> list[dict]:
    msgs = []
    for _, f in _indexed(attrs, prefix).items():
        msg = {"role": f.get("role") or ("assistant" if "completion" in prefix else "user"),
               "content": f.get("content"), "tool_call_id": f.get("tool_call_id"),
               "tool_calls": _flat_tool_calls(f, "tool_calls", "name", "arguments", "id")}
        msgs.append(canonical_message(msg))
    return msgs


def llm_messages(attrs: dict) -> tuple[list[dict], dict | None, str]:
    """(input messages, output message, dialect) of an LLM span in any supported dialect."""
    if sc.GEN_AI_INPUT_MESSAGES in attrs or sc.GEN_AI_OUTPUT_MESSAGES in attrs:
        inp = _json_attr(attrs.get(sc.GEN_AI_INPUT_MESSAGES)) or []
        out = _json_attr(attrs.get(sc.GEN_AI_OUTPUT_MESSAGES)) or []
        if isinstance(inp, dict):
            inp = [inp]
        if isinstance(out, dict):
            out = [out]
        system = attrs.get(sc.GEN_AI_SYSTEM_INSTRUCTIONS)
        msgs = [canonical_message(m) for m in inp] if isinstance(inp, list) else []
        if system and not any(m["role"] == "system" for m in msgs):
            sys_val = _json_attr(system)
            if isinstance(sys_val, list):
                sys_val = "".join(part_text(p.get("content") if isinstance(p, dict) else p) for p in sys_val)
            msgs.insert(0, {"role": "system", "content": str(sys_val)})
        output = canonical_message(out[0]) if isinstance(out, list) and out else None
        if output is not None:
            output["role"] = output.get("role") or "assistant"
        return msgs, output, "genai"
    if any(k.startswith("llm.input_messages.") or k.startswith("llm.output_messages.") for k in attrs):
        outs = _openinference_messages(attrs, "llm.output_messages")
        return _openinference_messages(attrs, "llm.input_messages"), (outs[0] if outs else None), "openinference"
    if any(k.startswith("gen_ai.prompt.") or k.startswith("gen_ai.completion.") for k in attrs):
        outs = _openllmetry_messages(attrs, "gen_ai.completion")
        return _openllmetry_messages(attrs, "gen_ai.prompt"), (outs[0] if outs else None), "openllmetry"
    return [], None, "none"


# --- span classification ------------------------------------------------------------------

def span_kind(attrs: dict) -> str:
    if attrs.get(sc.SESSION_SPAN) is True:
        return "session"
    op = attrs.get(sc.GEN_AI_OPERATION_NAME)
    oi = attrs.get("openinference.span.kind")
    tl = attrs.get("traceloop.span.kind")
    if op in LLM_OPERATIONS or oi == "LLM" or attrs.get("llm.request.type") in ("chat", "completion"):
        return "llm"
    if op == sc.OP_EXECUTE_TOOL or oi == "TOOL" or tl == "tool":
        return "tool"
    if op == sc.OP_INVOKE_AGENT or oi == "AGENT" or tl == "agent":
        return "agent"
    return "other"


def graph_node(attrs: dict, name: str) -> str | None:
    """The LangGraph node a span *is* (not merely runs inside), as OpenInference
    (`metadata.langgraph_node`, the span named after the node) or OpenLLMetry
    (`traceloop.association.properties.langgraph_node`, `traceloop.entity.name`) write it:
    read as that node's agent turn, like tracefix's own `invoke_agent {node}`."""
    node = attrs.get("traceloop.association.properties.langgraph_node")
    if node is not None:
        return str(node) if node == attrs.get("traceloop.entity.name") else None
    metadata = attrs.get("metadata")
    if type(metadata) is not str or "langgraph_node" not in metadata:
        return None
    try:
        node = loads_fast(metadata).get("langgraph_node")
    except (ValueError, AttributeError):
        return None
    return node if isinstance(node, str) and node == name else None


def langchain_tool_message(result: Any) -> tuple[Any, str | None, str | None] | None:
    """(content, tool call id, error) of a tool result that is a serialized LangChain
    ``ToolMessage`` (what OpenInference's LangChain instrumentor records as a TOOL span's
    `output.value`), else None: the content is what the model was handed, the call id links
    the run to the LLM call that asked for it."""
    if type(result) is not str or '"tool_call_id"' not in result:
        return None
    try:
        message = loads_fast(result)
    except ValueError:
        return None
    data = message.get("data") if isinstance(message, dict) and message.get("type") == "tool" else None
    if not isinstance(data, dict) or not isinstance(data.get("tool_call_id"), str):
        return None
    content = data.get("content")
    error = part_text(content) if data.get("status") == "error" else None
    return content, data["tool_call_id"], error


def first_value(attrs: dict, keys: tuple[str, ...]) -> Any:
    """The first of `keys` with a value that is neither None nor ""."""
    for k in keys:
        v = attrs.get(k)
        if v is not None and v != "":
            return v
    return None


INT32_MAX = (1 << 31) - 1
INT64_MAX = document.INT64_MAX  # the store's BIGINT columns


def int_value(v: Any, limit: int = INT64_MAX) -> int | None:
    """An integer attribute, or None when absent, not a number or beyond the column's range."""
    if type(v) is int:  # the usual case (bool, a subclass, is not a number here)
        return v if -limit - 1 <= v <= limit else None
    try:
        n = int(v) if v is not None and not isinstance(v, bool) else None
    except (TypeError, ValueError, OverflowError):
        return None
    return n if n is not None and -limit - 1 <= n <= limit else None


def finite_score(value: Any) -> float | None:
    """A score as a float, or None when it is no number or not finite (NaN and infinities
    are not JSON: stored, they would break every reader of the row, and -inf is "below
    any alert threshold")."""
    try:
        score = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return score if math.isfinite(score) else None


def text_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def session_fields(attrs: dict) -> dict:
    out = {}
    for key, name in SESSION_ATTRS.items():
        if key in attrs and name not in out:
            value = attrs[key]
            if name in JSON_SESSION_FIELDS:
                value = json_text(value)
            elif name == "score":
                value = finite_score(value)
                if value is None:  # the caller notes it (`_note_unscored`)
                    continue
            elif name == "replayable":
                value = bool(value)
            else:
                value = str(value)
            out[name] = value
    return out
