"""The OpenAI chat-completions wire format as the scripted server (:mod:`tracefix.demo.sim`)
speaks it, free of HTTP: the checks a request passes (:func:`parse_request`, errors as
:class:`ApiError` with the API's error body), the legacy `functions` shape read as tools and
answered as a `function_call`, and the answer as a completion (:func:`completion`) or as SSE
chunks (:func:`stream_events`) with usage, deterministic logprobs and url_citation annotations.
"""
from __future__ import annotations

import json
import re
from typing import Any, Callable


class ApiError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def model_card(name: str) -> dict:
    return {"id": name, "object": "model", "created": 0, "owned_by": "tracefix-sim"}


# --- the request ---------------------------------------------------------------------------

def parse_request(body: bytes, serves: Callable[[str], bool]) -> dict:
    """The request in `body`, checked as the API checks it; `serves(model)` says whether a
    model name is answered."""
    try:
        request = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(request, dict):
        raise ApiError(400, "request body must be a JSON object")
    model = request.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "you must provide a model parameter", param="model", code="missing_required_parameter")
    if not serves(model):
        raise ApiError(404, f"The model '{model}' does not exist", param="model", code="model_not_found")
    messages = request.get("messages")
    if messages is None:
        raise ApiError(400, "missing required parameter: 'messages'", param="messages",
                       code="missing_required_parameter")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty array", param="messages")
    for i, m in enumerate(messages):
        _check_message(i, m)
    tools = request.get("tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)):
        raise ApiError(400, "'tools' must be an array of objects", param="tools")
    return request


def _check_message(i: int, m: Any) -> None:
    """The shape checks the OpenAI API makes, so models only ever see well-formed messages."""
    where = f"messages[{i}]"
    if not isinstance(m, dict) or m.get("role") not in ("system", "developer", "user", "assistant", "tool",
                                                        "function"):
        raise ApiError(400, f"{where} must be an object with a valid role", param=where)
    content = m.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise ApiError(400, f"{where}.content must be a string or an array of parts", param=f"{where}.content")
    calls = m.get("tool_calls")
    if calls is not None:
        if m["role"] != "assistant" or not isinstance(calls, list):
            raise ApiError(400, f"{where}.tool_calls must be an array on an assistant message",
                           param=f"{where}.tool_calls")
        for j, call in enumerate(calls):
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) \
                    or not isinstance(fn.get("arguments", ""), str) or not isinstance(call.get("id", ""), str):
                raise ApiError(400, f"{where}.tool_calls[{j}] needs an id and a function with a name and "
                               "string arguments", param=f"{where}.tool_calls[{j}]")
    if m["role"] == "function" and not isinstance(m.get("name"), str):
        raise ApiError(400, f"{where}.name is required on a function message", param=f"{where}.name")
    if m["role"] == "tool" and not isinstance(m.get("tool_call_id"), str):
        raise ApiError(400, f"{where}.tool_call_id is required on a tool message", param=f"{where}.tool_call_id")


def from_legacy_functions(request: dict) -> dict:
    """A request in the legacy `functions` shape as the tools shape the models read: the
    functions as tools, an assistant `function_call` as one tool call, a `function` message
    as its tool result (ids made up from the order)."""
    if not request.get("functions") or request.get("tools"):
        return request
    messages = []
    for i, m in enumerate(request["messages"]):
        if m.get("role") == "assistant" and m.get("function_call"):
            call = {"id": f"call_legacy_{i}", "type": "function", "function": m["function_call"]}
            messages.append({**{k: v for k, v in m.items() if k != "function_call"}, "tool_calls": [call]})
        elif m.get("role") == "function":
            messages.append({"role": "tool", "tool_call_id": f"call_legacy_{i - 1}", "content": m.get("content")})
        else:
            messages.append(m)
    return {**request, "messages": messages,
            "tools": [{"type": "function", "function": f} for f in request["functions"]]}


# --- the answer ------------------------------------------------------------------------------

