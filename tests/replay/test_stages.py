"""The replay pipeline's deterministic stages on hand-written sessions (no processes needed)."""
import copy

import pytest
from replay_docs import analysis_for, failed_deposit_session, llm_step

from tracefix.replay import attribution, interventions, judge, trials
from tracefix.replay.guard import Guard
from tracefix.analysis.llm import parse_json_object
from tracefix.replay.memory import RepairMemory


def test_fallback_segmentation_cuts_at_plans_not_at_instructions():
    doc = failed_deposit_session()
    found, label, note = trials.segment(doc, None, llm=None)
    assert label == "fallback" and note is None
    assert [(t["start"], t["end"], t["plan_step"]) for t in found] == [(0, 4, 0), (5, 7, 5)]
    assert all(t["failed"] for t in found)


def test_segmentation_uses_the_analysis_phase():
    doc = failed_deposit_session()
    doc["steps"][5]["output_message"]["content"] = "Let us try differently."  # no plan words any more
    assert [t["start"] for t in trials.segment(doc, None)[0]] == [0]
    analysis = analysis_for(doc, [3])
    assert [t["start"] for t in trials.segment(doc, analysis)[0]] == [0, 5]


def test_attribution_fallback_takes_the_top_ranked_step_inside_each_trial():
    doc = failed_deposit_session()
    found, _, _ = trials.segment(doc, None)
    hyps, label, notes = attribution.attribute(doc, found, analysis_for(doc, [6, 3, 1]), llm=None)
    assert label == "fallback" and not notes
    assert [(h["trial"], h["step"], h["source"]) for h in hyps] == [(0, 3, "analysis"), (1, 6, "analysis")]
    assert hyps[0]["agent"] == "PaymentsAgent"


def test_attribution_without_analysis_falls_back_to_the_first_error():
    doc = failed_deposit_session()
    found, _, _ = trials.segment(doc, None)
    hyps, _, _ = attribution.attribute(doc, found, None)
    assert hyps[0]["step"] == 3 and hyps[0]["source"] == "fallback"


def test_template_names_the_missing_argument_and_the_value_the_instruction_gives():
    doc = failed_deposit_session()
    doc["steps"][3]["input_messages"] = [
        {"role": "system", "content": "You are PaymentsAgent"},
        {"role": "user", "content": "PaymentsAgent: deposit check CHK-5001 into ACC-1001"}]
    h = {"id": "h-1", "step": 3, "agent": "PaymentsAgent", "evidence": {}}
    iv = interventions.template(doc, h)
    assert iv["kind"] == "add_message" and iv["category"] == "correction" and iv["step"] == 3
    assert "CORRECTION" not in iv["text"]  # plain advice, no code word
    for part in ("Call `deposit_check` again with check_number = CHK-5001, as the instruction you were given at step 2",
                 "missing required argument"):
        assert part in iv["text"], iv["text"]
    assert iv["expect"] == {"agent": "PaymentsAgent", "action": "call_tool", "tool": "deposit_check",
                            "argument": "check_number"}


def test_template_finds_a_quoted_value_for_a_dropped_argument():
    doc = failed_deposit_session()
    doc["steps"][1]["input_messages"] = [{"role": "user", "content": 'Look up the customer named "Ana Diaz".'}]
    doc["steps"][1]["tool_calls"] = [{"id": "c", "name": "lookup_customer", "arguments": {}, "result": None,
                                      "error": "MissingArgument: lookup_customer: missing required argument 'name'"}]
    iv = interventions.template(doc, {"id": "h", "step": 1, "agent": "AccountAgent", "evidence": {}})
    assert "Call `lookup_customer` again with name = Ana Diaz, as your instruction states" in iv["text"], iv["text"]


