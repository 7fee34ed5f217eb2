"""The values the session document (docs/contracts.md §1) is made of and read by: times as
it writes them, a session's task and final answer, a message's content as text and its
fields well typed, message keys as the API writes them (§1b), the pieces of a bounded page
and the tools a replay would run live. Pure; `assemble` builds the document from store rows.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import re
from typing import Any, Iterable, Mapping, Sequence

from tracefix.attributes import from_json_text

# Where a session's task is named: its metadata, its entrypoint inputs, an imported conversation
TASK_KEYS = ("task", "instruction", "query", "question", "prompt", "goal")


_from_timestamp, _UTC = dt.datetime.fromtimestamp, dt.timezone.utc  # bound once: a long session's outline calls iso per step


def iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    return _from_timestamp(ns / 1e9, _UTC).isoformat()[:-6] + "Z"  # "+00:00", UTC's offset, written Z


# what the store's nanosecond columns hold (int64): the years 1678 to 2262
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def to_ns(value: Any) -> int:
    """ISO-8601 text, epoch seconds (nanoseconds from 1e12 on) or a datetime -> epoch
    nanoseconds. ValueError, saying what is wrong, for anything else, for NaN / ±Infinity and
    for a time the store cannot hold (outside int64 nanoseconds)."""
    ns = _epoch_ns(value)
    if not INT64_MIN <= ns <= INT64_MAX:  # checked before int(): seconds as large as 1e300 are inf in ns
        raise ValueError(f"must be a time between the years 1678 and 2262, not {repr(value)[:40]}")
    return int(ns)


def _epoch_ns(value: Any) -> int | float:
    if isinstance(value, dt.datetime):
        d = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        return int(d.timestamp() * 1e9)
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"must be a finite time, not {value!r}")
        return value * 1e9 if value < 1e12 else value
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        try:
            return _epoch_ns(dt.datetime.fromisoformat(text.replace("Z", "+00:00")))
        except ValueError:
            raise ValueError(f"must be an ISO-8601 time or epoch seconds, not {text[:40]!r}") from None
    return _epoch_ns(number)


def duration_ms(start_ns: int | None, end_ns: int | None) -> float | None:
    if start_ns is None or end_ns is None:
        return None
    return round((end_ns - start_ns) / 1e6, 3)


def usd_text(cost: float | None) -> str:
    """A cost for a person: dollars to three significant digits (LLM calls cost fractions of a
    cent), "—" when it is unknown (an unknown model is never shown as free)."""
    if cost is None:
        return "\u2014"
    if cost == 0 or cost >= 1:
        return f"${cost:,.2f}"
    return f"${cost:.{max(2, 2 - math.floor(math.log10(cost)))}f}"


def final_answer(output: Any) -> Any:
    if isinstance(output, dict):
        for key in ("final_answer", "answer", "output", "result"):
            if key in output:
                return output[key]
    return output


def content_text(content: Any) -> str:
    """Chat message content as text: a string, a list of parts (joined), anything else as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content, default=str)


def task_of(metadata: Any, inputs: Any, first_messages: Iterable[Mapping[str, Any]]) -> str | None:
    """The `task` field of a session document being built: named in its metadata or inputs
    (TASK_KEYS), else its first user message."""
    for source in (metadata, inputs):
        if isinstance(source, dict):
            for key in TASK_KEYS:
                if isinstance(source.get(key), str) and source[key]:
                    return source[key]
    for msg in first_messages:
        if msg.get("role") == "user" and isinstance(msg.get("content"), str):
            return msg["content"][:1000]
    return None


def session_task(doc: dict) -> str | None:
    """What a session was asked to do, the one definition every part reads: the document's
    `task` (task_of), else the first user message of step 0, else its entrypoint inputs."""
    if doc.get("task"):
        return str(doc["task"])
    steps = doc.get("steps") or []
    if steps:
        for msg in steps[0].get("input_messages") or []:
            if msg.get("role") == "user":
                return content_text(msg.get("content"))
    inputs = doc.get("inputs") or {}
    return " ".join(str(v) for v in inputs.values()) if inputs else None


# --- the API's bounded view of a session (docs/contracts.md §1b) -------------------------------

