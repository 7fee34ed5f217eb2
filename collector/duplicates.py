"""One call described by two instrumentations: which span stands for it.

With tracefix and another instrumentation of the same framework active (OpenInference's
LangChain or openai-agents instrumentor, OpenLLMetry), one LLM call or tool run arrives as
two spans: the framework's view (a LangChain ``LLM`` span, a ``TOOL`` span) and the SDK's or
tracefix's. They are told apart from two different calls by what they share, not by their
tree (each instrumentation parents its spans in its own context):

* LLM calls: the same answer (the same content-addressed output message, which carries the
  call's tool-call ids) over overlapping times;
* tool runs: the same tool-call id, or the same tool name over overlapping times when one
  of them names no call id.

The span kept is the richer one: the one with a tracefix step (a replay addresses it), else
the one naming a call id, else the inner one (the call as it was made). Pure functions.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence


def _overlap(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return (a["start_ns"] or 0) <= (b["end_ns"] or 0) and (b["start_ns"] or 0) <= (a["end_ns"] or 0)


def _llm_rank(s: Mapping[str, Any]) -> tuple:
    return (s["step"] is not None, s["start_ns"] or 0)


def duplicate_llm_calls(spans: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """{span id of a duplicate LLM span: span id of the one kept} within one session's
    `spans` (rows with kind, step, start_ns, end_ns, output_key, span_id)."""
    by_answer: dict[Any, list[Mapping[str, Any]]] = {}
    for s in spans:
        if s["kind"] == "llm" and s["output_key"] is not None:
            by_answer.setdefault(s["output_key"], []).append(s)
    return _merge_groups(by_answer.values(), _llm_rank)


def _tool_rank(s: Mapping[str, Any]) -> tuple:
    return (s["tool_call_id"] is not None, s["start_ns"] or 0)


def duplicate_tool_runs(spans: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """{span id of a duplicate tool span: span id of the one kept} within one session's
    `spans` (rows with kind, step, start_ns, end_ns, tool_name, tool_call_id, span_id)."""
    tools = [s for s in spans if s["kind"] == "tool"]
    by_name: dict[Any, list[Mapping[str, Any]]] = {}
    for s in tools:
        by_name.setdefault(s["tool_name"], []).append(s)
    groups: list[list[Mapping[str, Any]]] = []
    for same_name in by_name.values():
        ids = {s["tool_call_id"] for s in same_name if s["tool_call_id"]}
        for call_id in ids:  # one call id: one run (the spans without an id join it by time below)
            groups.append([s for s in same_name if s["tool_call_id"] == call_id]
                          + [s for s in same_name if not s["tool_call_id"]])
        if not ids:
            groups.append(same_name)
    out: dict[str, str] = {}
    for dup, kept in _merge_groups(groups, _tool_rank, same_id_needs_no_overlap=True).items():
        out.setdefault(dup, kept)
    return out


def _merge_groups(groups: Iterable[Sequence[Mapping[str, Any]]], rank, *,
                  same_id_needs_no_overlap: bool = False) -> dict[str, str]:
    out: dict[str, str] = {}
    for group in groups:
        if len(group) < 2:
            continue
        for s in sorted(group, key=rank, reverse=True):  # the best first: it absorbs the others
            if s["span_id"] in out:
                continue
            for other in group:
                if other is s or other["span_id"] in out or _kept(out, other["span_id"]):
                    continue
                same_call = (same_id_needs_no_overlap and s.get("tool_call_id")
                             and s.get("tool_call_id") == other.get("tool_call_id"))
                if same_call or (_overlap(s, other) and rank(other) <= rank(s)
                                 and not (other.get("tool_call_id") and s.get("tool_call_id"))):
                    out[other["span_id"]] = s["span_id"]
    return out


def _kept(out: dict[str, str], span_id: str) -> bool:
    return span_id in out.values()
