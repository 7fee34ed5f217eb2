"""Assemble the session document (docs/contracts.md §1) and span dicts from store rows.

Pure functions over rows the store read; no SQL here. Steps come in the order the store
derived (tracefix.step, else start time); tool spans join the step whose LLM call asked for
them (by tool call id, else by tracefix.step, else by time).
"""
from __future__ import annotations

import bisect
import datetime as dt
import json
import math
import re
from typing import Any, Mapping, Sequence

from tracefix import semconv as sc
from tracefix.attributes import from_json_text
from tracefix.collector.contracts import SessionDocument, Step
from tracefix.collector.duplicates import duplicate_llm_calls, duplicate_tool_runs

# Where a session's task is named: its metadata, its entrypoint inputs, an imported conversation
TASK_KEYS = ("task", "instruction", "query", "question", "prompt", "goal")


def iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc).isoformat().replace("+00:00", "Z")


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


def task_of(metadata: Any, inputs: Any, first_messages: Sequence[Mapping[str, Any]]) -> str | None:
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


def span_dict(row: Mapping[str, Any], texts: dict[str, str] | None) -> dict:
    """A stored span with its attributes whole: content-addressed values are put back
    (message lists as canonical JSON, tool definitions byte for byte), from `texts` by key
    ref. With `texts=None` they are named instead (`message_keys`, the API's paged spans) for
    `restore_message_attributes` to put back where the texts are."""
    attributes, events, resource = row["attributes"], row["events"], row["resource"]
    dialect, input_keys, output_key, tools_key = (row["message_dialect"], row["input_keys"], row["output_key"],
                                                  row["tools_key"])
    start_ns, end_ns = row["start_ns"], row["end_ns"]
    attrs = json.loads(attributes) if attributes else {}
    refs: dict[str, Any] = {}
    if dialect == "genai":
        refs[sc.GEN_AI_INPUT_MESSAGES] = [key_ref(k) for k in (input_keys or [])]
        if output_key is not None:
            refs[sc.GEN_AI_OUTPUT_MESSAGES] = [key_ref(output_key)]
    if tools_key is not None:
        refs[sc.GEN_AI_TOOL_DEFINITIONS] = key_ref(tools_key)
    extra = {}
    if texts is None:
        extra = {"message_keys": refs} if refs else {}
    else:
        restore_message_attributes(attrs, refs, texts)
    return {
        "trace_id": row["trace_id"], "span_id": row["span_id"], "parent_span_id": row["parent_span_id"],
        "session_id": row["session_id"], "service": row["service"], "name": row["name"],
        "span_kind": row["span_kind"], "kind": row["kind"],
        "start_time": iso(start_ns), "end_time": iso(end_ns), "start_ns": start_ns, "end_ns": end_ns,
        "duration_ms": duration_ms(start_ns, end_ns),
        "status": {"code": row["status_code"], "message": row["status_message"]},
        "attributes": attrs, "events": json.loads(events) if events else [],
        "resource": json.loads(resource) if resource else {}, "scope": row["scope"], **extra,
    }


def restore_message_attributes(attrs: dict, refs: dict[str, Any], texts: dict[str, str]) -> None:
    """Put the content-addressed attributes named in `refs` (as `span_dict` names them) back
    into `attrs`, from stored texts by key ref."""
    for attr, ref in refs.items():
        if isinstance(ref, list):  # a message list: the messages' canonical JSON, in order
            attrs[attr] = "[" + ",".join(texts.get(k, "null") for k in ref) + "]"
        else:  # tool definitions: the text as it was sent
            attrs[attr] = texts.get(ref)


def _agent_resolver(spans_by_id: dict[str, dict], links: dict[str, str | None]):
    cache: dict[str, str | None] = {}

    def agent_of(span_id: str | None) -> str | None:
        seen: list[str] = []
        sid = span_id
        result = None
        while sid is not None and sid not in cache and len(seen) < 256:
            seen.append(sid)
            span = spans_by_id.get(sid)
            if span is not None:
                if span["agent"]:
                    result = span["agent"]
                    break
                if span["kind"] == "agent":
                    name = span["name"] or ""
                    result = name.split(" ", 1)[1] if name.startswith("invoke_agent ") else name
                    break
                sid = span["parent_span_id"]
            else:
                sid = links.get(sid)
        if sid is not None and sid in cache and result is None:
            result = cache[sid]
        for s in seen:
            cache[s] = result
        return result

    return agent_of


