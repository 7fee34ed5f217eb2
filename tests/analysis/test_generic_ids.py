"""Artifacts and error signatures know no id format: an id is any token that mixes letters
and digits, with or without separators, so the silent-failure signals hold on any app."""
from tracefix.analysis.conflicts import task_conflicts
from tracefix.analysis.agent_reports import misattributed_values, omitted_records
from tracefix.analysis.values import extract_artifacts, normalize_error, unsupported_in


def test_ids_of_any_shape_are_artifacts_and_words_dates_names_are_not():
    found = extract_artifacts("moved ACC-1007 to acc1007, then inv_2024_a1 and 7f3a9c; "
                              "called get_accounts on 2026-11-23 with a plain word")
    assert {"acc-1007", "acc1007", "inv_2024_a1", "7f3a9c"} <= found
    assert not {"get_accounts", "plain", "word", "2026-11-23"} & found


def test_colon_namespaced_ids_are_one_artifact_and_a_colon_after_an_id_or_key_is_not_part_of_it():
    found = extract_artifacts("moved acc:1007 and sku:40-a; ACC-1007: closed at 10:30")
    assert {"acc:1007", "sku:40-a", "acc-1007"} <= found
    assert not {"1007", "40", "acc-1007:", "30"} & found  # an id's tail is not a number of its own
    assert extract_artifacts('{"total":1500,"ref":"acc:1007"}') == {"1500", "acc:1007"}  # compact JSON
    assert normalize_error("no record acc:1007 here") == normalize_error("no record ACC-1007 here")
    assert extract_artifacts("price:64.75 and gpt-4.1") == {"64.75", "gpt-4"}  # a key and its decimal value


def test_a_text_result_keeps_a_colon_namespaced_id_whole_as_the_report_names_it():
    from tracefix.analysis.records import text_records

    (first, second) = text_records("- sku sku:73-m; qty 2; price:64.75\n- sku sku:88-b; qty 1; price:23.90")
    assert first[1] == ["sku", "sku:73-m", "qty", "2", "price", "64.75"]
    assert first[0] == second[0]  # one template: siblings


def test_a_number_written_with_thousands_separators_is_the_number_the_tool_returned():
    assert extract_artifacts("moved 1,500.50 and $12,345 today") == {"1500.5", "12345"}
    assert extract_artifacts("[100,200] or 100, 200") == {"100", "200"}  # a compact list stays two numbers
    assert unsupported_in({"1500", "12345"}, '{"amount": 1500} and 12,345 left') == []
    assert unsupported_in({"1500"}, '{"amount": 1,600}') == ["1500"]


def test_a_number_that_ends_a_sentence_is_a_value_and_one_worked_out_from_two_seen_is_no_invention():
    assert extract_artifacts("Savings: 7800.00. Total: $6,050.") == {"7800", "6050"}
    assert extract_artifacts("version 1.2.3 at 10.0.0.1") == set()  # a period before a digit goes on
    seen = "checking balance 3025.00; savings balance 7800.00; deposit 300.00"
    assert unsupported_in({"10825", "7500", "8100"}, seen) == []  # a total, what is left, a balance after
    assert unsupported_in({"6000", "7801"}, seen) == ["6000", "7801"]  # neither seen nor worked out from two
    assert unsupported_in({"3026"}, seen + "; line 1") == ["3026"]  # a count of a few is no operand


def test_a_clock_reading_or_a_timestamp_is_no_value_a_step_took_from_anywhere():
    """Chat logs stamp every message with the time it was written: the stamp's hour is not an
    invented number, and an ISO timestamp, letters and digits alike, is not an id."""
    assert extract_artifacts("[2026-03-14 09:48:54] moved 1500 to acc-1007") == {"1500", "acc-1007"}
    assert extract_artifacts('{"at": "2026-03-14T09:48:54.120+01:00", "n": 1500} at 14:05, took 1:30:00') == {"1500"}
    assert unsupported_in(extract_artifacts("[2026-03-14 10:02:11] Done: acc-1007 closed."), "close acc-1007") == []
    # A key's decimal value and compact JSON still read as before.
    assert extract_artifacts('price:64.75 {"total":1500} line 12: 30') == {"64.75", "1500", "12", "30"}


