"""The scripted `bank-agent` model: reads a conversation of the banking team and returns
the next assistant message, the way a competent LLM would.

Everything is derived from the messages (the role from the system prompt, the task from
the orchestrator's first user message, progress and facts from the reports), never from
hidden state, so a replay that feeds back a recorded prefix gets the same continuation.

`decide()` returns the correct message together with the faulty variants this step could
host (see :mod:`tracefix.demo.faults`) and, for each, the :class:`~tracefix.demo.edits.Need`
an edit must meet to prevent it; the fault injector picks one or none.

Edits (:mod:`tracefix.demo.edits`) are user turns the team's own protocol did not send. When
the model reads them (``reads_edits``, drawn per request by the server) it acts on their
content: values they state are adopted into the call or instruction (right or wrong), a slip
is avoided only when the edit carries what that slip needs, anything else is ignored. An edit
lives only in the request it was added to; it reaches later steps only through what the
agent does with it (an orchestrator relays what it says about a worker's action as a note
in its instruction). Two behaviours make a single fault cascade realistically instead of
being silently repaired:

* a worker that sees one of its own tool calls fail retries it once, identically, then
  reports failure; later, asked again, it copies its earlier failed call (in-context
  repetition), unless an edit in front of it carries what the call needs;
* the orchestrator, retrying a failed sub-task after a REVISED PLAN, re-sends its earlier
  instruction verbatim unless an edit in front of it carries what the instruction lacked;
  after two re-plans it gives up with a final answer saying so.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from . import edits as edit_reading
from .db import INITIAL_STATE
from .edits import NOTE_MARK, Need, Reading, split_note, worker_protocol
from .tasks import Subtask, Task, task_for_instruction
from .team import ORCHESTRATOR, WORKERS, classify_orchestrator_output, role_of
from .tools import MUTATING_TOOLS, WORKER_TOOLS, required_arguments

KINDS = ("wrong_argument", "missing_argument", "skipped_action", "wrong_instruction",
         "vague_instruction", "misread_tool_result", "early_final_answer")
MAX_REPLANS = 2


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
    # kind -> (faulty variant, what an edit must carry to prevent it)
    hosts: dict[str, tuple[Callable[[], Variant], Need]] = field(default_factory=dict)
    edit: Reading | None = None  # the edits this step read, when it read them


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


def decide(messages: list[dict], tools: list | None = None, reads_edits: bool = False) -> Decision:
    """The next message of the agent this conversation belongs to. With `reads_edits` the
    model acts on the edits in front of it; without, it passes over them."""
    role = role_of(messages)
    if role == ORCHESTRATOR:
        return _orchestrator(messages, reads_edits)
    if role in WORKERS:
        return _worker(role, messages, reads_edits)
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


def _is_protocol_turn(m: dict) -> bool:
    """A user turn the team sends the orchestrator itself: the task or a worker's report."""
    content = str(m.get("content") or "")
    return content.startswith("Task:") or content.startswith("REPORT")


def _action_words(action: str) -> str:
    """A regex of the ways an edit may talk about an action: its tool name or its verb."""
    return rf"\b{re.escape(action.replace('_', ' '))}\b|{_INTENT_PATTERNS.get(action, re.escape(action))}"


_INSTRUCTION_DETAILS = r"\b(accounts?|amounts?|identifiers?|ids?|check numbers?)\b"


def adopt_ids(text: str, edit: Reading | None) -> str:
    """An instruction with the account-like ids an edit states put in place: a stated source
    replaces the id after "from", a stated destination (or an id without direction) the last
    one, which is what the action acts on."""
    if edit is None:
        return text
    ids = re.findall(r"[A-Z]+-\d+", text)
    for stated in [s for s in edit.ids if not s.negated]:
        same = [i for i in ids if edit_reading.shape(i) == edit_reading.shape(stated.value)]
        if not same or stated.value in same:
            continue
        if stated.direction == "source":
            m = re.search(rf"from (?:account )?({'|'.join(map(re.escape, same))})", text)
            text = text.replace(m.group(1) if m else same[0], stated.value, 1)
        else:
            head, _, tail = text.rpartition(same[-1])
            text = head + stated.value + tail
        ids = re.findall(r"[A-Z]+-\d+", text)
    amounts = [a for a in edit.amounts if not a.negated]
    if amounts:
        text = re.sub(r"\$\s*[\d,]+(?:\.\d+)?", f"${float(amounts[0].value):.2f}", text, count=1)
    return text