def test_template_calls_a_value_that_appears_nowhere_in_the_context_wrong_and_gives_the_right_one():
    doc = failed_deposit_session()
    doc["steps"][3]["input_messages"] = [
        {"role": "user", "content": "Move $20 from account ACC-1001 to account ACC-1002 with transfer."}]
    doc["steps"][3]["tool_calls"] = [{"id": "c", "name": "transfer", "error": None, "result": {"ok": True},
                                      "arguments": {"from_account": "ACC-1001", "to_account": "ACC-1003",
                                                    "amount": 20}}]
    iv = interventions.template(doc, {"id": "h", "step": 3, "agent": "PaymentsAgent", "evidence": {}})
    assert iv["text"].startswith("Call `transfer` again with to_account = ACC-1002, as your instruction states.")
    assert "to_account was ACC-1003, which is wrong" in iv["text"]
    assert iv["expect"]["argument"] == "to_account"


def test_template_uses_tool_schema_for_a_silently_missing_argument():
    doc = failed_deposit_session()
    doc["steps"][3]["tool_calls"][0]["error"] = None
    defs = [{"type": "function", "function": {"name": "deposit_check", "parameters": {
        "properties": {"account_id": {}, "check_number": {}}, "required": ["account_id", "check_number"]}}}]
    iv = interventions.template(doc, {"id": "h", "step": 3, "agent": "PaymentsAgent", "evidence": {}}, defs)
    assert iv["expect"]["argument"] == "check_number" and "check_number" in iv["text"]


def test_template_for_an_early_final_answer_and_an_instruction():
    doc = failed_deposit_session()
    final = interventions.template(doc, {"id": "h", "step": 7, "agent": "Orchestrator", "evidence": {}})
    assert "final answer" in final["text"] and final["expect"]["action"] == "continue"
    instr = interventions.template(doc, {"id": "h", "step": 2, "agent": "Orchestrator", "evidence": {}})
    assert "plan" in instr["text"] and "every identifier and amount" in instr["text"]
    assert instr["expect"]["tool"] == "deposit_check"
    assert instr["before"] == "task"


def test_ground_truth_leak_is_detected():
    assert interventions.leaks_ground_truth("the balance is $125.50, say so", {"answer": "$125.50"})
    assert not interventions.leaks_ground_truth("call get_balance again", {"answer": "$125.50"})
    assert not interventions.leaks_ground_truth("anything", None)


def test_fulfilment_heuristic_checks_the_asked_argument():
    doc = failed_deposit_session()
    iv = interventions.template(doc, {"id": "h", "step": 3, "agent": "PaymentsAgent", "evidence": {}})
    followed = copy.deepcopy(doc)
    followed["steps"][3] = llm_step(3, "PaymentsAgent", calls=[
        ("deposit_check", {"account_id": "ACC-1001", "check_number": "CHK-5001"}, {"ok": True}, None)])
    assert judge.judge_fulfilled(iv, doc, followed) == (True, "heuristic")
    assert judge.judge_fulfilled(iv, doc, copy.deepcopy(doc)) == (False, "heuristic")
    assert judge.judge_fulfilled(iv, doc, None) == (None, "unavailable")


def test_a_followed_edit_must_carry_the_values_it_states():
    doc = failed_deposit_session()
    iv = {"step": 3, "kind": "add_message", "expect": {"agent": "PaymentsAgent", "action": "call_tool",
                                                      "tool": "deposit_check", "argument": "check_number"},
          "text": "The check to deposit is CHK-5001 (see the instruction at step 2); pass it as check_number."}

    def replay_with(args, agent="PaymentsAgent"):
        child = copy.deepcopy(doc)
        child["steps"][3] = llm_step(3, agent, calls=[("deposit_check", args, {"ok": True}, None)])
        return child

    assert judge.fulfilled_heuristic(iv, doc, replay_with({"account_id": "ACC-1001", "check_number": "CHK-5001"}))
    # a call that changed but does not carry what the edit said: not the edit followed
    assert not judge.fulfilled_heuristic(iv, doc, replay_with({"account_id": "ACC-1001", "check_number": "CHK-9"}))
    # the right call by another agent is not the edited agent following it
    assert not judge.fulfilled_heuristic(iv, doc, replay_with({"account_id": "ACC-1001", "check_number": "CHK-5001"},
                                                              agent="AccountAgent"))
    # a replay that does at t exactly what the original did is never "fulfilled"
    assert not judge.fulfilled_heuristic({**iv, "expect": {**iv["expect"], "argument": None}}, doc,
                                         copy.deepcopy(doc))
    assert judge.stated_values(iv["text"], {"deposit_check", "check_number"}) == {"CHK-5001"}


