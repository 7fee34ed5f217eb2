"""What the presentation rewrites of bench/perturb.py share: a session's strings mapped
(identity and time fields spared), the random choices drawn from the session's content, words
replaced as whole tokens, JSON text told from prose, the agents' own words and the tools'
results mapped on their own (a benchmark helper, not product).
"""
from __future__ import annotations

import copy
import hashlib
import json
import random
import re
from typing import Any, Callable


# Fields that identify or time a record rather than present its content: never rewritten.
_IDENTITY_KEYS = {"session_id", "span_id", "parent_session_id", "intervention_id", "started_at",
                  "ended_at", "created_at", "tool_call_id", "id", "model", "models", "service",
                  "entrypoint", "snapshots", "replay_source"}


def map_strings(obj: Any, fn: Callable[[str], str], key: str | None = None) -> Any:
    """`obj` with every string value (not dict keys, not identity fields) passed through fn."""
    if key in _IDENTITY_KEYS:
        return obj
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: map_strings(v, fn, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [map_strings(v, fn, key) for v in obj]
    return obj


def session_rng(doc: dict, seed: int, salt: str) -> random.Random:
    """A rewrite's random choices for one session, drawn from what the session says, not from
    its ids: a seed's demo sessions come out the same in every recording, and so do the
    rewrites of them, so a bench figure is the same run after run."""
    digest = hashlib.sha256(f"{seed}:{salt}:{_content_key(doc)}".encode()).hexdigest()
    return random.Random(int(digest[:16], 16))


def _content_key(doc: dict) -> str:
    """The session's task, and each step's agent, output and tool calls, without ids or times."""
    steps = [[s.get("agent"), s.get("output_message"),
              [[t.get("name"), t.get("arguments"), t.get("result"), t.get("error")] for t in s.get("tool_calls") or []]]
             for s in doc.get("steps") or []]
    return json.dumps([doc.get("task"), steps], sort_keys=True, default=str)


def replace_words(mapping: dict[str, str]) -> Callable[[str], str]:
    if not mapping:
        return lambda s: s
    pattern = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(re.escape(k) for k in
                                                          sorted(mapping, key=len, reverse=True)) + r")(?![A-Za-z0-9])")
    return lambda s: pattern.sub(lambda m: mapping[m.group(1)], s)


def json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return None


def ordered(doc: dict) -> list[dict]:
    return sorted(doc.get("steps") or [], key=lambda s: s.get("index", 0))


def map_agent_words(doc: dict, fn: Callable[[str], str]) -> dict:
    """`doc` with fn applied to what the agents wrote themselves: their messages (as they
    stand and as later prompts quote them), a delegation's string result (the worker's
    report) and the final answer. Tools' results, the user's and the system's words keep
    theirs. A message object a later prompt shares with the step that wrote it (a deep copy
    keeps them shared) is rewritten once."""
    doc = copy.deepcopy(doc)
    done: set[int] = set()
    for step in doc.get("steps") or []:
        messages = [step.get("output_message") or {}]
        messages += [m for m in step.get("input_messages") or [] if m.get("role") == "assistant"]
        for msg in messages:
            if id(msg) not in done and isinstance(msg.get("content"), str):
                msg["content"] = fn(msg["content"])
                done.add(id(msg))
        for tc in step.get("tool_calls") or []:
            if isinstance(tc.get("result"), str):
                tc["result"] = fn(tc["result"])
    output = doc.get("output")
    if isinstance(output, dict) and isinstance(output.get("final_answer"), str):
        output["final_answer"] = fn(output["final_answer"])
    elif isinstance(output, str):
        doc["output"] = fn(output)
    return doc


def map_results(doc: dict, fn: Callable[[Any], Any]) -> dict:
    """`doc` with fn applied to every tool result: call records' and, where a prompt carries
    a result as JSON text, that text's value (written back as JSON)."""
    doc = copy.deepcopy(doc)
    for step in doc.get("steps") or []:
        for tc in step.get("tool_calls") or []:
            tc["result"] = fn(tc.get("result"))
        for msg in step.get("input_messages") or []:
            if msg.get("role") == "tool" and isinstance(msg.get("content"), str):
                parsed = json_or_none(msg["content"])
                if isinstance(parsed, (dict, list)):
                    msg["content"] = json.dumps(fn(parsed))
    return doc
