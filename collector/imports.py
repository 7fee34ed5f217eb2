"""The message-log importer: conversations recorded outside tracefix become stored sessions.

Two steps, both here:

1. text -> session documents (:func:`documents_from_text`, what `tracefix import FILE`
   reads). Accepted input:
   - one JSON object: a conversation with its messages under `messages` or `history`, a task
     under one of TASK_KEYS (tracefix.collector.document), optional `ground_truth`;
   - a JSON list of such objects, or a JSON list of messages (one conversation);
   - JSONL: one conversation object per line.
   Each message needs `content` (null is fine on an assistant message with OpenAI-format
   `tool_calls`, which are kept); its speaker is `name`, else `role`. Anything else the
   conversation object carries is kept in the session's `metadata`.
2. session documents -> store rows (:func:`batch_from_documents`, what `POST /api/v1/import`
   and the store's `import_sessions` write). A document is either `{"session_id"?,
   "messages": [...], "task"?, "ground_truth"?, "outcome"?, ...}` or a session document
   (contracts §1) whose steps carry `output_message` / `input_messages`. Each message
   becomes a synthetic span (one step each, kind `message`) so the same derivation reads
   both kinds of session.
"""
from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Any

from tracefix.collector.document import INT64_MAX, TASK_KEYS, content_text, to_ns
from tracefix.collector.normalize import Batch, add_messages, canonical_message, merge_session
from tracefix.collector.redact import redact_document
from tracefix.errors import TracefixError


class ImportFormatError(TracefixError, ValueError):
    """The input is not a conversation log or session document this importer understands;
    says where and why."""


MESSAGE_KEYS = ("messages", "history")
# how an error counts the items of a file: from 0, as the steps the messages become are numbered
FROM_0 = "(counting from 0)"
GROUND_TRUTH_KEYS = ("ground_truth", "groundtruth", "gold_answer", "expected_answer")


