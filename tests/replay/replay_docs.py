"""Hand-written session documents (contracts §1) for the replay stages' pure tests."""
from __future__ import annotations


def llm_step(index, agent, text="", calls=(), inputs=None):
    tool_calls = [{"id": f"call_{index}_{i}", "name": name, "arguments": args, "result": result, "error": error}
                  for i, (name, args, result, error) in enumerate(calls)]
    return {"index": index, "kind": "llm", "agent": agent, "input_messages": inputs or [{"role": "user", "content": "task"}],
            "output_message": {"role": "assistant", "content": text,
                               "tool_calls": [{"id": c["id"], "type": "function",
                                               "function": {"name": c["name"], "arguments": "{}"}} for c in tool_calls]},
            "tool_calls": tool_calls, "error": None, "snapshots": {}}


def failed_deposit_session():
    """Plan, a deposit_check that misses check_number (error), a re-plan, a wrong final answer."""
    steps = [
        llm_step(0, "Orchestrator", "Plan:\n1. AccountAgent: look up the customer\n2. PaymentsAgent: deposit the check"),
        llm_step(1, "AccountAgent", calls=[("lookup_customer", {"name": "Ana Diaz"}, {"customer_id": "CUST-001"}, None)]),
        llm_step(2, "Orchestrator", "PaymentsAgent: deposit check CHK-5001 into ACC-1001"),
        llm_step(3, "PaymentsAgent", calls=[("deposit_check", {"account_id": "ACC-1001"}, None,
                                             "MissingArgument: deposit_check: missing required argument 'check_number'")]),
        llm_step(4, "PaymentsAgent", "I could not deposit the check."),
        llm_step(5, "Orchestrator", "Revised plan:\n1. PaymentsAgent: retry the deposit\n2. report"),
        llm_step(6, "PaymentsAgent", calls=[("get_balance", {"account_id": "ACC-1001"}, {"balance": "$10.00"}, None)]),
        llm_step(7, "Orchestrator", "Final answer: the check could not be deposited."),
    ]
    steps[0]["snapshots"] = {"db": {"accounts": {}}}
    return {"session_id": "s-test", "entrypoint": "pkg.mod:run", "inputs": {"task_id": "t01"}, "task": "Deposit check",
            "outcome": "failure", "ground_truth": None, "output": {"final_answer": "could not"},
            "evaluation": {"success": False, "milestones": [{"name": "customer found", "achieved": True},
                                                            {"name": "check deposited", "achieved": False}]},
            "replayable": True, "feedback": [{"score": -1, "comment": "check not deposited"}], "steps": steps}


def analysis_for(doc, ranked_steps):
    return {"session_id": doc["session_id"],
            "scores": [{"step": s["index"], "isolation_forest": 0.1 * (s["index"] == ranked_steps[0]),
                        "hgt": 0.0, "phase": "plan" if s["index"] in (0, 5) else "act", "agent": s["agent"]}
                       for s in doc["steps"]],
            "hypotheses": [{"rank": r + 1, "step": k, "agent": doc["steps"][k]["agent"], "score": 1.0 - r / 10,
                            "source": "detectors", "rationale": f"anomalous step {k}",
                            "evidence": {"detectors": ["isolation_forest"], "tool": "deposit_check"}}
                           for r, k in enumerate(ranked_steps)]}
