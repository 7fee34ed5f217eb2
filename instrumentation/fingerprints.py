"""Call fingerprints: what the recorder writes on every LLM and tool span and what replay
mode compares a re-run's calls with (contracts §4).

The SDK wrappers normalize a request's messages and tools to plain JSON (`normalize_messages`,
`normalize_tools`: a message passed as an SDK object and as a dict normalize alike) and hash
them (`fingerprint_request`, `fingerprint_from_json`); `@tracefix.tool` hashes a call's name
and arguments (`fingerprint_tool`). The replay worker builds cassettes with these very
functions, so the two sides can never hash differently. Pure standard library.
"""
from __future__ import annotations

import hashlib
from typing import Any

from .attributes import canonical_json, canonical_plain_json, from_json_text, plain_json_as_is, to_jsonable


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


_LEAVES = frozenset((str, int, float, bool))  # values of exactly these types are taken as they are


def _plain(value: Any) -> Any:
    """JSON data with None fields dropped, in one pass (the hot path runs this per LLM call:
    a leaf of a common type is taken in the loop, not by a call of its own)."""
    if isinstance(value, dict):
        return {k if type(k) is str else str(k): v if type(v) in _LEAVES else _plain(v)
                for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [v if type(v) in _LEAVES else _plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return _drop_none(to_jsonable(value))


def _given(value: Any) -> bool:
    """False for None and the SDKs' NOT_GIVEN / Omit sentinels."""
    return value is not None and type(value).__name__ not in ("NotGiven", "Omit")


def normalize_messages(messages: Any) -> list:
    """Messages as plain JSON (pydantic models dumped, None fields dropped), the form that is
    fingerprinted (and written to gen_ai.input.messages in the conventions' parts shape,
    `tracefix.message_parts`): a message passed as an SDK object and the same message passed
    as a dict normalize alike."""
    if not _given(messages):
        return []
    if isinstance(messages, (str, dict)):
        messages = [messages]
    return [_plain(m) for m in messages]


def normalize_tools(tools: Any) -> list:
    return _plain(list(tools)) if _given(tools) and tools else []


def canonical_normalized_json(value: list) -> str:
    """`canonical_json(_plain(value))` for a request's list (its tools): read as it is when
    it is plain JSON already without a None (what most apps pass: then normalizing would
    only copy it), else normalized first."""
    text = plain_json_as_is(value)
    return text if text is not None else canonical_plain_json(_plain(value))


def _sha256(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def fingerprint_request(model: str | None, messages: Any, tools: Any = None) -> str:
    """sha256 of "model\nmessages\ntools" with messages and tools as canonical JSON
    (sorted keys, compact); messages as the SDK was given them, tools as recorded in
    gen_ai.tool.definitions (normalizing them again is idempotent)."""
    return fingerprint_from_json(model, canonical_json(normalize_messages(messages)),
                                 canonical_json(normalize_tools(tools)))


def fingerprint_from_json(model: str | None, messages_json: str, tools_json: str) -> str:
    """The same fingerprint from already-canonical JSON strings (the hot path writes the
    canonical messages JSON as the span attribute and hashes that very string)."""
    text = f"{model or ''}\n{messages_json}\n{tools_json}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fingerprint_tool(name: str, arguments: Any) -> str:
    """sha256 of canonical JSON {name, arguments}; arguments as recorded in
    gen_ai.tool.call.arguments (a JSON string is decoded first)."""
    return _sha256({"name": name, "arguments": _drop_none(to_jsonable(from_json_text(arguments)))})