def parse_conversations(text: str) -> list[dict]:
    """The conversation objects in `text` (JSON object, JSON list or JSONL)."""
    text = text.strip()
    if not text:
        raise ImportFormatError("the input is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as whole_error:
        data = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ImportFormatError(
                    f"neither JSON ({whole_error.msg} at line {whole_error.lineno}) nor JSONL "
                    f"(line {lineno}: {exc.msg})") from None
    if isinstance(data, dict):
        return [data]
    if isinstance(data, list):
        if data and all(isinstance(m, dict) and ("content" in m or "tool_calls" in m) and not _conversation_messages(m)
                        for m in data):
            return [{"messages": data}]  # a bare list of messages is one conversation
        for i, item in enumerate(data):
            if not isinstance(item, dict):
                raise ImportFormatError(f"item {i} {FROM_0} is a {type(item).__name__}, expected a conversation object")
        return data
    raise ImportFormatError(f"expected a JSON object, list or JSONL, got {type(data).__name__}")


def _conversation_messages(obj: dict) -> list | None:
    for key in MESSAGE_KEYS:
        if isinstance(obj.get(key), list):
            return obj[key]
    return None


def conversation_to_document(conv: dict, position: int = 0) -> dict:
    """One conversation object -> a session document whose steps are its messages."""
    messages = _conversation_messages(conv)
    if messages is None:
        raise ImportFormatError(f"conversation {position} {FROM_0} has no `messages` or `history` list "
                                f"(keys: {', '.join(sorted(conv)) or 'none'})")
    steps: list[dict[str, Any]] = []  # §1 steps, but an imported message has no span (span_id None)
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or ("content" not in msg and not msg.get("tool_calls")):
            raise ImportFormatError(f"conversation {position}, message {i} {FROM_0}: expected an object with `content`")
        role = str(msg.get("role") or "assistant")
        speaker = str(msg.get("name") or role)
        out = {"role": role, "content": content_text(msg.get("content"))}
        if msg.get("name"):
            out["name"] = str(msg["name"])
        if isinstance(msg.get("tool_calls"), list) and msg["tool_calls"]:  # OpenAI-format logs
            out["tool_calls"] = msg["tool_calls"]
        if msg.get("tool_call_id"):
            out["tool_call_id"] = str(msg["tool_call_id"])
        steps.append({
            "index": i, "kind": "message", "agent": speaker, "span_id": None, "model": None,
            "started_at": msg.get("timestamp") if isinstance(msg.get("timestamp"), str) else None,
            "duration_ms": None, "input_messages": [], "output_message": out, "finish_reason": None,
            "input_tokens": None, "output_tokens": None, "cost_usd": None, "tool_calls": [], "error": None,
            "snapshots": {}, "replay_source": None,
        })
    task = next((str(conv[k]) for k in TASK_KEYS if conv.get(k)), None)
    ground_truth = next((conv[k] for k in GROUND_TRUTH_KEYS if conv.get(k) is not None), None)
    outcome = conv.get("outcome") if conv.get("outcome") in ("success", "failure") else None
    if outcome is None and isinstance(conv.get("is_correct"), bool):
        outcome = "success" if conv["is_correct"] else "failure"
    known = set(TASK_KEYS) | set(MESSAGE_KEYS) | set(GROUND_TRUTH_KEYS) | {"outcome", "session_id", "service"}
    metadata = {k: v for k, v in conv.items() if k not in known}
    digest = hashlib.sha256(json.dumps(conv, sort_keys=True, default=str).encode()).hexdigest()[:16]
    agents = list(dict.fromkeys(s["agent"] for s in steps))
    return {
        "session_id": str(conv.get("session_id") or f"s-imp-{digest}"),
        "service": str(conv.get("service") or "imported"),
        "entrypoint": None, "inputs": {}, "user_id": None, "metadata": metadata,
        "task": task, "ground_truth": ground_truth, "outcome": outcome,
        "score": None if outcome is None else float(outcome == "success"),
        "output": {"final_answer": steps[-1]["output_message"]["content"]} if steps else None,
        "evaluation": None, "replayable": False, "parent_session_id": None,
        "intervention_id": None, "intervention": None, "started_at": None, "ended_at": None,
        "duration_ms": None, "agents": agents, "models": [], "tokens": {"input": 0, "output": 0},
        "cost_usd": None, "cost_by_agent": {}, "cost_by_model": {},
        "feedback": [], "annotations": [], "steps": steps,
    }


def documents_from_text(text: str) -> list[dict]:
    """All session documents in a message-log file's text; fails before creating any if one is bad."""
    return [conversation_to_document(c, i) for i, c in enumerate(parse_conversations(text))]


def _hex(text: str, n: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def _messages_of(doc: dict) -> list[tuple[dict, dict]]:
    """[(message, step extras)] in order."""
    if isinstance(doc.get("messages"), list):
        return [(m, {}) for m in doc["messages"]]
    if isinstance(doc.get("steps"), list):
        out = []
        for st in doc["steps"]:
            msg = st.get("output_message")
            if msg is None and st.get("input_messages"):
                msg = st["input_messages"][-1]
            if msg is None:
                continue
            out.append((msg, {"agent": st.get("agent"), "error": st.get("error")}))
        return out
    raise ImportFormatError("an imported session needs a 'messages' list or a 'steps' list")


def batch_from_documents(docs: list[dict]) -> tuple[Batch, list[str]]:
    if not isinstance(docs, list):
        raise ImportFormatError("import expects a list of session documents")
    batch = Batch()
    ids = []
    for position, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise ImportFormatError("each imported session must be a JSON object")
        try:
            ids.append(_add_document(batch, doc))
        except ImportFormatError as exc:
            raise ImportFormatError(f"session {position} {FROM_0}: {exc}") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise ImportFormatError(f"session {position} {FROM_0}: {type(exc).__name__}: {exc}") from exc
    return batch, ids


def _add_document(batch: Batch, doc: dict) -> str:
    """Add one document's synthetic spans, messages and session fields; returns its id."""
    doc = redact_document(doc)  # the secret rules of spans hold for imported sessions too
    sid = str(doc.get("session_id") or f"imp-{uuid.uuid4().hex[:12]}")
    trace_id = _hex("import:" + sid, 32)
    try:  # the session's messages are timed from it, one millisecond apart
        base = to_ns(doc["started_at"]) if doc.get("started_at") else time.time_ns()
    except ValueError as exc:
        raise ImportFormatError(f"'started_at' {exc}") from None
    service = str(doc.get("service") or "import")
    metadata = dict(doc.get("metadata") or {})
    for key in ("task", "ground_truth"):
        if doc.get(key) is not None:
            metadata.setdefault(key, doc[key])
    items = _messages_of(doc)
    if base + max(len(items), 1) * 1_000_000 > INT64_MAX:
        raise ImportFormatError(f"'started_at' must leave room for its {len(items)} messages (a millisecond apart) "
                                f"before 2262-04-11, the last time the store holds, not {repr(doc['started_at'])[:40]}")
    for i, (raw, extra) in enumerate(items):
        msg = canonical_message(raw)
        start = base + i * 1_000_000
        agent = str(extra.get("agent") or msg.get("name") or msg.get("role"))
        batch.spans.append({
            "trace_id": trace_id, "span_id": _hex(f"{sid}:{i}", 16), "parent_span_id": None,
            "session_id": sid, "service": service, "name": f"message {agent}",
            "span_kind": 0, "kind": "message", "start_ns": start, "end_ns": start + 1, "status_code": 0,
            "status_message": None, "step": i, "call_seq": i, "agent": agent, "model": None, "provider": None,
            "input_tokens": None, "output_tokens": None, "finish_reason": None, "input_keys": [],
            "output_key": add_messages(batch, [msg])[0], "message_dialect": "import",
            "tool_name": None, "tool_call_id": None, "tool_arguments": None, "tool_result": None,
            "error": None if extra.get("error") is None else str(extra["error"]), "replay_source": None, "truncated": False, "scope": "tracefix.import",
            "resource": json.dumps({"service.name": service}),
            "attributes": json.dumps({"message.index": i}), "events": None, "tools_key": None, "cost_usd": None,
        })
    fields = {
        "service": service, "name": None if doc.get("name") is None else str(doc["name"]),
        "metadata": json.dumps(metadata, ensure_ascii=False),
        "outcome": doc.get("outcome") if doc.get("outcome") in ("success", "failure") else None, "score": float(doc["score"]) if doc.get("score") is not None else None,
        "output": json.dumps(doc["output"], ensure_ascii=False) if doc.get("output") is not None else None,
        "evaluation": json.dumps(doc["evaluation"]) if doc.get("evaluation") is not None else None,
        "inputs": json.dumps(doc.get("inputs") or {}), "replayable": False,
        "started_ns": base, "ended_ns": base + max(len(items), 1) * 1_000_000,
    }
    merge_session(batch.sessions, sid, fields)
    return sid
