"""The scripted `bank-agent` model: reads a conversation of the banking team and returns
the next assistant message, the way a competent LLM would.

Everything is derived from the messages (the role from the system prompt, the task from
the orchestrator's first user message, progress and facts from the reports), never from
hidden state, so a replay that feeds back a recorded prefix gets the same continuation.

`decide()` returns the correct message together with the faulty variants this step could
host (see :mod:`tracefix.demo.faults`); the fault injector picks one or none. Two
behaviours make a single fault cascade realistically instead of being silently repaired:

* a worker that sees one of its own tool calls fail retries it once, identically, then
  reports failure; later, asked again, it copies its earlier failed call (in-context
  repetition) unless a followed CORRECTION names that tool;
* the orchestrator, retrying a failed sub-task after a REVISED PLAN, re-sends its earlier
  instruction verbatim unless a followed CORRECTION names that worker or action; after two
  re-plans it gives up with a final answer saying so.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from .db import INITIAL_STATE
from .tasks import Subtask, Task, task_for_instruction
from .team import ORCHESTRATOR, WORKERS, classify_orchestrator_output, is_correction, role_of
from .tools import MUTATING_TOOLS, WORKER_TOOLS, required_arguments

KINDS = ("wrong_argument", "missing_argument", "skipped_action", "wrong_instruction",
         "vague_instruction", "misread_tool_result", "early_final_answer")
MAX_REPLANS = 2

# followed(names) -> True when this request carries a CORRECTION naming one of `names`
# that the model decided to follow.
Followed = Callable[[list], bool]


def never_followed(names: list) -> bool:
    return False


@dataclass
class Variant:
    message: dict
    detail: str


@dataclass
class Decision:
    agent: str | None
    phase: str  # plan | replan | instruct | final | tool | report | chat
    message: dict
    tool: str | None = None
    # kind -> (faulty variant, the names a correction must mention to prevent it)
    hosts: dict[str, tuple[Callable[[], Variant], list[str]]] = field(default_factory=dict)


def text_message(content: str) -> dict:
    return {"role": "assistant", "content": content}


def tool_call_message(name: str, arguments: dict, call_id: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def _call_id(messages: list[dict], name: str) -> str:
    # Derived from the conversation so identical contexts give identical ids.
    digest = hashlib.sha256(json.dumps([len(messages), name, messages[-1].get("content")],
                                       default=str).encode()).hexdigest()
    return f"call_{digest[:12]}"


def other_account(account_id: str, avoid: set[str]) -> str:
    """A plausible wrong account: the same customer's other account, else the next one."""
    accounts = INITIAL_STATE["accounts"]
    owner = accounts.get(account_id, {}).get("customer_id")
    ids = sorted(accounts)
    siblings = [a for a in ids if accounts[a]["customer_id"] == owner and a != account_id and a not in avoid]
    if siblings:
        return siblings[0]
    start = ids.index(account_id) if account_id in ids else -1
    for offset in range(1, len(ids) + 1):
        candidate = ids[(start + offset) % len(ids)]
        if candidate != account_id and candidate not in avoid:
            return candidate
    return account_id


def decide(messages: list[dict], tools: list | None = None, followed: Followed = never_followed) -> Decision:
    role = role_of(messages)
    if role == ORCHESTRATOR:
        return _orchestrator(messages, followed)
    if role in WORKERS:
        return _worker(role, messages, followed)
    return Decision(role, "chat", text_message(
        "bank-agent (scripted demo model): I play the agents of tracefix's banking demo. "
        "Give me a system prompt naming the Orchestrator or a worker."))


# --- Orchestrator ---------------------------------------------------------------------------

class Unresolved(Exception):
    pass