def test_an_id_is_the_same_id_whatever_case_an_agent_writes_it_in():
    assert extract_artifacts("pull up ORD_7F3A2 and 'SKU:88-B'") == {"ord_7f3a2", "sku:88-b"}
    assert unsupported_in({"ord_7f3a2"}, "please pull up ORD_7F3A2") == []
    assert unsupported_in({"ord_9a06f"}, "please pull up ORD_7F3A2") == ["ord_9a06f"]
    assert omitted_records("found BOX7A", [RESULT]) == ["box9c"]


def test_error_signatures_ignore_the_id_whatever_its_shape():
    dashed = normalize_error("KeyError: no record ACC-1007 here")
    assert dashed == normalize_error("KeyError: no record QX-88 here")
    assert normalize_error("no record acc1007 here") == normalize_error("no record box42 here") == "no record <id> here"


RESULT = {"items": [{"ref": "box7a", "color": "red", "size": "large"},
                    {"ref": "box9c", "color": "blue", "size": "large"}]}


def test_record_signals_work_with_ids_that_have_no_separator():
    assert misattributed_values("box7a is blue", [RESULT]) == ["blue"]
    assert omitted_records("found box7a", [RESULT]) == ["box9c"]
    assert task_conflicts({"box7a"}, [RESULT], {"blue", "item"}) == ["box7a"]
    assert task_conflicts({"box9c"}, [RESULT], {"blue", "item"}) == []


def test_the_last_item_of_a_listing_that_runs_on_into_its_parents_fields_is_still_a_sibling():
    from tracefix.analysis.records import text_records
    from tracefix.analysis.agent_reports import mispaired_numbers

    prose = ("lines - price 23.90; item desk lamp; qty 2; sku sku:88b\n"
             "- price 11.50; item cable reel; qty 1; sku sku:12k; paid 59.30; status open; ref ord7")
    records = text_records(prose)
    assert [r[1] for r in records] == [["price", "23.90", "item", "desk", "lamp", "qty", "2", "sku", "sku:88b"],
                                           ["price", "11.50", "item", "cable", "reel", "qty", "1", "sku", "sku:12k"],
                                           ["paid", "59.30", "status", "open", "ref", "ord7"]]
    assert records[0][0] == records[1][0] != records[2][0]
    swapped = "ord7 paid 59.30. Line 1: 2 x sku:12k (11.50 each). Line 2: 1 x sku:88b (23.90 each)."
    assert mispaired_numbers(swapped, [prose]) == ["1", "2"]


def test_record_signals_work_with_colon_namespaced_ids():
    result = {"items": [{"ref": "box:7a", "color": "red"}, {"ref": "box:9c", "color": "blue"}]}
    assert misattributed_values("box:7a is blue", [result]) == ["blue"]
    assert omitted_records("found box:7a", [result]) == ["box:9c"]


def _step(i, agent, text="", calls=()):
    return {"index": i, "kind": "llm", "agent": agent, "output_message": {"role": "assistant", "content": text},
            "tool_calls": [dict(c) for c in calls]}


