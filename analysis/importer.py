"""Plain message logs -> session documents (docs/contracts.md section 1, steps of kind "message").

Accepted input, as text:
- one JSON object: a conversation with its messages under `messages` or `history`, a task
  under `task` / `question` / `instruction` / `query`, optional `ground_truth`;
- a JSON list of such objects, or a JSON list of messages (one conversation);
- JSONL: one conversation object per line.
Each message needs `content` (null is fine on an assistant message with OpenAI-format
`tool_calls`, which are kept); its speaker is `name`, else `role`. Anything else the
conversation object carries is kept in the session's `metadata`.
"""
from __future__ import annotations

import hashlib
import json

from .units import content_text

TASK_KEYS = ("task", "question", "instruction", "query", "prompt")
MESSAGE_KEYS = ("messages", "history")
GROUND_TRUTH_KEYS = ("ground_truth", "groundtruth", "gold_answer", "expected_answer")


class ImportFormatError(ValueError):
    """The input is not a conversation log this importer understands; says where and why."""


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
        if data and all(isinstance(m, dict) and ("content" in m or "tool_calls" in m) and not _messages_of(m)
                        for m in data):
            return [{"messages": data}]  # a bare list of messages is one conversation
        for i, item in enumerate(data):
            if not isinstance(item, dict):
                raise ImportFormatError(f"item {i} is a {type(item).__name__}, expected a conversation object")
        return data
    raise ImportFormatError(f"expected a JSON object, list or JSONL, got {type(data).__name__}")


def _messages_of(obj: dict) -> list | None:
    for key in MESSAGE_KEYS:
        if isinstance(obj.get(key), list):
            return obj[key]
    return None


def conversation_to_document(conv: dict, position: int = 0) -> dict:
    """One conversation object -> a session document whose steps are its messages."""
    messages = _messages_of(conv)
    if messages is None:
        raise ImportFormatError(f"conversation {position} has no `messages` or `history` list "
                                f"(keys: {', '.join(sorted(conv)) or 'none'})")
    steps = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or ("content" not in msg and not msg.get("tool_calls")):
            raise ImportFormatError(f"conversation {position}, message {i}: expected an object with `content`")
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
            "input_tokens": None, "output_tokens": None, "tool_calls": [], "error": None,
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
        "feedback": [], "steps": steps,
    }


def documents_from_text(text: str) -> list[dict]:
    """All session documents in a message-log file's text; fails before creating any if one is bad."""
    return [conversation_to_document(c, i) for i, c in enumerate(parse_conversations(text))]