_KEY_REF = re.compile(r"[0-9a-f]{16}")


def stored_message(text: str) -> dict:
    """A stored message's canonical JSON text as the message. One that an older collector
    took nested deeper than MAX_JSON_DEPTH (every walk of it would recurse out) or that is
    not a JSON object is kept as its text, so every read of its session still answers; one
    an older collector kept with fields of another type is read well typed (typed_message)."""
    message = from_json_text(text)
    return typed_message(message) if isinstance(message, dict) else {"role": "unknown", "content": text}


def typed_message(message: dict) -> dict:
    """The message with each field of the type every reader takes it for: `role` a non-empty
    string ("user" when it is not), `content` text or null (another value as content_text reads it),
    `name` a string (left out when it is not one), `tool_call_id` a string (a number as its
    digits), `tool_calls` a list of calls typed so too (_typed_call; one object as a list of
    it; other items and values left out). A client may send any JSON in a message; the
    span's attributes keep it as sent. A message already so typed, as nearly all are, is
    returned as it is."""
    role, content, calls = message.get("role"), message.get("content"), message.get("tool_calls")
    if (type(role) is str and role and (content is None or type(content) is str)
            and type(message.get("name", "")) is str and type(message.get("tool_call_id", "")) is str
            and (calls is None or (type(calls) is list
                                   and all(type(c) is dict and _typed_call(c) is c for c in calls)))):
        return message
    out = dict(message)
    out["role"] = role if isinstance(role, str) and role else "user"
    out["content"] = content if content is None or isinstance(content, str) else content_text(content)
    if not isinstance(out.get("name", ""), str):
        del out["name"]
    _type_id(out, "tool_call_id")
    if calls is not None:
        calls = [_typed_call(c) for c in (calls if isinstance(calls, list) else [calls]) if isinstance(c, dict)]
        if calls:
            out["tool_calls"] = calls
        else:
            del out["tool_calls"]
    return out


def _typed_call(call: Any) -> Any:
    """A tool call of a message with `id` and `name` strings (an id that is a number as its
    digits; others left out) and `function` an object whose `name` is a string and whose
    `arguments` are text (other values as their JSON). Returned as it is when so already."""
    if type(call) is not dict:
        return call
    function = call.get("function")
    if (type(call.get("id", "")) is str and type(call.get("name", "")) is str
            and (function is None or (type(function) is dict and type(function.get("name", "")) is str
                                      and type(function.get("arguments", "")) is str))):
        return call
    out = dict(call)
    _type_id(out, "id")
    if not isinstance(out.get("name", ""), str):
        del out["name"]
    if isinstance(function, dict):
        function = dict(function)
        if not isinstance(function.get("name", ""), str):
            del function["name"]
        if function.get("arguments") is not None and not isinstance(function["arguments"], str):
            function["arguments"] = json.dumps(function["arguments"], default=str)
        out["function"] = function
    elif function is not None:
        del out["function"]
    return out


def _type_id(fields: dict, key: str) -> None:
    """An id field as a string: a number as its digits; any other value left out."""
    value = fields.get(key)
    if value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        fields[key] = str(value)
    else:
        del fields[key]


def key_ref(key: int) -> str:
    """A message key as the API writes it: 16 hex digits (a signed 64-bit int in the store,
    which JSON numbers cannot carry exactly to every client)."""
    return format(key & 0xFFFF_FFFF_FFFF_FFFF, "016x")


def key_from_ref(ref: str) -> int:
    if not _KEY_REF.fullmatch(ref or ""):
        raise ValueError(f"a message key is 16 lowercase hex digits, not {ref!r}")
    value = int(ref, 16)
    return value - (1 << 64) if value >= 1 << 63 else value


def clip(value: Any, max_chars: int | None) -> tuple[Any, int]:
    """`value` with every string longer than `max_chars` cut and marked, and how many
    characters were cut in all (0: nothing was). `max_chars=None` keeps everything."""
    if max_chars is None:
        return value, 0
    cut = 0

    def walk(v: Any) -> Any:
        nonlocal cut
        if isinstance(v, str):
            if len(v) <= max_chars:
                return v
            cut += len(v) - max_chars
            return v[:max_chars] + f"…[{len(v) - max_chars} more chars]"
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value), cut