def test_the_coordinator_is_read_from_the_conversation_shape_not_its_name():
    from tracefix.analysis.roles import hub_agents
    from tracefix.analysis.units import build_units

    assert hub_agents(["Kestrel", "Wren", "Wren", "Kestrel", "Alder", "Kestrel"]) == {"Kestrel"}
    assert hub_agents(["Kestrel", "Wren", "Alder", "Kestrel"]) == set()  # Wren handed to Alder: a chain
    assert hub_agents(["Kestrel", "Kestrel"]) == set()
    doc = {"steps": [_step(0, "Kestrel", "1. look up box7a"), _step(1, "Kestrel", "Wren: look up box7a"),
                     _step(2, "Wren", calls=[{"name": "look", "arguments": {"ref": "box7a"}, "result": {"ok": 1}}]),
                     _step(3, "Wren", "box7a is red"), _step(4, "Kestrel", "box7a is red")]}
    assert [u.phase for u in build_units(doc)] == ["plan", "instruct", "act", "answer", "answer"]


def test_a_plain_text_result_from_a_tool_that_answers_in_json_is_an_error_whatever_its_words():
    from tracefix.analysis.units import build_units

    ok = {"name": "look", "arguments": {"ref": "box7a"}, "result": {"ref": "box7a", "color": "red"}}
    prose = {"name": "look", "arguments": {}, "result": "look: a ref is needed to look something up"}
    words = {"name": "say", "arguments": {}, "result": "a ref is needed"}  # a tool that always answers in text
    units = build_units({"steps": [_step(0, "a", calls=[ok]), _step(1, "a", calls=[prose]), _step(2, "a", calls=[words])]})
    assert [u.outcome for u in units] == ["result", "error_result", "result"]
    assert units[1].status == "error" and "a ref is needed" in units[1].error_text


def test_a_failure_inside_an_api_envelope_is_an_error_but_a_wrapped_records_status_is_data():
    from tracefix.analysis.units import build_units

    results = [{"status": 200, "data": {"ref": "box7a", "color": "red"}},
               {"status": 200, "data": {"ok": False, "error": "no such ref"}},
               {"status": 404, "message": "no such ref"},
               {"order": {"ref": "box7a", "status": "rejected"}}]
    steps = [_step(i, "a", calls=[{"name": "look", "arguments": {"ref": "box7a"}, "result": r}])
             for i, r in enumerate(results)]
    units = build_units({"steps": steps})
    assert [u.status for u in units] == ["ok", "error", "error", "ok"]
    assert units[1].error_text.endswith("no such ref")


def test_a_lone_text_answer_in_a_session_of_json_answers_is_an_error_but_a_text_tool_is_not():
    from tracefix.analysis.units import build_units

    ok = {"name": "look", "arguments": {"ref": "box7a"}, "result": {"ref": "box7a", "color": "red"}}
    lone = {"name": "paint", "arguments": {}, "result": "paint: a colour is needed"}
    told = {"name": "tell", "arguments": {}, "result": "done as asked"}
    told2 = {"name": "tell", "arguments": {}, "result": "done, twice"}
    calls = [ok, ok, ok, lone, lone, ok, ok, ok, ok, ok, ok, told, told2]
    steps = [_step(i, "a", calls=[c]) for i, c in enumerate(calls)]
    assert [u.outcome for u in build_units({"steps": steps})] == ["result"] * 3 + ["error_result"] * 2 + ["result"] * 8


def test_a_tool_set_that_answers_in_text_is_not_an_error_in_a_session_of_json_answers():
    """One agent's tools answer in JSON, another agent's in prose: the prose agent's single
    answers are results, not failures returned as text."""
    from tracefix.analysis.units import build_units

    ok = {"name": "look", "arguments": {"ref": "box7a"}, "result": {"ref": "box7a", "color": "red"}}
    lone = {"name": "paint", "arguments": {}, "result": "paint: a colour is needed"}
    paid = {"name": "till", "arguments": {"ref": "box7a"}, "result": "box7a paid 12.50 so far"}
    steps = [_step(0, "a", calls=[ok]), _step(1, "a", calls=[ok]), _step(2, "a", calls=[lone]),
             _step(3, "b", calls=[paid]), _step(4, "a", calls=[ok])]
    assert [u.outcome for u in build_units({"steps": steps})] == ["result", "result", "error_result", "result", "result"]
