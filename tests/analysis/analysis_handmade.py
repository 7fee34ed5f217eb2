"""Small hand-written session documents (contracts section 1) for tests that need exact
control over one fault; the demo testbed supplies realistic corpora elsewhere."""
from __future__ import annotations

import random


def bank_session(seed: int = 0, wrong_instruction: bool = False) -> dict:
    """Orchestrator plans, an AccountAgent looks an account up, a PaymentAgent transfers.
    With `wrong_instruction` the Orchestrator hands over an account id nobody produced
    (step 4), the transfer fails twice (steps 5, 6) and the run ends in a wrong answer."""
    rng = random.Random(seed)
    steps: list[dict] = []

    def add(agent, text="", calls=()):
        idx = len(steps)
        steps.append({
            "index": idx, "kind": "llm", "agent": agent, "duration_ms": rng.uniform(5, 15),
            "input_messages": [{"role": "user", "content": "(context)"}],
            "output_message": {"role": "assistant", "content": text},
            "input_tokens": rng.randint(100, 200), "output_tokens": rng.randint(10, 40),
            "tool_calls": [{"id": f"call_{idx}_{i}", "name": n, "arguments": a, "result": r, "error": e}
                           for i, (n, a, r, e) in enumerate(calls)],
            "error": None,
        })

    src, dst = f"ACC-{rng.randint(1000, 4999)}", f"ACC-{rng.randint(5000, 9999)}"
    amount = rng.choice([25, 50, 75, 120])
    add("Orchestrator", f"Plan:\n1. look up {src}\n2. transfer {amount} from {src} to {dst}")
    add("Orchestrator", f"AccountAgent: look up {src}")
    add("AccountAgent", calls=[("get_account", {"id": src}, {"id": src, "balance": 500}, None)])
    add("AccountAgent", f"Account {src} has balance 500")
    used = "ACC-0042" if wrong_instruction else src
    add("Orchestrator", f"PaymentAgent: transfer {amount} from {used} to {dst}")
    if wrong_instruction:
        err = "ValueError: account 'ACC-0042' not found"
        add("PaymentAgent", calls=[("transfer", {"src": used, "dst": dst, "amount": amount}, None, err)])
        add("PaymentAgent", calls=[("transfer", {"src": used, "dst": dst, "amount": amount}, None, err)])
        add("PaymentAgent", "I could not complete the transfer")
        add("Orchestrator", "Final answer: the transfer could not be made")
    else:
        add("PaymentAgent", calls=[("transfer", {"src": used, "dst": dst, "amount": amount}, {"ok": True}, None)])
        add("PaymentAgent", f"Transferred {amount} successfully")
        add("Orchestrator", f"Final answer: transferred {amount} from {src} to {dst}")
    return {"session_id": f"s-hand-{seed}-{int(wrong_instruction)}",
            "task": f"Transfer {amount} from {src} to {dst}",
            "outcome": "failure" if wrong_instruction else "success", "steps": steps}