def build(session: dict, spans: list[dict], links: dict[str, str | None], order: list[tuple[str, int]],
          messages: Mapping[int, Any], snapshots: list[tuple], feedback: list[tuple]) -> SessionDocument:
    by_id = {s["span_id"]: s for s in spans}
    agent_of = _agent_resolver(by_id, links)
    # one call two instrumentations described: the step is the span the store numbered; the
    # other may be the one that sits in the framework's agent (docs/contracts.md §1)
    same_call: dict[str, list[str]] = {}
    for dup, kept in duplicate_llm_calls(spans).items():
        same_call.setdefault(kept, []).append(dup)
    doubled_tools = duplicate_tool_runs(spans)
    steps: list[Step] = []
    raw_to_idx: dict[int, int] = {}
    call_to_idx: dict[str, int] = {}
    starts: list[int] = []
    tokens = {"input": 0, "output": 0}
    agents: list[str] = []
    models: list[str] = []
    for span_id, idx in order:
        s = by_id.get(span_id)
        if s is None:
            continue
        inputs = [messages.get(k, {"role": "unknown", "content": None}) for k in (s["input_keys"] or [])]
        output = messages.get(s["output_key"]) if s["output_key"] is not None else None
        agent = agent_of(span_id) or next(filter(None, map(agent_of, same_call.get(span_id, ()))), None)
        if s["kind"] == "message" and output is not None:
            agent = agent or output.get("name") or output.get("role")
        step: Step = {
            "index": idx, "kind": s["kind"], "agent": agent, "span_id": span_id, "model": s["model"],
            "started_at": iso(s["start_ns"]), "duration_ms": duration_ms(s["start_ns"], s["end_ns"]),
            "input_messages": inputs, "output_message": output, "finish_reason": s["finish_reason"],
            "input_tokens": s["input_tokens"], "output_tokens": s["output_tokens"],
            "tool_calls": [], "error": s["error"], "snapshots": {}, "replay_source": s["replay_source"],
        }
        steps.append(step)
        starts.append(s["start_ns"] or 0)
        if s["step"] is not None:
            raw_to_idx.setdefault(s["step"], idx)
        for tc in (output or {}).get("tool_calls") or []:
            if isinstance(tc, dict) and tc.get("id"):
                call_to_idx[tc["id"]] = idx
        tokens["input"] += s["input_tokens"] or 0
        tokens["output"] += s["output_tokens"] or 0
        if agent and agent not in agents:
            agents.append(agent)
        if s["model"] and s["model"] not in models:
            models.append(s["model"])

    def step_at(ns: int | None, before: bool) -> int | None:
        if not steps or ns is None:
            return None
        if before:  # the latest step that started at or before ns
            pos = bisect.bisect_right(starts, ns) - 1
            return steps[max(pos, 0)]["index"]
        pos = bisect.bisect_left(starts, ns)  # the first step that starts at or after ns
        return steps[min(pos, len(steps) - 1)]["index"]

    idx_pos = {st["index"]: i for i, st in enumerate(steps)}
    for s in spans:
        if s["kind"] != "tool" or s["span_id"] in doubled_tools:
            continue
        at = call_to_idx.get(s["tool_call_id"]) if s["tool_call_id"] else None
        if at is None and s["step"] is not None:
            at = raw_to_idx.get(s["step"])
        if at is None:
            at = step_at(s["start_ns"], before=True)
        if at is None:
            continue
        args = from_json_text(s["tool_arguments"])
        steps[idx_pos[at]]["tool_calls"].append({
            "id": s["tool_call_id"], "name": s["tool_name"], "arguments": args,
            "result": from_json_text(s["tool_result"]), "error": s["error"], "span_id": s["span_id"],
            "duration_ms": duration_ms(s["start_ns"], s["end_ns"]),
        })
        agent = agent_of(s["span_id"])
        if agent and agent not in agents:
            agents.append(agent)

    for span_id, key, state, raw_step, time_ns in snapshots:
        at = raw_to_idx.get(raw_step) if raw_step is not None else None
        if at is None:
            at = step_at(time_ns, before=False)
        if at is not None:
            steps[idx_pos[at]]["snapshots"][key] = from_json_text(state)

    truncated = any(s["truncated"] for s in spans)
    metadata = from_json_text(session["metadata"]) or {}
    inputs = from_json_text(session["inputs"])
    output = from_json_text(session["output"])
    first_inputs = steps[0]["input_messages"] if steps else []
    if steps and steps[0]["kind"] == "message" and steps[0]["output_message"]:
        first_inputs = [steps[0]["output_message"]]
    return {
        "session_id": session["session_id"], "service": session["service"], "name": session["name"],
        "entrypoint": session["entrypoint"], "inputs": inputs if inputs is not None else {},
        "user_id": session["user_id"], "metadata": metadata,
        "task": task_of(metadata, inputs, first_inputs),
        "ground_truth": metadata.get("ground_truth") if isinstance(metadata, dict) else None,
        "outcome": session["outcome"], "score": session["score"], "output": output,
        "evaluation": from_json_text(session["evaluation"]),
        "replayable": bool(session["replayable"]) and bool(session["entrypoint"]) and not truncated,
        "parent_session_id": session["parent_session_id"], "intervention_id": session["intervention_id"],
        "intervention": from_json_text(session["intervention"]),
        "source": session["source"],
        "started_at": iso(session["started_ns"]), "ended_at": iso(session["ended_ns"]),
        "duration_ms": duration_ms(session["started_ns"], session["ended_ns"]),
        "agents": agents, "models": models, "tokens": tokens,
        "feedback": [{"feedback_id": feedback_id, "score": score, "comment": comment, "source": source,
                      "created_at": iso(created_ns)}
                     for feedback_id, score, comment, source, created_ns in feedback],
        "steps": steps,
    }


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
        super().__init__(fields or {})
        self.key = key


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
