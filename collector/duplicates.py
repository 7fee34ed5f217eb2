"""One call described by two instrumentations: which span stands for it.

With tracefix and another instrumentation of the same framework active (OpenInference's
LangChain or openai-agents instrumentor, OpenLLMetry), one LLM call or tool run arrives as
two spans: the framework's view (a LangChain ``LLM`` span, a ``TOOL`` span) and the SDK's or
tracefix's. They are told apart from two different calls by what they share, not by their
tree (each instrumentation parents its spans in its own context):

* LLM calls: the same answer (the same content-addressed output message, which carries the
  call's tool-call ids) over overlapping times, or one LLM span right under another;
* tool runs: the same tool-call id, or the same tool name over overlapping times where one
  of them names no call id.

The span kept is the richer one: tracefix's own LLM span (it has a call sequence number: a
replay addresses it), a tool span naming its call id; else the inner one (the call as it
was made). Two of tracefix's own LLM spans, or two tool spans with call ids, are always two
calls. Pure functions over store rows.
"""
from __future__ import annotations

import bisect
import itertools
from typing import Any, Callable, Iterable, Mapping, Sequence

Row = Mapping[str, Any]


def duplicate_llm_calls(spans: Iterable[Row]) -> dict[str, str]:
    """{span id of a duplicate LLM span: span id of the one kept} within one session's
    `spans` (rows with kind, call_seq, start_ns, end_ns, output_key, span_id, parent_span_id)."""
    llm = [s for s in spans if s["kind"] == "llm"]
    by_answer: dict[Any, list[Row]] = {}
    for s in llm:
        if s["output_key"] is not None:
            by_answer.setdefault(s["output_key"], []).append(s)
    # an LLM span right under another: the SDK's call inside the framework's (their answers
    # may be written differently, a handoff's arguments say)
    by_id = {s["span_id"]: s for s in llm}
    nested = [[by_id[s["parent_span_id"]], s] for s in llm if s.get("parent_span_id") in by_id]
    # tracefix's own calls are never one (each has its sequence number): a group of them only is left out
    groups = [g for g in (*by_answer.values(), *nested) if len(g) > 1 and any(s["call_seq"] is None for s in g)]
    return _merge(groups, rank=lambda s: (s["call_seq"] is not None, s["start_ns"] or 0),
                  distinct=lambda a, b: a["call_seq"] is not None and b["call_seq"] is not None)


def duplicate_tool_runs(spans: Iterable[Row]) -> dict[str, str]:
    """{span id of a duplicate tool span: span id of the one kept} within one session's
    `spans` (rows with kind, start_ns, end_ns, tool_name, tool_call_id, span_id)."""
    by_name: dict[Any, list[Row]] = {}
    for s in spans:
        if s["kind"] == "tool":
            by_name.setdefault(s["tool_name"], []).append(s)
    # one call id: one run; a span naming none may be any run of its tool it overlaps (a tool's
    # runs that each name a call id of their own are all distinct: left out in one pass)
    groups = [g for g in by_name.values()
              if len(g) > 1 and not (all(s["tool_call_id"] for s in g) and len({s["tool_call_id"] for s in g}) == len(g))]
    return _merge(groups, rank=lambda s: (s["tool_call_id"] is not None, s["start_ns"] or 0),
                  distinct=lambda a, b: bool(a["tool_call_id"]) and bool(b["tool_call_id"])
                  and a["tool_call_id"] != b["tool_call_id"],
                  same_key=lambda s: s["tool_call_id"] or None)


def _merge(groups: Iterable[Sequence[Row]], *, rank: Callable[[Row], tuple], distinct: Callable[[Row, Row], bool],
           same_key: Callable[[Row], Any] = lambda s: None) -> dict[str, str]:
    """In each group of candidates, the best span (by `rank`) absorbs every other that is
    the same call (the same non-None `same_key`) or overlaps it in time, unless the two are
    `distinct`; then the best of those left, and so on.

    Each span is compared only with the spans it overlaps (found through the group sorted by
    start, with the furthest end reached so far) and those of its key, not with the whole
    group: a session's thousand runs of one tool, or a thousand equal answers, made this
    quadratic (a 10,000-step session took seconds to read)."""
    out: dict[str, str] = {}
    for group in groups:
        if len(group) < 2:
            continue
        by_start = sorted(group, key=lambda s: s["start_ns"] or 0)
        starts = [s["start_ns"] or 0 for s in by_start]
        reach = list(itertools.accumulate((s["end_ns"] or 0 for s in by_start), max))
        by_key: dict[Any, list[Row]] = {}
        for s in group:
            if (key := same_key(s)) is not None:
                by_key.setdefault(key, []).append(s)
        keepers: set[str] = set()
        for s in sorted(group, key=rank, reverse=True):
            if s["span_id"] in out:
                continue
            start, end = s["start_ns"] or 0, s["end_ns"] or 0
            key = same_key(s)
            candidates = list(by_key[key]) if key is not None else []
            j = bisect.bisect_right(starts, end) - 1
            while j >= 0 and reach[j] >= start:  # every span starting by `end` that may end after `start`
                if (by_start[j]["end_ns"] or 0) >= start:
                    candidates.append(by_start[j])
                j -= 1
            for other in candidates:
                oid = other["span_id"]
                if oid == s["span_id"] or oid in out or oid in keepers or distinct(s, other):
                    continue
                out[oid] = s["span_id"]
                keepers.add(s["span_id"])
    return out