class RowRef:
    """A large column's value left in the store: `build` carries it through untouched and
    the page reader fetches it (by `rowid`) only for the steps it returns."""
    __slots__ = ("rowid",)

    def __init__(self, rowid: int):
        self.rowid = rowid


class MessageRef(dict):
    """A message as `build` sees it in a paged read: whatever of it was fetched (a preview,
    or only its tool call ids) plus its key, so the page can name messages by key."""

    def __init__(self, key: int, fields: dict | None = None):
        if fields:  # (most are made empty: a long session's outline makes one per step)
            super().__init__(fields)
        self.key = key


# the instrumentation scope of tracefix's own spans: only they carry what a replay serves
TRACEFIX_SCOPE = "tracefix"
# why a session whose app marked its recording incomplete cannot be replayed (the app does
# not say which of these it was)
INCOMPLETE_RECORDING = ("its recording is incomplete (content capture was off: TRACEFIX_CAPTURE_CONTENT or "
                        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT; a payload was truncated: raise "
                        "TRACEFIX_MAX_PAYLOAD_BYTES; or its entrypoint cannot be imported again)")


def why_not_replayable(entrypoint: str | None, steps: list[dict], *, marked_complete: bool = True,
                       truncated: bool = False, llm_scopes: Mapping[int, str | None] | None = None) -> str | None:
    """Why `tracefix replay` (default options) refuses this session, and what to do; None
    when it runs it. `replay.admission.check_replayable` refuses with exactly this reason, so
    the document's `replayable` is what a replay does. `marked_complete`: the app's own mark
    (content capture on, entrypoint importable again); `llm_scopes`: who recorded each LLM
    step's span (step index -> instrumentation scope)."""
    if not entrypoint:
        return ("it did not record its entrypoint and inputs; run the agent inside "
                "tracefix.session(entrypoint='pkg.mod:fn', inputs={...})")
    others = [(index, scope) for index, scope in (llm_scopes or {}).items() if scope != TRACEFIX_SCOPE]
    if others:
        index, scope = min(others, key=lambda pair: pair[0])
        return (f"step {index}'s LLM call was recorded by {scope or 'another instrumentation'} only, not by "
                "tracefix, so the full response a replay serves is not there; tracefix leaves the calls "
                "OpenInference or OpenLLMetry trace to them: record with TRACEFIX_DEFER_TO_OTHER_INSTRUMENTORS=0 "
                "to replay it")
    if truncated:
        return "a payload was truncated when it was recorded: raise TRACEFIX_MAX_PAYLOAD_BYTES and record again"
    if not marked_complete:
        return INCOMPLETE_RECORDING
    if not steps:
        return "it has no steps to replay"
    live = unrecorded_tools(steps)
    return live_tools_reason(live) if live else None


def live_tools_reason(names: list[str]) -> str:
    """The reason a session with tools tracefix never saw run is replayable with
    --allow-live-tools only."""
    return (f"it is replayable with live tools only: {', '.join(names)} ran without @tracefix.tool, so a replay "
            "would run them again for real, even before the edited step; decorate them with @tracefix.tool "
            "and record again, or pass --allow-live-tools")


def unrecorded_tools(steps: list[dict], last_index: int | None = None) -> list[str]:
    """Names of the tools an LLM asked for whose run tracefix never saw (no `@tracefix.tool`
    span for that call id) before the session's last step (`last_index`, default the last of
    `steps`). A replay cannot serve such a call from the recording: the agent's code runs the
    tool again, live, even before the edited step."""
    if last_index is None:
        last_index = steps[-1]["index"] if steps else -1
    names: list[str] = []
    for step in steps:
        if step["index"] >= last_index:
            continue
        recorded = {tc.get("id") for tc in step.get("tool_calls") or []}
        for call in (step.get("output_message") or {}).get("tool_calls") or []:
            if not isinstance(call, dict) or not call.get("id") or call["id"] in recorded:
                continue
            name = (call.get("function") or {}).get("name") or call.get("name") or "?"
            if name not in names:
                names.append(name)
    return names
