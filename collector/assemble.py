"""Assemble the session document (docs/contracts.md §1) and span dicts from store rows.

Pure functions over rows the store read; no SQL here. Steps come in the order the store
derived (tracefix.step, else start time); tool spans join the step whose LLM call asked for
them (by tool call id, else by tracefix.step, else by time). The values they are made of
(times, the task, message keys) are `document`'s.
"""
from __future__ import annotations

import bisect
import json
from typing import Any, Mapping, Sequence

from tracefix import semconv as sc
from tracefix.attributes import from_json_text
from tracefix.collector.contracts import SessionDocument, Step, StepAnnotation
from tracefix.collector.document import duration_ms, iso, key_ref, task_of, why_not_replayable
from tracefix.collector.duplicates import duplicate_llm_calls, duplicate_tool_runs
from tracefix.collector.marks import annotation_dict


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
          messages: Mapping[int, Any], snapshots: list[tuple], feedback: list[tuple],
          annotations: list[tuple] = ()) -> SessionDocument:
    """The session document from its store rows. `spans`: its spans but those of kind
    'other' (whose parents are `links`), each with at least the columns read here of its kind
    (a paged read leaves out the others: `store.pages`); `order`: (span id, step index)."""
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
    llm_scopes: dict[int, str | None] = {}  # who recorded each LLM step's span
    for span_id, idx in order:
        s = by_id.get(span_id)
        if s is None:
            continue
        keys = s["input_keys"]
        inputs = [messages.get(k, {"role": "unknown", "content": None}) for k in keys] if keys else []
        output = messages.get(s["output_key"]) if s["output_key"] is not None else None
        # (a span naming its agent is its own answer: the walk up its parents is for those that do not)
        agent = s["agent"] or agent_of(span_id) or next(filter(None, map(agent_of, same_call.get(span_id, ()))), None)
        if s["kind"] == "message" and output is not None:
            agent = agent or output.get("name") or output.get("role")
        step: Step = {
            "index": idx, "kind": s["kind"], "agent": agent, "span_id": span_id, "model": s["model"],
            "started_at": iso(s["start_ns"]), "duration_ms": duration_ms(s["start_ns"], s["end_ns"]),
            "input_messages": inputs, "output_message": output, "finish_reason": s["finish_reason"],
            "input_tokens": s["input_tokens"], "output_tokens": s["output_tokens"], "cost_usd": s["cost_usd"],
            "tool_calls": [], "error": s["error"], "snapshots": {}, "replay_source": s["replay_source"],
        }
        steps.append(step)
        starts.append(s["start_ns"] or 0)
        if s["step"] is not None:
            raw_to_idx.setdefault(s["step"], idx)
        for tc in (output.get("tool_calls") or [] if output else []):
            if isinstance(tc, dict) and tc.get("id"):
                call_to_idx[tc["id"]] = idx
        if s["kind"] == "llm":
            llm_scopes[idx] = s["scope"]
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
        agent = s["agent"] or agent_of(s["span_id"])
        if agent and agent not in agents:
            agents.append(agent)

    for span_id, key, state, raw_step, time_ns in snapshots:
        at = raw_to_idx.get(raw_step) if raw_step is not None else None
        if at is None:
            at = step_at(time_ns, before=False)
        if at is not None:
            steps[idx_pos[at]]["snapshots"][key] = from_json_text(state)

    truncated = any(s["truncated"] for s in spans)
    # what a replay needs of each LLM step is on the span this step is (the cassette's)
    why_not = why_not_replayable(session["entrypoint"], steps, marked_complete=bool(session["replayable"]),
                                 truncated=truncated, llm_scopes=llm_scopes)
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
        "replayable": why_not is None, "replayable_reason": why_not,
        "parent_session_id": session["parent_session_id"], "intervention_id": session["intervention_id"],
        "intervention": from_json_text(session["intervention"]),
        "source": session["source"],
        "started_at": iso(session["started_ns"]), "ended_at": iso(session["ended_ns"]),
        "duration_ms": duration_ms(session["started_ns"], session["ended_ns"]),
        "agents": agents, "models": models, "tokens": tokens, **costs_of(steps),
        "feedback": feedback_of(feedback),
        "annotations": annotations_of(annotations, session["session_id"], steps),
        "steps": steps,
    }


def feedback_of(rows: Sequence[tuple]) -> list[dict]:
    """A session's feedback (store rows: id, score, comment, source, created_ns) as the document has it."""
    return [{"feedback_id": feedback_id, "score": score, "comment": comment, "source": source,
             "created_at": iso(created_ns)} for feedback_id, score, comment, source, created_ns in rows]


def costs_of(steps: list[Step]) -> dict[str, Any]:
    """The session's cost, per agent and per model: the known costs of its steps added up, None
    where none is known (an unknown model's cost is unknown, never 0)."""
    total: float | None = None
    by_agent: dict[str, float | None] = {}
    by_model: dict[str, float | None] = {}
    for step in steps:
        cost = step["cost_usd"]
        for key, sums in ((step["agent"], by_agent), (step["model"], by_model)):
            if key is not None:
                known = sums.get(key)
                sums[key] = known if cost is None else (known or 0.0) + cost
        if cost is not None:
            total = (total or 0.0) + cost
    return {"cost_usd": total, "cost_by_agent": by_agent, "cost_by_model": by_model}


def annotations_of(rows: Sequence[tuple], session_id: str, steps: list[Step]) -> list[StepAnnotation]:
    """The marks on a session's steps (store.annotations rows), each on the step its span is."""
    step_of_span = {s["span_id"]: s["index"] for s in steps}
    return [annotation_dict(r, session_id, step_of_span) for r in rows]  # type: ignore[misc]
