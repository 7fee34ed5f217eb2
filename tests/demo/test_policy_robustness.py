"""Whatever conversation arrives, the scripted model answers (never a 500) and the server
keeps serving: replays put edited and foreign text into these conversations."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tracefix.demo.policy import decide
from tracefix.demo.tasks import TASK_LIST
from tracefix.demo.team import AGENTS, system_prompt

snippets = st.sampled_from(
    [f"Task: {t.instruction}" for t in TASK_LIST[:5]]
    + ["REPORT from AccountAgent: done.\n- customer \"Alice Chen\": CUST-001",
       "REPORT from AccountAgent: done.\n- account ACC-1001 of CUST-001: checking, balance 1250.00, open",
       "REPORT from PaymentsAgent: FAILED. transfer failed twice: InsufficientFunds: no",
       "CORRECTION for PaymentsAgent: call transfer with the amount.", "correction: final answer later",
       "The money goes into ACC-1002, not ACC-1003; the amount is $20.", "Note: the check number is CHK-5001.",
       "PaymentsAgent: Deposit check CHK-5001 into account ACC-1007.\n\nNote: use the check from the task.",
       "PaymentsAgent: Transfer $5 from account ACC-1001 to account ACC-1002 using transfer.",
       "AccountAgent: close ACC-1010", "REVISED PLAN (attempt 2): retry", "FINAL ANSWER: done", "", "{}"]
) | st.text(max_size=80)
message = st.one_of(
    st.builds(lambda a: {"role": "system", "content": system_prompt(a)}, st.sampled_from(AGENTS)),
    st.builds(lambda c: {"role": "user", "content": c}, snippets),
    st.builds(lambda c: {"role": "assistant", "content": c}, snippets),
    st.builds(lambda name, args, cid: {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}]},
        st.sampled_from(["lookup_customer", "get_accounts", "transfer", "nope"]),
        st.sampled_from(['{"name": "Alice Chen"}', "{}", "not json", '{"amount": "x"}', "[1]"]),
        st.sampled_from(["call_a", "call_b"])),
    st.builds(lambda cid, c: {"role": "tool", "tool_call_id": cid, "content": c},
              st.sampled_from(["call_a", "call_b"]),
              st.sampled_from(['{"customer_id": "CUST-001", "name": "Alice Chen"}', '{"error": "x"}',
                               '{"accounts": 3}', "oops", "null"])),
)
conversations = st.lists(message, min_size=1, max_size=12)


def _refused_call(agent: str, ask: str, tool: str, arguments: str) -> list[dict]:
    return [{"role": "system", "content": system_prompt(agent)}, {"role": "user", "content": ask},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": tool, "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "call_a", "content": '{"error": "x"}'}]


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations, st.booleans())
# Found by a CI run: a refused call whose arguments were JSON but no object crashed the repair.
@example(_refused_call("PaymentsAgent", "PaymentsAgent: Transfer $5 from account ACC-1001 to account ACC-1002 "
                       "using transfer.", "transfer", "[1]"), False)
@example(_refused_call("AccountAgent", "AccountAgent: close ACC-1010", "lookup_customer", "[1]"), False)
def test_policy_always_returns_an_assistant_message(messages, reads_edits):
    decision = decide(messages, reads_edits=reads_edits)
    m = decision.message
    assert m["role"] == "assistant"
    assert isinstance(m.get("content"), str) or m.get("tool_calls")
    for kind, (variant, need) in decision.hosts.items():
        assert variant().message["role"] == "assistant" and need.target
        need.met_by(decision.edit)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(conversations)
def test_server_never_answers_500(clean_sim, messages):
    body = json.dumps({"model": "bank-agent", "messages": messages}).encode()
    req = urllib.request.Request(clean_sim.base_url + "/chat/completions", data=body, method="POST",
                                 headers={"X-Demo-Task": "t02", "X-Demo-Step": "3", "X-Demo-Session": "fuzz"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.status == 200
    except urllib.error.HTTPError as e:
        assert e.code < 500, e.read()


results = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                           st.sampled_from(["customer_id", "name", "accounts", "account_id", "balance", "status",
                                            "transactions", "transaction_id", "type", "error"]), inner, max_size=4),
                       max_leaves=8)


@settings(max_examples=300, deadline=None, database=None)
@given(st.sampled_from(TASK_LIST), st.integers(0, 3), st.sampled_from(["AccountAgent", "PaymentsAgent"]),
       st.sampled_from(["lookup_customer", "get_accounts", "get_balance", "transfer", "deposit_check",
                        "get_transactions", "close_account"]), results)
def test_worker_reports_any_tool_result_shape(task, index, worker, tool, result):
    """A replay may replace a tool result with anything; the worker still reports."""
    sub = task.subtasks[index % len(task.subtasks)]
    instruction = sub.instruction.replace("{", "").replace("}", "")
    messages = [{"role": "system", "content": system_prompt(worker)}, {"role": "user", "content": instruction},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": tool, "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": json.dumps(result)}]
    decision = decide(messages)
    assert decision.message["role"] == "assistant"
    for variant, _ in decision.hosts.values():
        variant()