def test_an_early_answer_is_replaced_only_when_the_session_goes_on_to_the_pending_action():
    doc = failed_deposit_session()
    iv = {"step": 7, "kind": "add_message", "text": "do not answer yet: deposit_check has not succeeded",
          "expect": {"agent": "Orchestrator", "action": "continue", "tool": "deposit_check", "argument": None}}
    answered_again = copy.deepcopy(doc)
    answered_again["steps"][7] = llm_step(7, "Orchestrator", "Final answer: it is done.")
    assert not judge.fulfilled_heuristic(iv, doc, answered_again)  # reworded, but the session still ends at t
    delegated = copy.deepcopy(doc)
    delegated["steps"][7] = llm_step(7, "Orchestrator", "PaymentsAgent: deposit check CHK-5001 into ACC-1001")
    delegated["steps"].append(llm_step(8, "PaymentsAgent", calls=[
        ("deposit_check", {"account_id": "ACC-1001", "check_number": "CHK-5001"}, {"ok": True}, None)]))
    assert judge.fulfilled_heuristic(iv, doc, delegated)
    elsewhere = copy.deepcopy(delegated)
    elsewhere["steps"][8] = llm_step(8, "PaymentsAgent", calls=[("get_balance", {}, {}, None)])
    assert not judge.fulfilled_heuristic(iv, doc, elsewhere)  # the named pending action never happened


def test_a_changed_instruction_follows_the_edit_only_when_it_carries_the_stated_value():
    doc = failed_deposit_session()
    iv = {"step": 2, "kind": "add_message", "text": "The deposit goes into ACC-1002, which the lookup reported.",
          "expect": {"agent": "Orchestrator", "action": "instruct", "tool": "deposit_check", "argument": None}}

    def replay_with(text):
        child = copy.deepcopy(doc)
        child["steps"][2] = llm_step(2, "Orchestrator", text)
        return child

    assert judge.fulfilled_heuristic(iv, doc, replay_with("PaymentsAgent: deposit check CHK-5001 into ACC-1002"))
    # reworded, with a remark appended, but still the old account: not the edit carried out
    assert not judge.fulfilled_heuristic(iv, doc, replay_with(
        "PaymentsAgent: deposit check CHK-5001 into ACC-1001. Please be careful."))


def test_success_prefers_the_evaluator_then_ground_truth():
    doc = failed_deposit_session()
    assert judge.judge_success({"outcome": "success", "evaluation": {"success": True}}, doc, None) == (True, "evaluator")
    doc["ground_truth"] = "deposited"
    assert judge.judge_success({"output": {"final_answer": "Check deposited."}}, doc, None) == (True, "ground_truth")
    doc["ground_truth"] = None
    assert judge.judge_success({"output": "x"}, doc, None) == (None, "unjudged")


def test_progress_is_the_milestone_difference_over_k():
    doc = failed_deposit_session()
    report = {"evaluation": {"milestones": [{"name": "customer found", "achieved": True},
                                            {"name": "check deposited", "achieved": True}]}}
    assert judge.judge_progress(report, doc, None) == (0.5, "milestones")
    assert judge.judge_progress({"evaluation": None}, doc, None) == (None, "unmeasured")


