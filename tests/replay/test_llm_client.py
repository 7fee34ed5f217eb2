"""The product's LLM client against the scripted server over real HTTP."""
from __future__ import annotations

import json

import pytest

from tracefix.replay import prompts
from tracefix.analysis.llm import LLMError, ProductLLM


def test_from_env_is_none_without_an_endpoint(monkeypatch):
    monkeypatch.delenv("TRACEFIX_LLM_BASE_URL", raising=False)
    assert ProductLLM.from_env() is None
    monkeypatch.setenv("TRACEFIX_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TRACEFIX_LLM_MODEL", "m")
    llm = ProductLLM.from_env()
    assert (llm.base_url, llm.model) == ("http://127.0.0.1:9/v1", "m")


def test_sim_analyst_answers_each_stage_with_json(sim_url):
    llm = ProductLLM(base_url=sim_url, model="sim-analyst")
    steps = [{"index": 0, "agent": "Orchestrator", "kind": "llm", "output_message": {"content": "PLAN:\n1. a\n2. b"}},
             {"index": 1, "agent": "PaymentsAgent", "kind": "llm", "output_message": {"content": ""},
              "tool_calls": [{"name": "transfer", "arguments": {"amount": 5},
                              "error": "InvalidArgument: transfer: argument 'to_account' must look like ACC-1002"}]},
             {"index": 2, "agent": "Orchestrator", "kind": "llm", "output_message": {"content": "REVISED PLAN: retry"}}]
    answer = llm.complete_json("segmentation", *prompts.segmentation("move money", steps))
    assert answer["initial_planning_step"]["step_index"] == 0
    assert [u["plan_update_step_index"] for u in answer["plan_update_steps"]] == [2]
    trial = {"index": 0, "start": 0, "end": 1}
    answer = llm.complete_json("attribution", *prompts.attribution("move money", trial, steps[:2], [], [], {}))
    assert (answer["mistake_step_index"], answer["mistake_agent"]) == (1, "PaymentsAgent")
    hypothesis = {"step": 1, "agent": "PaymentsAgent", "reason": answer["mistake_reason"]}
    answer = llm.complete_json("intervention", *prompts.intervention("move money", hypothesis, steps[:1], steps[1], {}, []))
    assert "`transfer`" in answer["text"] and "`to_account`" in answer["text"]
    assert llm.requests == 3


def test_a_reply_that_is_not_json_is_retried_once_then_a_clear_error(sim_url):
    llm = ProductLLM(base_url=sim_url, model="bank-agent")  # answers in prose
    with pytest.raises(LLMError, match="not a JSON object after one retry"):
        llm.complete_json("segmentation", "tracefix-stage: segmentation\nsplit it", json.dumps({"problem": "x"}))
    assert llm.requests == 2


def test_an_unreachable_endpoint_is_a_clear_error():
    llm = ProductLLM(base_url="http://127.0.0.1:9/v1", model="m", timeout_s=2)
    with pytest.raises(LLMError, match="request to http://127.0.0.1:9/v1 failed"):
        llm.complete_json("success", "tracefix-stage: success", "{}")


def test_sim_analyst_judges_fulfilment_milestones_and_success(sim_url):
    from tracefix.replay import judge

    llm = ProductLLM(base_url=sim_url, model="sim-analyst")
    failed = {"index": 3, "agent": "PaymentsAgent", "kind": "llm", "output_message": {"content": ""},
              "tool_calls": [{"name": "deposit_check", "arguments": {"account_id": "ACC-1"},
                              "error": "MissingArgument: deposit_check: missing required argument 'check_number'"}]}
    fixed = {**failed, "tool_calls": [{"name": "deposit_check", "arguments": {"account_id": "ACC-1", "check_number": "CHK-1"},
                                       "result": {"balance": "10.00"}, "error": None}]}
    iv = {"step": 3, "kind": "add_message", "text": "Call `deposit_check` with `check_number`."}
    doc = {"session_id": "s", "task": "deposit", "ground_truth": "10.00", "steps": [failed], "feedback": []}
    assert judge.judge_fulfilled(iv, doc, {"steps": [fixed]}, llm) == (True, "llm")
    assert judge.judge_fulfilled(iv, doc, {"steps": [failed]}, llm) == (False, "llm")
    milestones = judge.MilestoneJudge(llm, doc)
    assert milestones.progress({"steps": [fixed]}) > 0  # deposit_check now succeeds
    doc["ground_truth"] = None
    assert judge.judge_success({"output": {"final_answer": "Deposited, balance 10.00"}}, doc, {"steps": [fixed]}, llm) \
        == (True, "llm")
