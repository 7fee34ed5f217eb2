"""Rewrites of how tools' results are laid out, and of timing (bench/perturb.py): results as
prose, wrapped in an HTTP envelope, stamped with the time they were served, keys in
camelCase or in reverse order; every step's duration jittered. Same values (a benchmark
helper, not product).
"""
from __future__ import annotations

import copy
import json
import re
import zlib
from typing import Any

from perturb_base import json_or_none, map_results, session_rng


def _as_prose(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{str(k).replace('_', ' ')} {_as_prose(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "\n".join(f"- {_as_prose(v)}" for v in value) if value else "nothing"
    return "none" if value is None else str(value)


def prose_results(doc: dict, seed: int) -> dict:
    """JSON tool results written as prose lines ("account id X; type checking; ...")."""
    doc = copy.deepcopy(doc)
    for step in doc.get("steps") or []:
        for tc in step.get("tool_calls") or []:
            if isinstance(tc.get("result"), (dict, list)):
                tc["result"] = _as_prose(tc["result"])
        for msg in step.get("input_messages") or []:
            if msg.get("role") == "tool" and isinstance(msg.get("content"), str):
                parsed = json_or_none(msg["content"])
                if isinstance(parsed, (dict, list)):
                    msg["content"] = _as_prose(parsed)
    return doc


def _enveloped(value: Any) -> Any:
    return {"status": 200, "data": value} if isinstance(value, (dict, list)) else value


def envelope_results(doc: dict, seed: int) -> dict:
    """JSON results wrapped as an HTTP API returns them (`{"status": 200, "data": ...}`)."""
    return map_results(doc, _enveloped)


def _served(value: Any) -> Any:
    if not isinstance(value, dict) or "served_at" in value:
        return value
    tick = zlib.crc32(json.dumps(value, sort_keys=True, default=str).encode()) % 3600
    return {**value, "served_at": f"2026-03-14T09:{tick // 60:02d}:{tick % 60:02d}Z"}


def result_timestamps(doc: dict, seed: int) -> dict:
    """JSON results carry the time they were served (`"served_at": "2026-03-14T09:48:54Z"`), as
    many APIs add: a value in every result that no report relays and no call uses."""
    return map_results(doc, _served)


def _reverse_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reverse_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reverse_keys(v) for v in value]
    return value


def _camel(value: Any) -> Any:
    if isinstance(value, dict):
        return {re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), str(k)): _camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


def camel_keys(doc: dict, seed: int) -> dict:
    """Results' keys in camelCase (`order_ref` -> `orderRef`), as a JavaScript API writes them,
    while the calls' arguments keep snake_case: one field, named two ways."""
    return map_results(doc, _camel)


def reorder_keys(doc: dict, seed: int) -> dict:
    """Results' keys in reverse order (records and their JSON text in prompts alike)."""
    return map_results(doc, _reverse_keys)


def jitter_timing(doc: dict, seed: int) -> dict:
    """Every step and tool call took between 0.3 and 4 times as long, at random, as a loaded
    machine or a slow network records them: the same session, other durations. Only timing
    changes; no word or value does."""
    doc = copy.deepcopy(doc)
    rng = session_rng(doc, seed, "timing")
    for step in doc.get("steps") or []:
        for record in [step, *(step.get("tool_calls") or [])]:
            if isinstance(record.get("duration_ms"), (int, float)):
                record["duration_ms"] = record["duration_ms"] * rng.uniform(0.3, 4.0)
    return doc
