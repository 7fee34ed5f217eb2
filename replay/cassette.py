"""Build a replay cassette (contracts §4) from a stored session document and its spans.

Per step: the request fingerprint and the full provider response (``tracefix.response.raw``
on the LLM span; for a stream also its events as they came, ``tracefix.response.stream``), and the step's tool calls with their fingerprints and recorded results;
plus every state snapshot. Fingerprints come from the instrumentation's replay mode, so
recording and replay hash requests the same way.
"""
from __future__ import annotations

import json

from tracefix import semconv as sc
from tracefix.attributes import from_json_text
from tracefix.errors import TracefixError


# Recorded on each LLM span by the instrumentation: copying it beats recomputing from
# stored messages, which the collector may have normalized.
REQUEST_FINGERPRINT = getattr(sc, "REQUEST_FINGERPRINT", "tracefix.request.fingerprint")


class CassetteError(TracefixError, ValueError):
    """The stored session lacks something a replay needs."""


def span_attributes(span: dict) -> dict:
    attrs = span.get("attributes") or {}
    if isinstance(attrs, str):
        try:
            attrs = json.loads(attrs)
        except ValueError:
            attrs = {}
    return attrs


def llm_spans_by_step(doc: dict, spans: list[dict]) -> dict[int, dict]:
    """The LLM span each LLM step of `doc` is (`step.span_id`, the span the collector chose):
    beside another instrumentation one call has two spans, and only tracefix's carries the
    full response; their `tracefix.step` numbers need not match the document's indexes."""
    by_id = {span["span_id"]: span for span in spans}
    return {step["index"]: by_id[step["span_id"]] for step in doc.get("steps") or []
            if step.get("kind") == "llm" and step.get("span_id") in by_id}


def tool_definitions(doc: dict, spans: list[dict]) -> dict[int, list[dict]]:
    """The `tools` offered at each LLM step (used by intervention templates)."""
    out = {}
    for step, span in llm_spans_by_step(doc, spans).items():
        defs = from_json_text(span_attributes(span).get(sc.GEN_AI_TOOL_DEFINITIONS))
        if isinstance(defs, list):
            out[step] = defs
    return out


def build(doc: dict, spans: list[dict]) -> dict:
    """The cassette for `doc`; raises CassetteError naming what is missing."""
    from tracefix import fingerprints  # the instrumentation's hashing, never a copy of it

    if not doc.get("entrypoint"):
        raise CassetteError(f"session {doc.get('session_id')} has no recorded entrypoint: it cannot be replayed "
                            "(record it inside tracefix.session(entrypoint=..., inputs=...))")
    if doc.get("inputs") is None:
        raise CassetteError(f"session {doc.get('session_id')} has no recorded inputs: it cannot be replayed")
    by_step = llm_spans_by_step(doc, spans)
    steps = []
    for step in doc.get("steps") or []:
        if step.get("kind") != "llm":
            continue
        span = by_step.get(step["index"])
        if span is None:
            raise CassetteError(f"step {step['index']} has no stored LLM span")
        attrs = span_attributes(span)
        response = from_json_text(attrs.get(sc.RESPONSE_RAW))
        if not isinstance(response, dict):
            raise CassetteError(f"step {step['index']}: the full response ({sc.RESPONSE_RAW}) was not recorded; "
                                "record with content capture on")
        messages = from_json_text(attrs.get(sc.GEN_AI_INPUT_MESSAGES)) or step.get("input_messages") or []
        tools = from_json_text(attrs.get(sc.GEN_AI_TOOL_DEFINITIONS))
        model = attrs.get(sc.GEN_AI_REQUEST_MODEL) or step.get("model")
        recorded = attrs.get(REQUEST_FINGERPRINT)
        steps.append({
            "index": step["index"], "agent": step.get("agent"),
            "fingerprint": recorded or fingerprints.fingerprint_request(model, messages, tools),
            "response": response,
            **_recorded_stream(attrs),
            "tool_calls": [{"id": c.get("id"), "name": c.get("name"),
                            "fingerprint": fingerprints.fingerprint_tool(c.get("name"), c.get("arguments")),
                            "result": c.get("result"),
                            "error": c.get("error")}  # "Type: message", as the agent saw it
                           for c in step.get("tool_calls") or []],
        })
    snapshots = [{"step": step["index"], "key": key, "state": state}
                 for step in doc.get("steps") or [] for key, state in (step.get("snapshots") or {}).items()]
    return {"session_id": doc["session_id"], "entrypoint": doc["entrypoint"], "inputs": doc["inputs"],
            "steps": steps, "snapshots": snapshots}


def _recorded_stream(attrs: dict) -> dict:
    """`{"stream": [...]}`: a streamed response's events as they came, which a replay streams
    again event for event; nothing when they were not recorded (a replay then streams the
    response in chunks of its own)."""
    events = from_json_text(attrs.get(sc.RESPONSE_STREAM))
    return {"stream": events} if isinstance(events, list) and events else {}


def restored_at(cassette: dict, step: int) -> bool:
    """True when tracked state exists as of step t (a snapshot at or before it)."""
    return any(s["step"] <= step for s in cassette.get("snapshots") or [])