def _orchestrator(messages: list[dict], reads_edits: bool) -> Decision:
    task = _task_of(messages)
    if task is None:
        return Decision(ORCHESTRATOR, "final", text_message(
            "FINAL ANSWER: I could not identify a banking task in this conversation."))
    facts = Facts()
    progress, replans, spoke = 0, 0, False
    sent: dict[int, str] = {}  # sub-task index -> the last instruction sent for it
    last = None
    pending_edits: list[str] = []  # edits since the orchestrator last spoke
    for m in messages:
        if m.get("role") == "system":
            continue
        if m.get("role") == "user" and not _is_protocol_turn(m):
            pending_edits.append(str(m.get("content") or ""))
            continue
        if m.get("role") == "assistant":
            spoke = True
            pending_edits = []
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
    edit = edit_reading.combine(pending_edits) if reads_edits else None

    if not spoke:
        return Decision(ORCHESTRATOR, "plan", text_message(f"PLAN:\n{_plan_lines(task.subtasks)}"), edit=edit)
    if last is not None and _is_report(last) and _failed(str(last["content"])):
        reason = str(last["content"]).split("FAILED.", 1)[-1].strip().split("\n")[0]
        if replans >= MAX_REPLANS:
            return Decision(ORCHESTRATOR, "final", text_message(
                f"FINAL ANSWER: I could not complete the request after {replans + 1} attempts: {reason}"), edit=edit)
        return Decision(ORCHESTRATOR, "replan", text_message(
            f"REVISED PLAN (attempt {replans + 2}): the last step failed ({reason}). Retry from there:\n"
            f"{_plan_lines(task.subtasks[progress:])}"), edit=edit)
    if progress >= len(task.subtasks):
        try:
            answer = facts.resolve(task.answer)
        except Unresolved as exc:
            answer = f"I could not complete the request: I never learned {exc}."
        return Decision(ORCHESTRATOR, "final", text_message(f"FINAL ANSWER: {answer}"), edit=edit)

    sub = task.subtasks[progress]
    about = _action_words(sub.action)
    try:
        fresh = f"{sub.worker}: {facts.resolve(sub.instruction)}"
    except Unresolved as exc:
        return Decision(ORCHESTRATOR, "final", text_message(
            f"FINAL ANSWER: I could not complete the request: I never learned {exc}."), edit=edit)
    fresh_ids = re.findall(r"[A-Z]+-\d+", fresh)
    instruction = fresh
    if progress in sent:
        # Retrying: the model repeats itself (see module docstring) unless an edit in front
        # of it carries what the earlier instruction lacked.
        earlier = split_note(sent[progress])[0]
        earlier_ids = re.findall(r"[A-Z]+-\d+", earlier)
        need = Need(values=tuple(i for i in fresh_ids if i not in earlier_ids), about=about + "|" + _INSTRUCTION_DETAILS,
                    sources=("reports", "instruction"), action_alone=not earlier_ids)
        if not need.met_by(edit):
            instruction = earlier
    instruction = adopt_ids(instruction, edit)
    if edit is not None and (edit.mentions_any(about) or edit.ids or edit.amounts
                             or any(edit.mentions_argument(a) for a in required_arguments(sub.action))):
        # what the edit says about the worker's action reaches the worker with the instruction
        instruction += NOTE_MARK + " ".join(edit.text.split())
    decision = Decision(ORCHESTRATOR, "instruct", text_message(instruction), edit=edit)
    head, note = split_note(instruction)
    ids = re.findall(r"ACC-\d{4}", head)
    if ids:
        wrong_id = other_account(ids[-1], set(ids))

        def wrong() -> Variant:
            # replace only the last mention: the destination/target of the action
            before, _, after = head.rpartition(ids[-1])
            return Variant(text_message(before + wrong_id + after + (NOTE_MARK + note if note else "")),
                           f"instructed {sub.worker} to use {wrong_id} instead of {ids[-1]} for {sub.action}")
        decision.hosts["wrong_instruction"] = (wrong, Need(
            values=(ids[-1],), decides=(ids[-1],), about=about + "|" + _INSTRUCTION_DETAILS,
            sources=("reports", "instruction"),
            target=(sub.worker, sub.action)))
    decision.hosts["vague_instruction"] = (lambda: Variant(
        text_message(f"{sub.worker}: please handle the next part of the customer's request as discussed."),
        f"instruction to {sub.worker} for {sub.action} named no action, account or amount"),
        Need(values=tuple(fresh_ids), about=about + "|" + _INSTRUCTION_DETAILS, action_alone=True,
             target=(sub.worker, sub.action)))
    if progress == 0:
        return decision  # an early answer comes after some work was done, not before any
    decision.hosts["early_final_answer"] = (lambda: Variant(
        text_message("FINAL ANSWER: All requested actions for the customer have been completed."),
        f"answered before sub-task {progress + 1} of {len(task.subtasks)} ({sub.action}) was done"),
        Need(about=about, action_alone=True, not_done=True, target=("final answer",)))
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


