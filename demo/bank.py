"""The banking demo app: an Orchestrator and two workers (AccountAgent, PaymentsAgent) on
the plain `openai` client, instrumented with tracefix's public API exactly as a user would.

    import tracefix
    tracefix.init()                      # the process's main does this, not run_task
    from tracefix.demo.bank import run_task
    run_task("t02", base_url="http://127.0.0.1:8765/v1")   # -> {"final_answer": ..., ...}

The reward (`evaluate`, registered as the tracefix evaluator of `run_task`) is tau-bench
style: replay the task's gold actions on a fresh database and compare database hashes, and
check the final answer states the required outputs. Score 1.0 or 0.0.

Identity for the scripted LLM server travels in headers (`X-Demo-Task`, `X-Demo-Step`,
`X-Demo-Session`, `X-Demo-Replay`), never in the request body, so traces and replay
fingerprints see only what a real app would send.
"""
from __future__ import annotations

import contextvars
import functools
import os
import threading
import uuid
from typing import Any

import tracefix

from .bank_content import content
from .db import BankDB
from .policy import fault_free_outcome
from .tasks import Task, get_task
from .team import Team
from .tools import BankTools
from .variants import scored, split_id

MODEL = os.environ.get("TRACEFIX_DEMO_MODEL", "bank-agent")
ENTRYPOINT = "tracefix.demo.bank:run_task"

# The database the tools act on during run_task. Tools take only the LLM's arguments, so
# the recorded tool arguments are exactly the model's tool-call arguments.
_bank: contextvars.ContextVar[BankTools] = contextvars.ContextVar("tracefix_demo_bank")


# The database of the latest run_task in this thread, for callers that score runs without
# tracefix (demo-run, tests); inside tracefix the evaluator receives it as tracked["db"].
_last = threading.local()


def last_database() -> BankDB:
    db = getattr(_last, "db", None)
    if db is None:
        raise RuntimeError("run_task has not run in this thread")
    return db


def _tools() -> BankTools:
    try:
        return _bank.get()
    except LookupError:
        raise RuntimeError("banking tools are only usable inside run_task") from None


@tracefix.tool
def lookup_customer(name: str | None = None) -> dict:
    return _tools().lookup_customer(name=name)


@tracefix.tool
def get_accounts(customer_id: str | None = None) -> dict:
    return _tools().get_accounts(customer_id=customer_id)


@tracefix.tool
def get_balance(account_id: str | None = None) -> dict:
    return _tools().get_balance(account_id=account_id)


@tracefix.tool
def close_account(account_id: str | None = None) -> dict:
    return _tools().close_account(account_id=account_id)


@tracefix.tool
def transfer(from_account: str | None = None, to_account: str | None = None, amount: float | None = None) -> dict:
    return _tools().transfer(from_account=from_account, to_account=to_account, amount=amount)


@tracefix.tool
def deposit_check(account_id: str | None = None, check_number: str | None = None) -> dict:
    return _tools().deposit_check(account_id=account_id, check_number=check_number)


@tracefix.tool
def get_transactions(account_id: str | None = None) -> dict:
    return _tools().get_transactions(account_id=account_id)


TOOLS = {fn.__name__: fn for fn in (lookup_customer, get_accounts, get_balance, close_account, transfer,
                                    deposit_check, get_transactions)}


def run_tool(name: str, arguments: dict) -> Any:
    fn = TOOLS.get(name)
    if fn is None:
        raise ValueError(f"unknown tool {name!r}")
    return fn(**arguments)


def _assistant_message(message: Any) -> dict:
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.function.name, "arguments": c.function.arguments}}
                             for c in message.tool_calls]
    return out


