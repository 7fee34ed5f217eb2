"""Message-log sessions (conversations recorded outside tracefix) as store rows.

An imported session is a list of chat messages, one step each (kind `message`). A document
is either `{"session_id"?, "messages": [...], "task"?, "ground_truth"?, "outcome"?, ...}`
or a session document (contracts §1) whose steps carry `output_message` / `input_messages`.
Each message becomes a synthetic span so the same derivation reads both kinds of session.
"""
from __future__ import annotations

import hashlib
import json
import time
import uuid

from tracefix.collector.document import to_ns
from tracefix.collector.normalize import Batch, add_messages, canonical_message, merge_session


class ImportError_(ValueError):
    """A document that cannot be imported."""


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
    raise ImportError_("an imported session needs a 'messages' list or a 'steps' list")


def batch_from_documents(docs: list[dict]) -> tuple[Batch, list[str]]:
    if not isinstance(docs, list):
        raise ImportError_("import expects a list of session documents")
    batch = Batch()
    ids = []
    for position, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise ImportError_("each imported session must be a JSON object")
        try:
            ids.append(_add_document(batch, doc))
        except ImportError_:
            raise
        except (TypeError, ValueError, AttributeError) as exc:
            raise ImportError_(f"session {position}: {type(exc).__name__}: {exc}") from exc
    return batch, ids


def _add_document(batch: Batch, doc: dict) -> str:
    """Add one document's synthetic spans, messages and session fields; returns its id."""
    sid = str(doc.get("session_id") or f"imp-{uuid.uuid4().hex[:12]}")
    trace_id = _hex("import:" + sid, 32)
    base = to_ns(doc["started_at"]) if doc.get("started_at") else time.time_ns()
    service = str(doc.get("service") or "import")
    metadata = dict(doc.get("metadata") or {})
    for key in ("task", "ground_truth"):
        if doc.get(key) is not None:
            metadata.setdefault(key, doc[key])
    items = _messages_of(doc)
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
            "attributes": json.dumps({"message.index": i}), "events": None, "tools_key": None,
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