def _error_object(result: Any) -> str | None:
    """The bank's tools refuse with `{"error": ...}` and nothing else."""
    return result.get("error") if isinstance(result, dict) and set(result) == {"error"} else None


def tool_calls(messages: list[dict], refusal: Callable[[Any], str | None] = _error_object) -> list[Call]:
    """The tool calls of a conversation with their parsed results; `refusal` says which results
    are a tool saying no (each demo app's tools refuse their own way)."""
    results = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
    calls = []
    for m in messages:
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function", {})
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                args = {}
            if not isinstance(args, dict):  # '[1]', '"x"': a call's arguments are an object or nothing
                args = {}
            raw = results.get(tc.get("id"))
            try:
                result = json.loads(raw) if raw is not None else None
            except ValueError:
                result = raw
            error = refusal(result)
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


def _misread(calls: list[Call]) -> tuple[list[Call], str, str, tuple] | None:
    """A copy of `calls` with one read result misread: (calls, tool, detail, the true values it hides)."""
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
            hidden = ()
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


def _instruction_index(messages: list[dict]) -> int | None:
    is_instruction = worker_protocol(messages)
    return max((i for i, m in enumerate(messages) if m.get("role") == "user" and is_instruction(i, m)), default=None)


def adopt_arguments(tool: str, args: dict, edit: Reading | None) -> dict:
    """The call's arguments with the values an edit states put in place (right or wrong): an
    id goes to the argument holding an id of its shape (by direction when there are two),
    an amount to `amount`."""
    if edit is None:
        return args
    args = dict(args)
    for stated in [s for s in edit.ids if not s.negated]:
        slots = [k for k, v in args.items() if isinstance(v, str) and edit_reading.shape(v) == edit_reading.shape(stated.value)]
        if not slots or any(args[k] == stated.value for k in slots):
            continue
        if len(slots) > 1:
            wanted = "from" if stated.direction == "source" else "to"
            slots = [k for k in slots if k.startswith(wanted)] or slots[-1:]
        args[slots[0]] = stated.value
    for argument in required_arguments(tool):
        if args.get(argument) is None:  # a stated value for an argument the call lacks
            found = [s for s in edit.ids if not s.negated and edit.mentions_argument(argument)]
            if found:
                args[argument] = found[0].value
    amounts = [a for a in edit.amounts if not a.negated]
    if "amount" in required_arguments(tool) and amounts:
        args["amount"] = float(amounts[0].value)
    return args


def _repair_need(tool: str, repeated: dict, correct: dict) -> Need:
    """What an edit must carry to make the agent drop a repeated failed call for the right one."""
    differing = tuple(k for k in set(repeated) | set(correct) if repeated.get(k) != correct.get(k))
    return Need(values=tuple(correct[k] for k in differing if correct.get(k) is not None),
                arguments=tuple(k for k in differing if repeated.get(k) is None),
                related=differing, about=_action_words(tool), sources=("instruction", "results"),
                target=(tool,))