@tracefix.session
def run_task(task_id: str, *, base_url: str, seed: int = 0) -> dict:
    """Run one banking task against an OpenAI-compatible endpoint; returns the final answer."""
    import openai  # the demo extra; kept out of module import so `tracefix.demo.bank` loads cheaply

    task = get_task(task_id)
    db = fresh_db(task_id)
    tracefix.track("db", db)
    _last.db = db
    token = _bank.set(BankTools(db))
    headers = {"X-Demo-Task": task_id,
               "X-Demo-Session": tracefix.current_session_id() or f"local-{uuid.uuid4().hex[:12]}"}
    if tracefix.replay_active():
        headers["X-Demo-Replay"] = "1"
    # No client retries: one LLM call is one request, so the sim's step header is exact.
    client = openai.OpenAI(base_url=base_url, api_key=os.environ.get("TRACEFIX_DEMO_API_KEY", "sim-key"),
                           default_headers=headers, max_retries=0)
    steps = 0

    def llm(agent: str, messages: list, tools: list | None) -> dict:
        nonlocal steps
        kwargs: dict[str, Any] = {"model": MODEL, "messages": messages, "seed": seed,
                                  "extra_headers": {"X-Demo-Step": str(steps)}}
        if tools:
            kwargs["tools"] = tools
        steps += 1
        response = client.chat.completions.create(**kwargs)
        return _assistant_message(response.choices[0].message)

    try:
        team = Team(llm, run_tool, tracefix.agent)
        answer = team.run(task.instruction)
    finally:
        _bank.reset(token)
        client.close()
    return {"final_answer": answer, "task_id": task_id, "llm_calls": steps, "replans": team.replans}


def _state_of(db: Any) -> BankDB:
    if isinstance(db, BankDB):
        return db
    if isinstance(db, dict):
        return BankDB(db)
    raise TypeError(f"expected a BankDB or its state, got {type(db).__name__}")


def fresh_db(task_id: str) -> BankDB:
    """The database a run of this task starts from: its seed's bank (:mod:`tracefix.demo.bank_content`)."""
    return BankDB(content(split_id(task_id)[1]).state)


@functools.lru_cache(maxsize=None)
def scored_task(task_id: str) -> Task:
    """The task with what its reward checks (a variant's derived: :func:`tracefix.demo.variants.scored`)."""
    return scored(task_id, get_task, fault_free_outcome)


def gold_db(task_id: str) -> BankDB:
    """A fresh database with the task's gold actions applied."""
    db = fresh_db(task_id)
    tools = BankTools(db)
    for name, args in scored_task(task_id).gold_actions:
        tools.call(name, dict(args))
    return db


def _milestone(db: BankDB, name: str, args: dict) -> tuple[str, bool]:
    txs = db.state["transactions"]
    if name == "transfer":
        cents = round(args["amount"] * 100)
        return (f"transfer {args['from_account']}->{args['to_account']} {cents / 100:.2f}",
                any(t["kind"] == "transfer" and t.get("from") == args["from_account"]
                    and t.get("to") == args["to_account"] and t["amount_cents"] == cents for t in txs))
    if name == "deposit_check":
        return (f"deposit {args['check_number']} into {args['account_id']}",
                any(t.get("check") == args["check_number"] and t.get("account_id") == args["account_id"] for t in txs))
    if name == "close_account":
        acct = db.state["accounts"].get(args["account_id"], {})
        return f"close {args['account_id']}", acct.get("status") == "closed"
    return name, False


def evaluate(task_id: str, db: Any, final_answer: str | None) -> dict:
    """tau-bench style reward: database hash equals the gold one AND the answer states every
    required output. Milestones (one per gold action and required output) give progress."""
    task = scored_task(task_id)
    actual = _state_of(db)
    answer = final_answer or ""
    db_match = actual.hash() == gold_db(task_id).hash()
    missing = [o for o in task.required_outputs if o.lower() not in answer.lower()]
    milestones = [{"name": n, "achieved": ok} for n, ok in
                  (_milestone(actual, name, args) for name, args in task.gold_actions)]
    milestones += [{"name": f"answer states {o}", "achieved": o not in missing} for o in task.required_outputs]
    success = db_match and not missing
    return {"success": success, "score": 1.0 if success else 0.0, "db_match": db_match,
            "missing_outputs": missing, "milestones": milestones}


@tracefix.evaluator(ENTRYPOINT)
def reward(inputs: dict, output: Any, tracked: dict) -> dict:
    answer = output.get("final_answer") if isinstance(output, dict) else None
    db = tracked.get("db")
    if db is None:
        return {"success": False, "score": 0.0, "error": "the database was not tracked"}
    return evaluate(inputs["task_id"], db, answer)