@dataclass
class Facts:
    customers: dict[str, str] = field(default_factory=dict)  # name -> id
    accounts: dict[str, dict] = field(default_factory=dict)  # id -> owner/type/balance/status
    last_tx: dict[str, str] = field(default_factory=dict)

    def learn(self, report: str) -> None:
        for name, cid in re.findall(r'customer "([^"]+)": (CUST-\d{3})', report):
            self.customers[name] = cid
        for aid, owner, kind, bal, status in re.findall(
                r"account (ACC-\d{4}) of (CUST-\d{3}): (\w+), balance ([\d.]+), (\w+)", report):
            self.accounts[aid] = {"owner": owner, "type": kind, "balance": bal, "status": status}
        for aid, bal in re.findall(r"account (ACC-\d{4}): balance ([\d.]+)", report):
            self.accounts.setdefault(aid, {})["balance"] = bal
        for aid in re.findall(r"account (ACC-\d{4}): closed", report):
            self.accounts.setdefault(aid, {})["status"] = "closed"
        for aid, tx in re.findall(r"latest transaction of (ACC-\d{4}): (\S+)", report):
            self.last_tx[aid] = tx

    def believe(self, sub: Subtask, report: str) -> None:
        """File a read-only sub-task's reported value under the account it asked about."""
        if sub.reads is None:
            return
        try:
            intended = self.resolve(sub.reads)
        except Unresolved:
            return
        balance = re.search(r"balance ([\d.]+)", report)
        latest = re.search(r"latest transaction of ACC-\d{4}: (\S+)", report)
        if sub.action == "get_balance" and balance:
            self.accounts.setdefault(intended, {})["balance"] = balance.group(1)
        if sub.action == "get_transactions" and latest:
            self.last_tx[intended] = latest.group(1)

    def account(self, name: str, kind: str) -> str:
        cid = self.customers.get(name)
        for aid, a in sorted(self.accounts.items()):
            if cid and a.get("owner") == cid and a.get("type") == kind:
                return aid
        raise Unresolved(f"{name}'s {kind} account")

    def resolve(self, template: str) -> str:
        def one(m: re.Match) -> str:
            what, _, rest = m.group(1).partition(":")
            parts = rest.split(":")
            if what == "acct":
                return self.account(parts[0], parts[1])
            if what == "bal":
                bal = self.accounts[self.account(parts[0], parts[1])].get("balance")
                if bal is None:
                    raise Unresolved(f"the balance of {parts[0]}'s {parts[1]} account")
                return bal
            if what == "lasttx":
                return self.last_tx.get(self.account(parts[0], parts[1]), "none")
            if what == "total":
                cid = self.customers.get(parts[0])
                owned = [float(a.get("balance", 0)) for a in self.accounts.values()
                         if cid and a.get("owner") == cid and a.get("status") == "open"]
                if not owned:
                    raise Unresolved(f"{parts[0]}'s accounts")
                return f"{sum(owned):.2f}"
            raise Unresolved(m.group(0))
        return re.sub(r"\{([a-z]+:[^}]+)\}", one, template)


def _task_of(messages: list[dict]) -> Task | None:
    for m in messages:
        if m.get("role") == "user" and str(m.get("content", "")).startswith("Task:"):
            return task_for_instruction(str(m["content"])[len("Task:"):])
    return None


def _is_report(m: dict) -> bool:
    return m.get("role") == "user" and str(m.get("content") or "").startswith("REPORT")


def _failed(report: str) -> bool:
    return "FAILED" in report.split("\n", 1)[0]


def _plan_lines(subtasks: tuple[Subtask, ...]) -> str:
    lines = [f"{i}. {s.summary}" for i, s in enumerate(subtasks, 1)]
    lines.append(f"{len(subtasks) + 1}. Answer the customer.")
    return "\n".join(lines)