def answer_message(request: dict, message: dict) -> tuple[dict, str]:
    """A model's message as the API answers this request, with its finish reason: tool calls
    (or the legacy `function_call`), and url_citation annotations for a search request."""
    message = {"role": "assistant", "content": message.get("content"),
               **({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {})}
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    if request.get("functions") and not request.get("tools"):
        message = _as_legacy_function_call(message)
        finish = "function_call" if message.get("function_call") else "stop"
    if request.get("web_search_options") is not None and message.get("content"):
        message["annotations"] = _url_citations(message["content"])
    return message, finish


def _as_legacy_function_call(message: dict) -> dict:
    """The model's answer in the legacy shape: its first tool call as `function_call`."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    return {"role": "assistant", "content": message.get("content"), "function_call": calls[0]["function"]}


def _url_citations(text: str) -> list[dict]:
    """What a search model cites for `text` (requests with `web_search_options`)."""
    return [{"type": "url_citation", "url_citation": {"start_index": 0, "end_index": min(len(text), 24),
                                                      "title": "tracefix sim source",
                                                      "url": "https://sim.tracefix.invalid/source"}}]


def _tokens(value: Any) -> int:
    """A deterministic token estimate: about four characters per token."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return max(1, len(text) // 4)


def usage(request: dict, message: dict) -> dict:
    """Token counts of the request and the answer (estimates: the sim has no tokenizer)."""
    counts = {"prompt_tokens": _tokens(request["messages"]) + (_tokens(request["tools"]) if request.get("tools") else 0),
              "completion_tokens": _tokens(message.get("content") or message.get("tool_calls") or "")}
    counts["total_tokens"] = counts["prompt_tokens"] + counts["completion_tokens"]
    return counts


def token_logprobs(text: str, top: int) -> list[dict]:
    """Deterministic logprobs of `text`, one entry per word-ish token (a scripted model
    has no probabilities: these only exercise the protocol)."""
    tokens = re.findall(r"\s*\S+|\s+", text)
    out = []
    for token in tokens:
        logprob = -round((len(token) % 7) / 10, 4)
        alternatives = [{"token": token, "bytes": list(token.encode()), "logprob": logprob}]
        alternatives += [{"token": f"{token}~{k}", "bytes": list(f"{token}~{k}".encode()), "logprob": logprob - k - 1}
                         for k in range(max(0, top - 1))]
        out.append({"token": token, "bytes": list(token.encode()), "logprob": logprob,
                    "top_logprobs": alternatives[:top]})
    return out


def completion(response_id: str, created: int, model: str, message: dict, finish: str, counts: dict,
               top_logprobs: int | None) -> dict:
    """The non-streaming answer (`top_logprobs` None: no logprobs asked for)."""
    choice_logprobs = {"content": token_logprobs(message.get("content") or "", top_logprobs), "refusal": None} \
        if top_logprobs is not None else None
    return {"id": response_id, "object": "chat.completion", "created": created, "model": model,
            "system_fingerprint": "tracefix-sim",
            "choices": [{"index": 0, "message": message, "logprobs": choice_logprobs, "finish_reason": finish}],
            "usage": counts}


def _split(text: str, parts: int) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def stream_events(response_id: str, created: int, model: str, message: dict, finish: str, counts: dict | None,
                  top_logprobs: int | None = None) -> list[bytes]:
    """SSE chunks as the API sends them: content in pieces (each with its tokens' logprobs
    when asked), then annotations, tool-call deltas or the legacy function_call in
    pieces, the finish reason, usage last (`counts` None: not asked for)."""
    def chunk(delta: dict, finish_reason: str | None = None, choices: bool = True, logprobs: Any = None,
              **extra: Any) -> bytes:
        payload = {"id": response_id, "object": "chat.completion.chunk", "created": created, "model": model,
                   "system_fingerprint": "tracefix-sim",
                   "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}]
                   if choices else [], **extra}
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        events += [chunk({"content": piece}, logprobs=None if top_logprobs is None else
                         {"content": token_logprobs(piece, top_logprobs), "refusal": None})
                   for piece in _split(message["content"], 3)]
    if message.get("annotations"):
        events.append(chunk({"annotations": message["annotations"]}))
    if message.get("function_call"):
        fn = message["function_call"]
        events.append(chunk({"function_call": {"name": fn["name"], "arguments": ""}}))
        events += [chunk({"function_call": {"arguments": piece}}) for piece in _split(fn["arguments"], 3)]
    for index, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        events.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                             "function": {"name": fn["name"], "arguments": ""}}]}))
        events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                   for piece in _split(fn["arguments"], 3)]
    events.append(chunk({}, finish))
    if counts is not None:
        events.append(chunk({}, choices=False, usage=counts))
    events.append(b"data: [DONE]\n\n")
    return events