def _messages(*calls, last="tool"):
    out = [{"role": "user", "content": "task"}]
    for name, args in calls:
        out.append({"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                         "function": {"name": name, "arguments": args}}]})
        out.append({"role": "tool", "tool_call_id": "c", "content": "{}"})
    if last != "tool":
        out.append({"role": "assistant", "content": "done"})
    return out


def test_guard_reminds_of_a_missing_corrective_action_with_cooldown_and_cap():
    g = Guard(agent="PaymentsAgent", tool="deposit_check", argument="check_number", hint="include check_number",
              start_step=3, cooldown_steps=2, cap=2)
    msgs = _messages(("deposit_check", '{"account_id": "ACC-1001"}'))
    assert g(3, "PaymentsAgent", msgs) == []  # not after t yet
    first = g(4, "PaymentsAgent", msgs)
    assert first and first[0]["content"].startswith("CORRECTION for PaymentsAgent (reminder)")
    assert g(5, "PaymentsAgent", msgs) == []  # cooldown
    assert g(6, "AccountAgent", msgs) == []  # another agent
    assert g(6, "PaymentsAgent", msgs)  # second (last allowed by the cap)
    assert g(9, "PaymentsAgent", msgs) == []  # cap reached
    done = _messages(("deposit_check", '{"account_id": "ACC-1001", "check_number": "CHK-5001"}'))
    assert Guard(agent="PaymentsAgent", tool="deposit_check", argument="check_number", start_step=3)(5, "PaymentsAgent", done) == []


def test_guard_breaks_loops_of_identical_calls():
    g = Guard(agent="PaymentsAgent", tool=None, start_step=0)
    msgs = _messages(("get_balance", '{"account_id": "ACC-1"}'), ("get_balance", '{"account_id": "ACC-1"}'))
    out = g(4, "PaymentsAgent", msgs)
    assert out and "twice with the same arguments" in out[0]["content"]
    assert g(8, "PaymentsAgent", _messages(("get_balance", '{"account_id": "ACC-1"}'))) == []


def test_repair_memory_skips_fixed_trials_and_refuted_steps():
    m = RepairMemory()
    m.record(1, {"trial": 0, "step": 3, "agent": "A", "intervention": {"text": "x"}, "verdict": "validated"})
    m.record(1, {"trial": 1, "step": 6, "agent": "B", "intervention": {"text": "y"}, "verdict": "refuted"})
    cands = [{"trial": 0, "step": 2}, {"trial": 1, "step": 6}, {"trial": 1, "step": 7}, {"trial": 1, "step": 5}]
    assert m.plan_round(cands) == [{"trial": 1, "step": 7}]
    assert m.summary()["fixed"] == [0] and m.summary()["unresolved"] == [1]
    assert "refuted" in m.notes_for(6)[0]


@pytest.mark.parametrize("text", ['{"a": 1}', '```json\n{"a": 1}\n```', 'Sure! {"a": 1} hope it helps'])
def test_json_replies_are_parsed_from_common_wrappings(text):
    assert parse_json_object(text) == {"a": 1}


def test_non_object_reply_is_an_error():
    with pytest.raises(ValueError):
        parse_json_object("[1, 2]")


def test_template_for_a_skipped_tool_and_a_misread_result():
    doc = failed_deposit_session()
    instruction = [{"role": "system", "content": "You are PaymentsAgent"},
                   {"role": "user", "content": "Deposit check CHK-5001 into account ACC-1001 using deposit_check."}]
    doc["steps"][4]["input_messages"] = instruction
    skip = interventions.template(doc, {"id": "h", "step": 4, "agent": "PaymentsAgent", "evidence": {}})
    assert "`deposit_check`" in skip["text"] and "has not been carried out" in skip["text"]
    assert skip["expect"]["tool"] == "deposit_check"
    doc["steps"][4]["input_messages"] = instruction + [
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "deposit_check", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"balance": "$60.00"}'}]
    misread = interventions.template(doc, {"id": "h", "step": 4, "agent": "PaymentsAgent", "evidence": {}})
    assert 'returned {"balance": "$60.00"}' in misread["text"] and misread["expect"]["action"] == "reread"


def test_instruction_template_quotes_the_plan_line_it_should_carry_out():
    doc = failed_deposit_session()
    doc["steps"].insert(1, llm_step(1, "Orchestrator", "AccountAgent: look up Ana Diaz"))
    for i, s in enumerate(doc["steps"]):
        s["index"] = i
    iv = interventions.template(doc, {"id": "h", "step": 3, "agent": "Orchestrator", "evidence": {}})
    assert '"PaymentsAgent: deposit the check"' in iv["text"]


def test_prefix_violation_is_detected_from_the_child_counts():
    from tracefix.replay.pipeline import prefix_violation

    doc = failed_deposit_session()  # tool calls at steps 1 and 3 before t=4
    clean = {"counts": {"llm_cassette": 4, "llm_live": 3, "tool_cassette": 2, "tool_live": 1}, "divergence": None}
    assert prefix_violation(clean, None, doc, 4) is None
    leaked = {"counts": {"llm_cassette": 4, "llm_live": 3, "tool_cassette": 1, "tool_live": 2}, "divergence": None}
    assert "ran live in the prefix" in prefix_violation(leaked, None, doc, 4)
    early = {"counts": {"llm_cassette": 2, "tool_cassette": 1}, "divergence": {"step": 2}}
    assert prefix_violation(early, None, doc, 4) is None  # went live at the divergence, as it must
    live_step = {"steps": [{"index": 0, "replay_source": "cassette"}, {"index": 1, "replay_source": "live"}]}
    assert "step 1" in prefix_violation(clean, live_step, doc, 4)


def test_second_round_moves_from_an_unfollowed_worker_edit_to_the_instruction_that_fed_it():
    from tracefix.replay.pipeline import _memory_candidates

    doc = failed_deposit_session()
    m = RepairMemory()
    m.record(1, {"trial": 0, "step": 3, "agent": "PaymentsAgent", "intervention": {"text": "x"},
                 "verdict": "inconclusive"})
    found, _, _ = trials.segment(doc, None)
    candidates, _, _ = attribution.attribute(doc, found, analysis_for(doc, [3, 1, 6]), round_=2, per_trial=2)
    chosen = m.plan_round(_memory_candidates(doc, found, m, 2) + candidates)
    first = next(h for h in chosen if h["trial"] == 0)
    assert (first["step"], first["agent"], first["source"]) == (2, "Orchestrator", "memory")
    # once that is tried too, the analysis' next candidate in the trial comes up
    m.record(2, {**first, "intervention": {"text": "y"}, "verdict": "inconclusive"})
    assert next(h for h in m.plan_round(candidates) if h["trial"] == 0)["step"] == 1


def test_live_tools_after_t_need_a_snapshot_or_explicit_permission():
    from tracefix.replay.pipeline import _live_tools_allowed

    doc = failed_deposit_session()
    with_snapshot = {"snapshots": [{"step": 0, "key": "db", "state": {}}]}
    assert _live_tools_allowed(with_snapshot, doc, 3, False) is None
    refusal = _live_tools_allowed({"snapshots": []}, doc, 3, False)
    assert "--allow-live-tools" in refusal and "tracefix.track" in refusal
    assert _live_tools_allowed({"snapshots": []}, doc, 3, True) is None
    assert _live_tools_allowed({"snapshots": []}, doc, 7, False) is None  # no tool runs after step 7


def test_second_round_questions_the_final_answer_of_an_unfixed_last_trial():
    from tracefix.replay.pipeline import _memory_candidates

    doc = failed_deposit_session()
    found, _, _ = trials.segment(doc, None)
    m = RepairMemory()
    m.record(1, {"trial": 1, "step": 6, "agent": "PaymentsAgent", "intervention": {"text": "x"},
                 "verdict": "inconclusive"})
    extra = _memory_candidates(doc, found, m, 2)
    assert [(h["step"], h["trial"]) for h in extra] == [(5, 1), (7, 1)]  # instruction before 6; final answer
    final = interventions.template(doc, {**extra[1], "evidence": {}})
    assert "final answer" in final["text"]