def _orchestrator(messages: list[dict], followed: Followed) -> Decision:
    task = _task_of(messages)
    if task is None:
        return Decision(ORCHESTRATOR, "final", text_message(
            "FINAL ANSWER: I could not identify a banking task in this conversation."))
    facts = Facts()
    progress, replans, spoke = 0, 0, False
    sent: dict[int, str] = {}  # sub-task index -> the last instruction sent for it
    last = None
    for m in messages:
        if is_correction(m) or m.get("role") == "system":
            continue
        if m.get("role") == "assistant":
            spoke = True
            kind, _, text = classify_orchestrator_output(m.get("content") or "")
            if kind == "plan" and re.match(r"REVISED", text, re.I):
                replans += 1
            elif kind == "instruct":
                sent[progress] = m.get("content") or ""
        elif _is_report(m):
            report = str(m["content"])
            if not _failed(report):
                facts.learn(report)
                if progress < len(task.subtasks):
                    facts.believe(task.subtasks[progress], report)
                progress += 1
        last = m

    if not spoke:
        return Decision(ORCHESTRATOR, "plan", text_message(f"PLAN:\n{_plan_lines(task.subtasks)}"))
    if last is not None and _is_report(last) and _failed(str(last["content"])):
        reason = str(last["content"]).split("FAILED.", 1)[-1].strip().split("\n")[0]
        if replans >= MAX_REPLANS:
            return Decision(ORCHESTRATOR, "final", text_message(
                f"FINAL ANSWER: I could not complete the request after {replans + 1} attempts: {reason}"))
        return Decision(ORCHESTRATOR, "replan", text_message(
            f"REVISED PLAN (attempt {replans + 2}): the last step failed ({reason}). Retry from there:\n"
            f"{_plan_lines(task.subtasks[progress:])}"))
    if progress >= len(task.subtasks):
        try:
            answer = facts.resolve(task.answer)
        except Unresolved as exc:
            answer = f"I could not complete the request: I never learned {exc}."
        return Decision(ORCHESTRATOR, "final", text_message(f"FINAL ANSWER: {answer}"))

    sub = task.subtasks[progress]
    targets = [sub.worker, sub.action]
    if progress in sent and not followed(targets):
        instruction = sent[progress]  # retrying: the model repeats itself (see module docstring)
    else:
        try:
            instruction = f"{sub.worker}: {facts.resolve(sub.instruction)}"
        except Unresolved as exc:
            return Decision(ORCHESTRATOR, "final", text_message(
                f"FINAL ANSWER: I could not complete the request: I never learned {exc}."))
    decision = Decision(ORCHESTRATOR, "instruct", text_message(instruction))
    ids = re.findall(r"ACC-\d{4}", instruction)
    if ids:
        wrong_id = other_account(ids[-1], set(ids))

        def wrong() -> Variant:
            # replace only the last mention: the destination/target of the action
            head, _, tail = instruction.rpartition(ids[-1])
            return Variant(text_message(head + wrong_id + tail),
                           f"instructed {sub.worker} to use {wrong_id} instead of {ids[-1]} for {sub.action}")
        decision.hosts["wrong_instruction"] = (wrong, targets)
    decision.hosts["vague_instruction"] = (lambda: Variant(
        text_message(f"{sub.worker}: please handle the next part of the customer's request as discussed."),
        f"instruction to {sub.worker} for {sub.action} named no action, account or amount"), targets)
    if progress == 0:
        return decision  # an early answer comes after some work was done, not before any
    decision.hosts["early_final_answer"] = (lambda: Variant(
        text_message("FINAL ANSWER: All requested actions for the customer have been completed."),
        f"answered before sub-task {progress + 1} of {len(task.subtasks)} ({sub.action}) was done"),
        ["final answer"])
    return decision


# --- Workers --------------------------------------------------------------------------------

_INTENT_PATTERNS = {
    "lookup_customer": r"lookup_customer|look up (?:the )?customer|find (?:the )?customer",
    "get_accounts": r"get_accounts|list (?:their|his|her|the) accounts|accounts of customer",
    "get_balance": r"get_balance|current balance|balance of account",
    "close_account": r"close_account|\bclose\b",
    "transfer": r"\btransfer\b|\bmove \$|\bsend \$",
    "deposit_check": r"deposit_check|\bdeposit\b",
    "get_transactions": r"get_transactions|recent transactions|transaction history",
}


@dataclass
class Intent:
    tool: str
    args: dict  # None values are filled from earlier results (customer_id from a lookup)


def parse_instruction(text: str, own_tools: list[str]) -> tuple[list[Intent], str | None]:
    """The tool calls an instruction asks for, in order, with the arguments it states; or
    ([], reason) when it does not say enough to act on."""
    found = []
    for tool in own_tools:
        m = re.search(_INTENT_PATTERNS[tool], text, re.I)
        if m:
            found.append((m.start(), tool))
    if not found:
        return [], "it names none of my actions"
    accounts = re.findall(r"ACC-\d{4}", text)
    amount = re.search(r"\$\s*([\d,]+(?:\.\d+)?)", text) or re.search(r"amount (?:of )?([\d,]+(?:\.\d+)?)", text)
    name = re.search(r'"([^"]+)"', text) or re.search(r"customer (?:named )?([A-Z][a-z]+ [A-Z][a-z]+)", text)
    customer = re.search(r"CUST-\d{3}", text)
    check = re.search(r"CHK-\d{4}", text)
    src = re.search(r"from (?:account )?(ACC-\d{4})", text)
    dst = re.search(r"(?:to|into) (?:account )?(ACC-\d{4})", text)
    intents = []
    for _, tool in sorted(found):
        if tool == "lookup_customer":
            args = {"name": name.group(1) if name else None}
        elif tool == "get_accounts":
            args = {"customer_id": customer.group(0) if customer else None}
        elif tool in ("get_balance", "close_account", "get_transactions"):
            args = {"account_id": accounts[0] if accounts else None}
        elif tool == "transfer":
            args = {"from_account": src.group(1) if src else (accounts[0] if accounts else None),
                    "to_account": dst.group(1) if dst else (accounts[1] if len(accounts) > 1 else None),
                    "amount": float(amount.group(1).replace(",", "")) if amount else None}
        else:  # deposit_check
            args = {"account_id": dst.group(1) if dst else (accounts[0] if accounts else None),
                    "check_number": check.group(0) if check else None}
        intents.append(Intent(tool, args))
    tools_seen = {i.tool for i in intents}
    for intent in intents:
        for arg, value in intent.args.items():
            derivable = intent.tool == "get_accounts" and "lookup_customer" in tools_seen
            if value is None and not derivable:
                return [], f"it does not say the {arg.replace('_', ' ')} for {intent.tool}"
    return intents, None