def _worker(agent: str, messages: list[dict], reads_edits: bool) -> Decision:
    own = WORKER_TOOLS[agent]
    start = _instruction_index(messages)
    if start is None:
        return Decision(agent, "report", text_message(f"REPORT from {agent}: FAILED. I received no instruction."))
    instruction, note = split_note(str(messages[start].get("content") or ""))
    added = [str(m.get("content") or "") for m in messages[start + 1:] if m.get("role") == "user"]
    edit = edit_reading.combine([note, *added]) if reads_edits else None
    before = tool_calls(messages[:start])
    segment = tool_calls([m for m in messages[start + 1:] if m.get("role") != "user"])
    intents, reason = parse_instruction(instruction, own)
    if reason and edit is not None:
        # an instruction it cannot act on, and an edit saying what to do: act on the edit
        intents, _ = parse_instruction(instruction + " " + edit.text, own)
    if not intents:
        return Decision(agent, "report", text_message(
            f"REPORT from {agent}: FAILED. I could not act on this instruction: {reason}."), edit=edit)
    correct = {i.tool: dict(i.args) for i in intents}

    if segment and segment[-1].error:
        last = segment[-1]
        if sum(1 for c in segment if c.name == last.name and c.error) >= 2:
            return Decision(agent, "report", text_message(
                f"REPORT from {agent}: FAILED. {last.name} failed twice: {last.error}"), edit=edit)
        right = _fill(correct.get(last.name), {c.name: c.result for c in segment if not c.error})
        if right is None or not _repair_need(last.name, last.args, right).met_by(edit):
            # retry as is, with whatever values the edit states
            return _tool_decision(agent, messages, last.name, adopt_arguments(last.name, dict(last.args), edit), edit)

    done = {c.name: c.result for c in segment if not c.error}
    for intent in intents:
        if intent.tool in done:
            continue
        args = _fill(dict(intent.args), done)
        if args is None:
            return Decision(agent, "report", text_message(
                f"REPORT from {agent}: FAILED. lookup_customer returned no customer id, so I cannot "
                "call get_accounts."), edit=edit)
        # In-context repetition: an earlier failed call to this tool, never since succeeded.
        history = [c for c in before + segment if c.name == intent.tool]
        if history and history[-1].error and not _repair_need(intent.tool, history[-1].args, args).met_by(edit):
            args = dict(history[-1].args)
        return _tool_decision(agent, messages, intent.tool, adopt_arguments(intent.tool, args, edit), edit)

    decision = Decision(agent, "report", text_message(_report(agent, segment)), edit=edit)
    misread = _misread(segment)
    if misread:
        wrong_calls, tool, detail, true_values = misread
        decision.hosts["misread_tool_result"] = (
            lambda: Variant(text_message(_report(agent, wrong_calls)), detail),
            Need(values=true_values, about=_action_words(tool), sources=("results",), pointer_alone=True,
                 target=(tool,)))
    return decision


def _fill(args: dict | None, done: dict) -> dict | None:
    """Arguments with what earlier results supply (get_accounts' customer id from the lookup)."""
    if args is None:
        return None
    if args.get("customer_id", "") is None:
        found = done.get("lookup_customer")
        args["customer_id"] = found.get("customer_id") if isinstance(found, dict) else None
        if not isinstance(args["customer_id"], str):
            return None
    return args


def _tool_decision(agent: str, messages: list[dict], tool: str, args: dict, edit: Reading | None = None) -> Decision:
    call_id = _call_id(messages, tool)
    decision = Decision(agent, "tool", tool_call_message(tool, args, call_id), tool=tool, edit=edit)
    about = _action_words(tool)
    present = [a for a in required_arguments(tool) if args.get(a) is not None]
    if present:
        dropped = present[-1]

        def missing() -> Variant:
            return Variant(tool_call_message(tool, {k: v for k, v in args.items() if k != dropped}, call_id),
                           f"{tool} called without '{dropped}'")
        decision.hosts["missing_argument"] = (missing, Need(
            values=(args[dropped],), decides=(args[dropped],), arguments=(dropped,), about=about,
            sources=("instruction",), target=(tool,)))
    if tool in MUTATING_TOOLS:
        key = {"transfer": "to_account", "deposit_check": "account_id", "close_account": "account_id"}[tool]
        if isinstance(args.get(key), str):
            avoid = {v for v in args.values() if isinstance(v, str)}
            wrong_value = other_account(args[key], avoid)

            def wrong() -> Variant:
                return Variant(tool_call_message(tool, {**args, key: wrong_value}, call_id),
                               f"{tool} called with {key}={wrong_value} instead of {args[key]}")
            decision.hosts["wrong_argument"] = (wrong, Need(
                values=(args[key],), decides=(args[key],), related=(key,), about=about, sources=("instruction",),
                target=(tool,)))
        done = [c for c in tool_calls(messages[_instruction_index(messages) or 0:]) if not c.error]

        def skipped() -> Variant:
            claim = f"- {tool}: done"
            return Variant(text_message(_report(agent, done, [claim])), f"reported {tool} as done without calling it")
        decision.hosts["skipped_action"] = (skipped, Need(about=about, action_alone=True, not_done=True,
                                                           target=(tool,)))
    return decision
