import json

import pytest

from tracefix.collector.imports import ImportFormatError, documents_from_text
from tracefix.analysis.units import build_units

WHO_AND_WHEN = {
    "question": "How many accounts does customer C-17 hold?",
    "ground_truth": "3",
    "is_correct": False,
    "mistake_step": "2",
    "history": [
        {"content": "Plan: 1. list accounts of C-17 2. count them", "name": "Orchestrator", "role": "assistant"},
        {"content": "Call list_accounts for customer C-17", "name": "Orchestrator", "role": "assistant"},
        {"content": "Found accounts ACC-101, ACC-102", "name": "AccountAgent", "role": "assistant"},
        {"content": "Error: timeout while reading ACC-103", "name": "Computer_terminal", "role": "user"},
        {"content": "Final answer: 2", "name": "Orchestrator", "role": "assistant"},
    ],
}


def test_history_with_names_becomes_message_steps_numbered_from_zero():
    [doc] = documents_from_text(json.dumps(WHO_AND_WHEN))
    assert doc["task"] == WHO_AND_WHEN["question"]
    assert doc["ground_truth"] == "3"
    assert doc["outcome"] == "failure"
    assert doc["metadata"]["mistake_step"] == "2"
    assert [s["index"] for s in doc["steps"]] == [0, 1, 2, 3, 4]
    assert {s["kind"] for s in doc["steps"]} == {"message"}
    assert [s["agent"] for s in doc["steps"]][:3] == ["Orchestrator", "Orchestrator", "AccountAgent"]
    units = build_units(doc)
    assert units[0].phase == "plan"
    assert units[3].status == "error" and units[3].error_signature.startswith("Error: timeout")
    assert units[4].phase == "answer"
    assert "acc-101" in units[2].artifacts_produced


def test_message_log_phases_come_from_who_speaks_not_from_role_labels():
    """The one who asks instructs, the speaker work goes out from instructs whatever it is
    called, and every other speaker's message is its work, whichever role label the log gives
    it (AutoGen writes "user" for agents, Magentic-One the speaker's name)."""
    log = {"question": "Which shelf holds bin B7?", "history": [
        {"content": "Which shelf holds bin B7?", "role": "human"},
        {"content": "Look up bin B7 in the stock sheet.", "name": "kestrel", "role": "assistant"},
        {"content": "The sheet lists bin B7 on shelf S4.", "name": "lark", "role": "user"},
        {"content": "Check shelf S4 in person.", "name": "kestrel", "role": "assistant"},
        {"content": "Shelf S4 is empty.", "role": "WebSurfer"},
        {"content": "Ask the yard crew about B7.", "name": "kestrel", "role": "assistant"},
        {"content": "The crew moved B7 to shelf S9.", "name": "wren", "role": "assistant"},
        {"content": "Bin B7 is on shelf S9.", "name": "kestrel", "role": "assistant"},
    ]}
    [doc] = documents_from_text(json.dumps(log))
    assert [u.phase for u in build_units(doc)] == ["instruct", "instruct", "act", "instruct", "act", "instruct", "act",
                                                   "answer"]


def test_jsonl_with_messages_and_roles():
    lines = [json.dumps({"task": f"t{i}", "messages": [{"role": "user", "content": "hi"},
                                                        {"role": "assistant", "content": f"answer {i}"}]})
             for i in range(3)]
    docs = documents_from_text("\n".join(lines) + "\n")
    assert [d["task"] for d in docs] == ["t0", "t1", "t2"]
    assert [s["agent"] for s in docs[0]["steps"]] == ["user", "assistant"]
    assert len({d["session_id"] for d in docs}) == 3


def test_json_list_of_conversations_and_bare_message_list():
    convs = [{"task": "a", "history": [{"role": "user", "content": "x"}]},
             {"task": "b", "messages": [{"role": "user", "content": "y"}]}]
    assert [d["task"] for d in documents_from_text(json.dumps(convs))] == ["a", "b"]
    [one] = documents_from_text(json.dumps([{"role": "user", "content": "x"}, {"role": "assistant", "content": "z"}]))
    assert len(one["steps"]) == 2


@pytest.mark.parametrize("text, fragment", [
    ("", "empty"),
    ("{not json", "neither JSON"),
    (json.dumps({"task": "no messages"}), "no `messages` or `history`"),
    (json.dumps({"messages": [{"role": "user"}]}), "message 0"),
    (json.dumps([1, 2]), "item 0"),
])
def test_bad_input_says_what_is_wrong(text, fragment):
    with pytest.raises(ImportFormatError, match=fragment):
        documents_from_text(text)


def test_openai_format_log_keeps_tool_calls_and_finds_the_loop():
    call = {"id": "c1", "type": "function", "function": {"name": "get_balance", "arguments": '{"account_id": "ACC-7"}'}}
    log = {"task": "What is the balance of ACC-1007?", "messages": [
        {"role": "user", "content": "What is the balance of ACC-1007?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "Error: UnknownAccount ACC-7"},
        {"role": "assistant", "content": None, "tool_calls": [{**call, "id": "c2"}]},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: UnknownAccount ACC-7"},
        {"role": "assistant", "content": "I could not find the account."},
    ]}
    [doc] = documents_from_text(json.dumps(log))
    assert doc["steps"][1]["output_message"]["tool_calls"][0]["function"]["name"] == "get_balance"
    assert doc["steps"][2]["output_message"]["tool_call_id"] == "c1"
    from tracefix.analysis.graph import build_graph
    from tracefix.analysis.pipeline import analyze_document

    units = build_units(doc)
    assert units[1].phase == "act" and units[1].tool == "get_balance"
    assert units[1].unsupported == ["acc-7"]  # the task said ACC-1007 (ids read in lower case)
    assert units[1].as_written(units[1].unsupported) == ["ACC-7"]
    graph = build_graph(units)
    assert any(e.type == "loop" and (e.src, e.dst) == (1, 3) for e in graph.edges)
    assert any(e.type == "same_error" and (e.src, e.dst) == (2, 4) for e in graph.edges)
    top = analyze_document(doc, None)["hypotheses"][0]
    assert top["step"] == 1
    assert "uses ACC-7, which its input never showed it" in top["rationale"]  # as the step wrote it