@dataclass
class Call:
    name: str
    args: dict
    result: Any
    error: str | None


def _calls(messages: list[dict]) -> list[Call]:
    results = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
    calls = []
    for m in messages:
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function", {})
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                args = {}
            raw = results.get(tc.get("id"))
            try:
                result = json.loads(raw) if raw is not None else None
            except ValueError:
                result = raw
            error = result.get("error") if isinstance(result, dict) and set(result) == {"error"} else None
            calls.append(Call(fn.get("name"), args, None if error else result, error))
    return calls


def _report(agent: str, calls: list[Call], extra: list[str] = ()) -> str:
    lines = [f"REPORT from {agent}: done."]
    for c in calls:
        if c.error:
            continue
        try:
            lines += _result_lines(c)
        except (KeyError, TypeError, IndexError, AttributeError):
            # a result of another shape (e.g. replaced in a replay): pass it on verbatim
            lines.append(f"- {c.name} returned {json.dumps(c.result, sort_keys=True)}")
    lines += list(extra)
    return "\n".join(lines)


def _result_lines(c: Call) -> list[str]:
    """What a worker reports about one successful call (raises on a result of another shape)."""
    r = c.result
    if c.name == "lookup_customer":
        return [f'- customer "{r["name"]}": {r["customer_id"]}']
    if c.name == "get_accounts":
        return [f"- account {a['account_id']} of {r['customer_id']}: {a['type']}, balance {a['balance']}, "
                f"{a['status']}" for a in r["accounts"]]
    if c.name == "get_balance":
        return [f"- account {r['account_id']}: balance {r['balance']}, {r['status']}"]
    if c.name == "transfer":
        return [f"- transfer {r['transaction_id']}: {r['amount']} from {r['from_account']} to {r['to_account']}",
                f"- account {r['from_account']}: balance {r['from_balance']}",
                f"- account {r['to_account']}: balance {r['to_balance']}"]
    if c.name == "deposit_check":
        return [f"- deposit {r['transaction_id']}: {r['amount']} into {r['account_id']}",
                f"- account {r['account_id']}: balance {r['balance']}"]
    if c.name == "close_account":
        return [f"- account {r['account_id']}: closed"]
    if c.name == "get_transactions":
        txs = r["transactions"]
        listed = "; ".join(f"{t['transaction_id']} {t['kind']} {t['amount']}" for t in txs) or "none"
        return [f"- transactions of {r['account_id']}: {listed}",
                f"- latest transaction of {r['account_id']}: {txs[-1]['transaction_id'] if txs else 'none'}"]
    return [f"- {c.name} returned {json.dumps(r, sort_keys=True)}"]


def _misread(calls: list[Call]) -> tuple[list[Call], str, str] | None:
    """A copy of `calls` with one read result misread: (calls, tool, detail)."""
    for i, c in enumerate(calls):
        r = c.result
        if c.error or not isinstance(r, dict):
            continue
        try:
            _result_lines(c)
        except (KeyError, TypeError, IndexError, AttributeError):
            continue  # not the shape this tool returns: nothing to misread
        wrong = json.loads(json.dumps(r))
        if c.name == "get_accounts" and len(r["accounts"]) >= 2:
            kinds = [a["type"] for a in r["accounts"]]
            for a, kind in zip(wrong["accounts"], kinds[1:] + kinds[:1]):
                a["type"] = kind
            detail = "reported account types rotated: " + ", ".join(
                f"{a['account_id']} as {a['type']}" for a in wrong["accounts"])
        elif c.name == "get_balance":
            cents = round(float(r["balance"]) * 100)
            cents = cents - 10000 if cents >= 10000 else cents + 10000
            wrong["balance"] = f"{cents / 100:.2f}"
            detail = f"reported {r['account_id']} balance {wrong['balance']} instead of {r['balance']}"
        elif c.name == "get_transactions" and r["transactions"]:
            wrong["transactions"] = r["transactions"][:-1]
            detail = f"reported the latest transaction of {r['account_id']} as the one before " \
                     f"{r['transactions'][-1]['transaction_id']}"
        else:
            continue
        return calls[:i] + [Call(c.name, c.args, wrong, None)] + calls[i + 1:], c.name, detail
    return None


