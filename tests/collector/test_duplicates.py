"""One call described by two instrumentations is one; two calls stay two (collector/duplicates.py),
and what the collector reads from OpenInference / OpenLLMetry framework spans (normalize/dialects.py)."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tracefix.collector.duplicates import duplicate_llm_calls, duplicate_tool_runs
from tracefix.collector.normalize.dialects import graph_node, langchain_tool_message


def llm(span_id, start, end, answer, call_seq=None, parent=None):
    return {"span_id": span_id, "kind": "llm", "start_ns": start, "end_ns": end, "output_key": answer,
            "call_seq": call_seq, "parent_span_id": parent}


def tool(span_id, start, end, name, call_id=None):
    return {"span_id": span_id, "kind": "tool", "start_ns": start, "end_ns": end, "tool_name": name,
            "tool_call_id": call_id}


def test_the_framework_view_of_a_call_tracefix_recorded_is_the_duplicate():
    framework, sdk = llm("oi", 0, 100, 7), llm("tf", 10, 90, 7, call_seq=0)
    assert duplicate_llm_calls([framework, sdk]) == {"oi": "tf"}
    # without tracefix: the inner span (the call as it was made) stands for it
    assert duplicate_llm_calls([framework, llm("sdk", 10, 90, 7)]) == {"oi": "sdk"}
    # an answer written differently (a handoff's arguments) but one span right under the other
    assert duplicate_llm_calls([llm("oi", 0, 100, 1), llm("tf", 10, 90, 2, call_seq=3, parent="oi")]) == {"oi": "tf"}


def test_two_calls_stay_two():
    # tracefix's own calls, even answering the same at the same time (parallel agents)
    assert duplicate_llm_calls([llm("a", 0, 100, 7, call_seq=0), llm("b", 10, 90, 7, call_seq=1)]) == {}
    # the same answer at different times
    assert duplicate_llm_calls([llm("a", 0, 100, 7), llm("b", 200, 300, 7)]) == {}
    # different answers, side by side
    assert duplicate_llm_calls([llm("a", 0, 100, 7), llm("b", 10, 90, 8)]) == {}


def test_tool_runs_merge_by_call_id_or_by_nesting_and_parallel_calls_stay_apart():
    framework, traced = tool("oi", 0, 100, "refund"), tool("tf", 10, 90, "refund", "call_1")
    assert duplicate_tool_runs([framework, traced]) == {"oi": "tf"}
    assert duplicate_tool_runs([tool("a", 0, 10, "refund", "c"), tool("b", 50, 60, "refund", "c")]) == {"a": "b"}
    # two calls of one tool at once, each with its own id
    assert duplicate_tool_runs([tool("a", 0, 100, "refund", "c1"), tool("b", 10, 90, "refund", "c2")]) == {}
    # another tool, or the same one later
    assert duplicate_tool_runs([tool("a", 0, 100, "refund"), tool("b", 10, 90, "get_order", "c")]) == {}
    assert duplicate_tool_runs([tool("a", 0, 100, "refund"), tool("b", 200, 290, "refund", "c")]) == {}


def test_langgraph_nodes_as_openinference_and_openllmetry_write_them():
    meta = json.dumps({"langgraph_step": 1, "langgraph_node": "lookup"})
    assert graph_node({"metadata": meta, "openinference.span.kind": "CHAIN"}, "lookup") == "lookup"
    assert graph_node({"metadata": meta}, "tools_condition") is None  # runs inside the node, is not it
    assert graph_node({"metadata": "{not json langgraph_node"}, "lookup") is None
    openllmetry = {"traceloop.association.properties.langgraph_node": "lookup", "traceloop.entity.name": "lookup"}
    assert graph_node(openllmetry, "lookup.task") == "lookup"


def test_a_langchain_tool_message_result_gives_content_call_id_and_error():
    def message(status):
        return json.dumps({"type": "tool", "data": {"content": "no such order", "tool_call_id": "call_9",
                                                    "status": status}})

    assert langchain_tool_message(message("success")) == ("no such order", "call_9", None)
    assert langchain_tool_message(message("error")) == ("no such order", "call_9", "no such order")
    assert langchain_tool_message('{"tool_call_id": 3}') is None
    assert langchain_tool_message("plain text") is None


def pairwise_tool_runs(spans):
    """The reading of `duplicate_tool_runs` by comparing every two runs of a tool: what the
    indexed version must find."""
    def overlap(a, b):
        return (a["start_ns"] or 0) <= (b["end_ns"] or 0) and (b["start_ns"] or 0) <= (a["end_ns"] or 0)

    out = {}
    by_name = {}
    for s in spans:
        by_name.setdefault(s["tool_name"], []).append(s)
    for group in by_name.values():
        keepers = set()
        for s in sorted(group, key=lambda s: (s["tool_call_id"] is not None, s["start_ns"] or 0), reverse=True):
            if s["span_id"] in out:
                continue
            for other in group:
                oid = other["span_id"]
                both_named = bool(s["tool_call_id"]) and bool(other["tool_call_id"])
                if oid == s["span_id"] or oid in out or oid in keepers or (
                        both_named and s["tool_call_id"] != other["tool_call_id"]):
                    continue
                if (both_named and s["tool_call_id"] == other["tool_call_id"]) or overlap(s, other):
                    out[oid] = s["span_id"]
                    keepers.add(s["span_id"])
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 30), st.sampled_from(["refund", "lookup"]),
                          st.sampled_from([None, "", "c1", "c2", "c3"])), max_size=14))
def test_tool_runs_found_through_the_time_index_are_those_every_pair_compared_finds(rows):
    spans = [tool(f"s{i}", start, start + length, name, call_id) for i, (start, length, name, call_id) in enumerate(rows)]
    assert duplicate_tool_runs(spans) == pairwise_tool_runs(spans)
