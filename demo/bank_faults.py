"""The faulty variants the `bank-agent` model's steps can host, each with what an edit must
decide to prevent it (:class:`~tracefix.demo.needs.Need`); the fault injector
(:mod:`tracefix.demo.faults`) picks one or none. The slips are the kinds of
:data:`~tracefix.demo.scripted.KINDS`, in the bank's wording:

- an Orchestrator instruction (:func:`instruction_faults`): the wrong account, a vague
  instruction, or a final answer before the work is done;
- a worker's report (:func:`report_faults`): a read result misread;
- a worker's tool call (:func:`tool_faults`): a dropped argument, the wrong account, or the
  action reported done without the call.
"""
from __future__ import annotations

import json
import re

from .bank_content import accounts_beside
from .bank_edits import SHAPES
from .bank_instructions import instruction_index
from .bank_reports import report, result_lines
from .needs import Need
from .edits import NOTE_MARK, split_note
from .scripted import Call, Hosts, Variant, next_other, text_message, tool_call_message, tool_calls
from .tasks import Subtask
from .tools import MUTATING_TOOLS, required_arguments


def other_account(account_id: str, avoid: set[str]) -> str:
    """A plausible wrong account: the same customer's other account, else the next one."""
    accounts = accounts_beside(account_id)
    owner = accounts.get(account_id, {}).get("customer_id")
    ids = sorted(accounts)
    siblings = [a for a in ids if accounts[a]["customer_id"] == owner and a != account_id and a not in avoid]
    if siblings:
        return siblings[0]
    return next_other(ids, account_id, avoid)


def _value_shapes(tool: str) -> str:
    """What a value for one of the action's arguments looks like (any of them)."""
    return "|".join(SHAPES[a] for a in required_arguments(tool) if a in SHAPES) or "$^"


def instruction_faults(sub: Subtask, instruction: str, fresh_ids: list[str], progress: int,
                       subtasks: int) -> Hosts:
    """The slips of the Orchestrator's instruction for sub-task `progress` (of `subtasks`);
    `fresh_ids` are the ids the instruction it would write now names."""
    hosts: Hosts = {}
    head, note = split_note(instruction)
    ids = re.findall(r"ACC-\d{4}", head)
    if ids:
        wrong_id = other_account(ids[-1], set(ids))

        def wrong() -> Variant:
            # replace only the last mention: the destination/target of the action
            before, _, after = head.rpartition(ids[-1])
            return Variant(text_message(before + wrong_id + after + (NOTE_MARK + note if note else "")),
                           f"instructed {sub.worker} to use {wrong_id} instead of {ids[-1]} for {sub.action}")
        hosts["wrong_instruction"] = (wrong, Need("wrong_instruction", sub.action, shape=r"ACC-\d+",
                                                  target=(sub.worker, sub.action)))
    hosts["vague_instruction"] = (lambda: Variant(
        text_message(f"{sub.worker}: please handle the next part of the customer's request as discussed."),
        f"instruction to {sub.worker} for {sub.action} named no action, account or amount"),
        Need("vague_instruction", sub.action, shape=_value_shapes(sub.action), target=(sub.worker, sub.action)))
    if progress == 0:
        return hosts  # an early answer comes after some work was done, not before any
    hosts["early_final_answer"] = (lambda: Variant(
        text_message("FINAL ANSWER: All requested actions for the customer have been completed."),
        f"answered before sub-task {progress + 1} of {subtasks} ({sub.action}) was done"),
        Need("early_final_answer", sub.action, target=("final answer",)))
    return hosts


def _misread(calls: list[Call]) -> tuple[list[Call], str, str, tuple] | None:
    """A copy of `calls` with one read result misread: (calls, tool, detail, the true values it hides)."""
    for i, c in enumerate(calls):
        r = c.result
        if c.error or not isinstance(r, dict):
            continue
        try:
            result_lines(c)
        except (KeyError, TypeError, IndexError, AttributeError):
            continue  # not the shape this tool returns: nothing to misread
        wrong = json.loads(json.dumps(r))
        if c.name == "get_accounts" and len(r["accounts"]) >= 2:
            kinds = [a["type"] for a in r["accounts"]]
            for a, kind in zip(wrong["accounts"], kinds[1:] + kinds[:1]):
                a["type"] = kind
            hidden: tuple = ()
            detail = "reported account types rotated: " + ", ".join(
                f"{a['account_id']} as {a['type']}" for a in wrong["accounts"])
        elif c.name == "get_balance":
            cents = round(float(r["balance"]) * 100)
            cents = cents - 10000 if cents >= 10000 else cents + 10000
            wrong["balance"] = f"{cents / 100:.2f}"
            hidden = (r["balance"],)
            detail = f"reported {r['account_id']} balance {wrong['balance']} instead of {r['balance']}"
        elif c.name == "get_transactions" and r["transactions"]:
            wrong["transactions"] = r["transactions"][:-1]
            hidden = (r["transactions"][-1]["transaction_id"],)
            detail = f"reported the latest transaction of {r['account_id']} as the one before " \
                     f"{r['transactions'][-1]['transaction_id']}"
        else:
            continue
        return calls[:i] + [Call(c.name, c.args, wrong, None)] + calls[i + 1:], c.name, detail, hidden
    return None


def report_faults(agent: str, calls: list[Call]) -> Hosts:
    """The slip of a worker's report on `calls`: one read result misread (when one can be)."""
    misread = _misread(calls)
    if misread is None:
        return {}
    wrong_calls, tool, detail, true_values = misread
    return {"misread_tool_result": (
        lambda: Variant(text_message(report(agent, wrong_calls)), detail),
        Need("misread_tool_result", tool, values=true_values, target=(tool,)))}


def tool_faults(agent: str, messages: list[dict], tool: str, args: dict, call_id: str) -> Hosts:
    """The slips of a worker's call of `tool` with `args` (the correct call, id `call_id`)."""
    hosts: Hosts = {}
    present = [a for a in required_arguments(tool) if args.get(a) is not None]
    if present:
        dropped = present[-1]

        def missing() -> Variant:
            return Variant(tool_call_message(tool, {k: v for k, v in args.items() if k != dropped}, call_id),
                           f"{tool} called without '{dropped}'")
        hosts["missing_argument"] = (missing, Need("missing_argument", tool, dropped, SHAPES.get(dropped),
                                                   target=(tool,)))
    if tool in MUTATING_TOOLS:
        key = {"transfer": "to_account", "deposit_check": "account_id", "close_account": "account_id"}[tool]
        if isinstance(args.get(key), str):
            avoid = {v for v in args.values() if isinstance(v, str)}
            wrong_value = other_account(args[key], avoid)

            def wrong() -> Variant:
                return Variant(tool_call_message(tool, {**args, key: wrong_value}, call_id),
                               f"{tool} called with {key}={wrong_value} instead of {args[key]}")
            hosts["wrong_argument"] = (wrong, Need("wrong_argument", tool, key, SHAPES.get(key), target=(tool,)))
        done = [c for c in tool_calls(messages[instruction_index(messages) or 0:]) if not c.error]

        def skipped() -> Variant:
            claim = f"- {tool}: done"
            return Variant(text_message(report(agent, done, [claim])), f"reported {tool} as done without calling it")
        hosts["skipped_action"] = (skipped, Need("skipped_action", tool, target=(tool,)))
    return hosts