def _worker(agent: str, messages: list[dict], followed: Followed) -> Decision:
    own = WORKER_TOOLS[agent]
    start = max((i for i, m in enumerate(messages) if m.get("role") == "user" and not is_correction(m)),
                default=None)
    if start is None:
        return Decision(agent, "report", text_message(f"REPORT from {agent}: FAILED. I received no instruction."))
    instruction = str(messages[start].get("content") or "")
    before, segment = _calls(messages[:start]), _calls(messages[start + 1:])
    intents, reason = parse_instruction(instruction, own)
    if reason:
        return Decision(agent, "report", text_message(
            f"REPORT from {agent}: FAILED. I could not act on this instruction: {reason}."))

    if segment and segment[-1].error:
        last = segment[-1]
        if sum(1 for c in segment if c.name == last.name and c.error) >= 2:
            return Decision(agent, "report", text_message(
                f"REPORT from {agent}: FAILED. {last.name} failed twice: {last.error}"))
        if not followed([last.name]):
            return _tool_decision(agent, messages, last.name, dict(last.args))  # retry as is

    done = {c.name: c.result for c in segment if not c.error}
    for intent in intents:
        if intent.tool in done:
            continue
        args = dict(intent.args)
        if intent.tool == "get_accounts" and args["customer_id"] is None:
            found = done.get("lookup_customer")
            args["customer_id"] = found.get("customer_id") if isinstance(found, dict) else None
            if not isinstance(args["customer_id"], str):
                return Decision(agent, "report", text_message(
                    f"REPORT from {agent}: FAILED. lookup_customer returned no customer id, so I cannot "
                    "call get_accounts."))
        # In-context repetition: an earlier failed call to this tool, never since succeeded.
        history = [c for c in before + segment if c.name == intent.tool]
        if history and history[-1].error and not followed([intent.tool]):
            args = dict(history[-1].args)
        return _tool_decision(agent, messages, intent.tool, args)

    decision = Decision(agent, "report", text_message(_report(agent, segment)))
    misread = _misread(segment)
    if misread:
        wrong_calls, tool, detail = misread
        decision.hosts["misread_tool_result"] = (
            lambda: Variant(text_message(_report(agent, wrong_calls)), detail), [tool])
    return decision


def _tool_decision(agent: str, messages: list[dict], tool: str, args: dict) -> Decision:
    call_id = _call_id(messages, tool)
    decision = Decision(agent, "tool", tool_call_message(tool, args, call_id), tool=tool)
    present = [a for a in required_arguments(tool) if args.get(a) is not None]
    if present:
        dropped = present[-1]

        def missing() -> Variant:
            return Variant(tool_call_message(tool, {k: v for k, v in args.items() if k != dropped}, call_id),
                           f"{tool} called without '{dropped}'")
        decision.hosts["missing_argument"] = (missing, [tool])
    if tool in MUTATING_TOOLS:
        key = {"transfer": "to_account", "deposit_check": "account_id", "close_account": "account_id"}[tool]
        if isinstance(args.get(key), str):
            avoid = {v for v in args.values() if isinstance(v, str)}
            wrong_value = other_account(args[key], avoid)

            def wrong() -> Variant:
                return Variant(tool_call_message(tool, {**args, key: wrong_value}, call_id),
                               f"{tool} called with {key}={wrong_value} instead of {args[key]}")
            decision.hosts["wrong_argument"] = (wrong, [tool])
        done = [c for c in _calls(messages[_last_instruction(messages) + 1:]) if not c.error]

        def skipped() -> Variant:
            claim = f"- {tool}: done"
            return Variant(text_message(_report(agent, done, [claim])), f"reported {tool} as done without calling it")
        decision.hosts["skipped_action"] = (skipped, [tool])
    return decision


def _last_instruction(messages: list[dict]) -> int:
    return max((i for i, m in enumerate(messages) if m.get("role") == "user" and not is_correction(m)), default=0)
