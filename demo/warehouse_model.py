"""The scripted `warehouse-crew` model: reads a conversation of the warehouse crew and
returns the next assistant message, as a competent LLM would, with the faulty variants
each step could host (the same kinds as the bank's model, adapted to this crew).

Everything is derived from the messages (the role from the system prompt, the ticket from
the Dispatcher's first user turn, facts from the crew's replies), so a replay that feeds
back a recorded prefix gets the same continuation. Two habits make one slip cascade the way
it does with real agents: a crew member who sees a tool refuse says it is stuck, and, given
the same job again, repeats its earlier refused call; the Dispatcher, taking a second run
at a stuck job, re-sends its earlier note verbatim, then gives up.

Edits (user turns the crew's protocol did not send, read with ``reads_edits``) prevent a
slip when they carry what it needs (:class:`~tracefix.demo.edits.Need`) and break the two
habits above when they talk about the job's action. Unlike the bank's model, this one does
not adopt values stated in an edit and the Dispatcher relays nothing to the crew: an edit
works only at the step it was added to.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from . import edits as edit_reading
from .edits import Need, worker_protocol
from .faults import StepInfo
from .policy import Call, Decision, Variant, text_message, tool_calls, tool_call_message
from .warehouse_tasks import Job, get_ticket, ticket_for_text
from .warehouse_team import (CREW, DISPATCHER, REPLY_MARK, TICKET_MARK, Crew, classify_dispatcher_output,
                             role_of)
from .warehouse_world import (CREW_TOOLS, INITIAL_STATE, MUTATING_TOOLS, WarehouseTools, WarehouseWorld,
                              required_arguments)

MODEL = "warehouse-crew"
KINDS = ("wrong_argument", "missing_argument", "skipped_action", "wrong_instruction", "vague_instruction",
         "misread_tool_result", "early_final_answer")
MAX_RETAKES = 1
UNKNOWN = "(unknown)"

_ID = re.compile(r"ord_[0-9a-f]{5}|sku:\d{2}-[a-z]|#\d{4}")
_INTENTS = {
    "order_details": r"order_details|pull up|what is on (?:it|the order)",
    "stock_level": r"stock_level|on the shelf|how many",
    "reserve": r"\breserve\b|put aside|set aside",
    "book_pickup": r"book_pickup|\bpickup\b",
    "parcel_status": r"parcel_status|where is parcel|\btrack\b",
    "payment_info": r"payment_info|what was paid",
    "refund": r"\brefund\b|pay back",
}


def about(tool: str) -> str:
    """How an edit may talk about a tool's action: its name, spelled or spoken, or its verb."""
    return rf"\b{re.escape(tool.replace('_', ' '))}\b|{_INTENTS[tool]}"


def _kind_of(value: str) -> str:
    return "sku" if value.startswith("sku:") else "parcel" if value.startswith("#") else "order"


def other_id(value: str, avoid: set[str]) -> str:
    """A plausible wrong id: the next known id of the same kind."""
    pools = {"order": sorted(INITIAL_STATE["orders"]), "sku": sorted(INITIAL_STATE["stock"]),
             "parcel": sorted(INITIAL_STATE["parcels"])}
    pool = pools[_kind_of(value)]
    start = pool.index(value) if value in pool else -1
    for offset in range(1, len(pool) + 1):
        candidate = pool[(start + offset) % len(pool)]
        if candidate != value and candidate not in avoid:
            return candidate
    return value


def _call_id(messages: list[dict], name: str) -> str:
    digest = hashlib.sha256(json.dumps([len(messages), name, messages[-1].get("content")], default=str).encode())
    return f"call_{digest.hexdigest()[:12]}"


def decide(messages: list[dict], tools: list | None = None, reads_edits: bool = False) -> Decision:
    role = role_of(messages)
    if role == DISPATCHER:
        return _dispatcher(messages, reads_edits)
    if role in CREW:
        return _crew(role, messages, reads_edits)
    return Decision(role, "chat", text_message(
        "warehouse-crew (scripted demo model): I play tracefix's warehouse crew; give me a system prompt "
        "with 'Your role: Dispatcher.' or a crew member's name."))


# --- facts the Dispatcher learns from the crew's replies ----------------------------------------

_FACT_PATTERNS: list[tuple[re.Pattern, Any]] = [
    (re.compile(r"(ord_[0-9a-f]{5}) is .+?'s, \w+, paid ([\d.]+)\."), lambda m: {f"paid:{m[1]}": m[2]}),
    (re.compile(r"Line (\d) of (ord_[0-9a-f]{5}): (\d+) x (sku:\d{2}-[a-z]) \(.+?, ([\d.]+) each\)"),
     lambda m: {f"qty{m[1]}:{m[2]}": m[3], f"sku{m[1]}:{m[2]}": m[4], f"price{m[1]}:{m[2]}": m[5]}),
    (re.compile(r"(sku:\d{2}-[a-z]) \(.+?\): (\d+) on the shelf"), lambda m: {f"onhand:{m[1]}": m[2]}),
    (re.compile(r"Put aside \d+ x (sku:\d{2}-[a-z]) for ord_[0-9a-f]{5}; (\d+) left"), lambda m: {f"left:{m[1]}": m[2]}),
    (re.compile(r"(ord_[0-9a-f]{5}) leaves as parcel (#\d{4}) \(\w+, about (\d+) day"),
     lambda m: {f"parcel:{m[1]}": m[2], f"eta:{m[1]}": m[3]}),
    (re.compile(r"Parcel (#\d{4}): (.+?), (\w+), \d+ attempt"), lambda m: {f"state:{m[1]}": m[2], f"depot:{m[1]}": m[3]}),
    (re.compile(r"(ord_[0-9a-f]{5}) paid ([\d.]+), refunded so far"), lambda m: {f"paid:{m[1]}": m[2]}),
    (re.compile(r"refund (rf_\d+) issued: [\d.]+ back to the card used for (ord_[0-9a-f]{5})"),
     lambda m: {f"refund:{m[2]}": m[1]}),
]


def learn(report: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for pattern, facts in _FACT_PATTERNS:
        for m in pattern.finditer(report):
            found.update(facts(m))
    return found


def believe(facts: dict[str, str], job: Job, learned: dict[str, str]) -> None:
    """File a look-up's reported values under the id the job asked about."""
    if job.reads is None:
        return
    kinds, target = job.reads
    for kind in kinds:
        for key, value in learned.items():
            if key.split(":", 1)[0] == kind:
                facts[f"{kind}:{target}"] = value
                break


def resolve(template: str, facts: dict[str, str]) -> str:
    return re.sub(r"<([a-z]+\d?:[^<>]+)>", lambda m: facts.get(m.group(1), UNKNOWN), template)


# --- Dispatcher -----------------------------------------------------------------------------------

def _stuck(report: str) -> str | None:
    m = re.match(r"\w+ here\. Stuck: (.*)", report, re.S)
    return m.group(1).strip().rstrip(".") if m else None


def _is_reply(m: dict) -> bool:
    return m.get("role") == "user" and re.match(r"(\w+) here\.", str(m.get("content") or "")) is not None


def _checklist(jobs: tuple[Job, ...]) -> str:
    return "\n".join([f"- {j.line}" for j in jobs] + ["- reply to the customer"])


def _dispatcher(messages: list[dict], reads_edits: bool) -> Decision:
    first = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    ticket = ticket_for_text(first[len(TICKET_MARK):]) if first.startswith(TICKET_MARK) else None
    if ticket is None:
        return Decision(DISPATCHER, "final", text_message(f"{REPLY_MARK} Sorry, I cannot tell what this ticket asks."))
    facts: dict[str, str] = {}
    progress, retakes, spoke, last = 0, 0, False, None
    sent: dict[int, str] = {}
    pending: list[str] = []
    for m in messages:
        if m.get("role") == "system":
            continue
        if m.get("role") == "user" and not _is_reply(m) and not str(m.get("content") or "").startswith(TICKET_MARK):
            pending.append(str(m.get("content") or ""))  # an edit: neither the ticket nor a crew reply
            continue
        if m.get("role") == "assistant":
            spoke, pending = True, []
            kind, _, text = classify_dispatcher_output(m.get("content") or "")
            if kind == "plan" and re.search(r"\btake \d", text):
                retakes += 1
            elif kind == "job":
                sent[progress] = m.get("content") or ""
        elif _is_reply(m) and _stuck(str(m["content"])) is None:
            learned = learn(str(m["content"]))
            facts.update(learned)
            if progress < len(ticket.jobs):
                believe(facts, ticket.jobs[progress], learned)
            progress += 1
        last = m
    edit = edit_reading.combine(pending) if reads_edits else None

    if not spoke:
        return Decision(DISPATCHER, "plan", text_message(f"Checklist:\n{_checklist(ticket.jobs)}"), edit=edit)
    reason = _stuck(str(last.get("content") or "")) if last is not None and _is_reply(last) else None
    if reason is not None:
        if retakes >= MAX_RETAKES:
            return Decision(DISPATCHER, "final", text_message(
                f"{REPLY_MARK} Sorry, this ticket is blocked on our side ({reason}). A colleague will follow up."),
                edit=edit)
        return Decision(DISPATCHER, "replan", text_message(
            f"Checklist, take {retakes + 2} (last job stuck: {reason}):\n{_checklist(ticket.jobs[progress:])}"),
            edit=edit)
    if progress >= len(ticket.jobs):
        return Decision(DISPATCHER, "final", text_message(f"{REPLY_MARK} {resolve(ticket.reply, facts)}"), edit=edit)

    job = ticket.jobs[progress]
    note = resolve(job.note, facts)
    if progress in sent and not (edit is not None and edit.mentions_any(about(job.tool))):
        note = sent[progress]  # a second run at a stuck job: the same note again
    decision = Decision(DISPATCHER, "instruct", text_message(note), edit=edit)
    ids = _ID.findall(note)
    if ids:
        wrong = other_id(ids[-1], set(ids))
        head, _, tail = note.rpartition(ids[-1])
        decision.hosts["wrong_instruction"] = (
            lambda: Variant(text_message(head + wrong + tail),
                            f"told {job.crew} to use {wrong} instead of {ids[-1]} for {job.tool}"),
            Need(values=(ids[-1],), about=about(job.tool), sources=("reports", "instruction"),
                 target=(job.crew, job.tool)))
    decision.hosts["vague_instruction"] = (
        lambda: Variant(text_message(f"@{job.crew} can you take care of the next bit of this ticket?"),
                        f"note to {job.crew} for {job.tool} named no action, ref or quantity"),
        Need(values=tuple(ids), about=about(job.tool), action_alone=True, target=(job.crew, job.tool)))
    if progress > 0:
        decision.hosts["early_final_answer"] = (
            lambda: Variant(text_message(f"{REPLY_MARK} All sorted on our side, nothing more to do."),
                            f"replied before job {progress + 1} of {len(ticket.jobs)} ({job.tool}) was done"),
            Need(about=about(job.tool), action_alone=True, not_done=True, target=("final answer",)))
    return decision


# --- crew members ------------------------------------------------------------------------------

def _refusal(result: Any) -> str | None:
    """Why a tool said no, in whichever of its three ways it says it; None when it did not."""
    if isinstance(result, dict) and result.get("ok") is False:
        return str(result.get("reason") or "refused")
    if isinstance(result, str):
        if result.lower().startswith("unable to"):
            return result
        if re.match(r"[A-Za-z_.]*(Error|Exception)\b", result):
            return result
    return None


def _calls(messages: list[dict]) -> list[Call]:
    return tool_calls(messages, refusal=_refusal)


def _sentences(c: Call) -> list[str]:
    """What a crew member says about one successful call (raises on a result of another shape)."""
    r = c.result
    if c.name == "order_details":
        return [f"{r['order_ref']} is {r['customer']}'s, {r['status']}, paid {r['paid']}."] + [
            f"Line {i} of {r['order_ref']}: {line['qty']} x {line['sku']} ({line['item']}, {line['unit_price']} each)."
            for i, line in enumerate(r["lines"], 1)]
    if c.name == "stock_level":
        return [f"{r['sku']} ({r['item']}): {r['on_hand']} on the shelf, bin {r['bin']}."]
    if c.name == "reserve":
        return [f"Put aside {r['qty']} x {r['sku']} for {r['order_ref']}; {r['left']} left."]
    if c.name == "book_pickup":
        return [f"Pickup booked: {r['order_ref']} leaves as parcel {r['parcel']} ({r['service']}, about "
                f"{r['eta_days']} day(s))."]
    if c.name == "parcel_status":
        return [f"Parcel {r['parcel']}: {r['state']}, {r['depot']}, {r['attempts']} attempt(s) so far."]
    if c.name in ("payment_info", "refund") and isinstance(r, str):
        return [f"The till says: {r}."]
    raise TypeError("a result of another shape")


def _reply(agent: str, calls: list[Call]) -> str:
    said = []
    for c in calls:
        if c.error:
            continue
        try:
            said += _sentences(c)
        except (KeyError, TypeError, IndexError, AttributeError):
            said.append(f"{c.name} gave {json.dumps(c.result, sort_keys=True)}.")
    return " ".join([f"{agent} here.", *said])


def _misread(c: Call) -> tuple[Call, str, tuple] | None:
    """The call as misread: (call with a wrong result, detail, the true values it hides)."""
    r = c.result
    try:
        _sentences(c)
    except (KeyError, TypeError, IndexError, AttributeError):
        return None
    if c.name == "order_details":
        wrong = json.loads(json.dumps(r))
        lines = wrong["lines"]
        if len(lines) >= 2:
            # the items slide one line up, the quantities stay: each item gets another's count
            items = [{k: line[k] for k in ("sku", "item", "unit_price")} for line in lines]
            for line, item in zip(lines, items[1:] + items[:1]):
                line.update(item)
            return (Call(c.name, c.args, wrong, None),
                    f"read the lines of {r['order_ref']} with their items rotated: "
                    + ", ".join(f"{line['qty']} x {line['sku']}" for line in lines),
                    tuple(line["sku"] for line in r["lines"]))
        lines[0]["qty"] += 1
        return (Call(c.name, c.args, wrong, None),
                f"read line 1 of {r['order_ref']} as {lines[0]['qty']} x {lines[0]['sku']} instead of "
                f"{r['lines'][0]['qty']}", (str(r["lines"][0]["qty"]),))
    if c.name == "stock_level":
        wrong = {**r, "on_hand": r["on_hand"] + 10}
        return Call(c.name, c.args, wrong, None), f"read {r['sku']} as {wrong['on_hand']} on hand instead of " \
                                                   f"{r['on_hand']}", (str(r["on_hand"]),)
    if c.name == "parcel_status":
        state = "delivered" if r["state"] != "delivered" else "held at depot"
        return (Call(c.name, c.args, {**r, "state": state}, None),
                f"read parcel {r['parcel']} as {state!r} instead of {r['state']!r}", (r["state"],))
    if c.name == "payment_info":
        paid = re.search(r"paid ([\d.]+)", r)
        if paid:
            true = paid.group(1)
            wrong_sum = f"{float(true) - 10 if float(true) > 10 else float(true) + 10:.2f}"
            return (Call(c.name, c.args, r.replace(f"paid {true}", f"paid {wrong_sum}", 1), None),
                    f"read the payment on {c.args.get('order_ref')} as {wrong_sum} instead of {true}", (true,))
    return None


@dataclass
class Intent:
    tool: str
    args: dict


def parse_note(text: str, own: list[str]) -> tuple[Intent | None, str | None]:
    """The one call a note asks for, with the arguments it states; or (None, why not)."""
    found = sorted((m.start(), tool) for tool in own for m in [re.search(_INTENTS[tool], text, re.I)] if m)
    if not found:
        return None, "the note does not say which job to do"
    tool = found[0][1]
    order = re.search(r"ord_[0-9a-f]{5}", text)
    sku = re.search(r"sku:\d{2}-[a-z]", text)
    qty = re.search(r"\b(\d+) x ", text)
    parcel = re.search(r"#\d{4}", text)
    service = re.search(r"\b(standard|express)\b", text)
    amount = re.search(r"\b(\d+\.\d{2})\b", text)
    value = {"order_ref": order and order.group(0), "sku": sku and sku.group(0),
             "qty": qty and int(qty.group(1)), "parcel": parcel and parcel.group(0),
             "service": service and service.group(1), "amount": amount and float(amount.group(1))}
    args = {name: value[name] for name in required_arguments(tool)}
    lacking = [name for name, v in args.items() if v is None]
    if lacking:
        return None, f"the note gives no {lacking[0].replace('_', ' ')} for {tool}"
    return Intent(tool, args), None


def _crew(agent: str, messages: list[dict], reads_edits: bool) -> Decision:
    is_note = worker_protocol(messages)
    start = max((i for i, m in enumerate(messages) if m.get("role") == "user" and is_note(i, m)), default=None)
    if start is None:
        return Decision(agent, "report", text_message(f"{agent} here. Stuck: nobody sent me a job."))
    note = str(messages[start].get("content") or "")
    added = [str(m.get("content") or "") for m in messages[start + 1:] if m.get("role") == "user"]
    edit = edit_reading.combine(added) if reads_edits else None
    intent, why = parse_note(note, CREW_TOOLS[agent])
    if intent is None and edit is not None:
        intent, _ = parse_note(note + " " + edit.text, CREW_TOOLS[agent])
    if intent is None:
        return Decision(agent, "report", text_message(f"{agent} here. Stuck: {why}."), edit=edit)
    segment = _calls([m for m in messages[start + 1:] if m.get("role") != "user"])
    if segment:
        done = segment[-1]
        if done.error:
            return Decision(agent, "report", text_message(f"{agent} here. Stuck: {done.error}"), edit=edit)
        decision = Decision(agent, "report", text_message(_reply(agent, segment)), edit=edit)
        misread = _misread(done)
        if misread:
            wrong, detail, hidden = misread
            decision.hosts["misread_tool_result"] = (
                lambda: Variant(text_message(_reply(agent, segment[:-1] + [wrong])), detail),
                Need(values=hidden, about=about(done.name), sources=("results",), pointer_alone=True,
                     target=(done.name,)))
        return decision
    args = dict(intent.args)
    earlier = [c for c in _calls(messages[:start]) if c.name == intent.tool]
    if earlier and earlier[-1].error and not (edit is not None and edit.mentions_any(about(intent.tool))):
        args = dict(earlier[-1].args)  # the same job again: the same call again
    return _tool_decision(agent, messages, intent.tool, args, edit)


_WRONG_SLOT = {"reserve": "sku", "book_pickup": "order_ref", "refund": "order_ref"}


def _tool_decision(agent: str, messages: list[dict], tool: str, args: dict, edit) -> Decision:
    call_id = _call_id(messages, tool)
    decision = Decision(agent, "tool", tool_call_message(tool, args, call_id), tool=tool, edit=edit)
    present = [a for a in required_arguments(tool) if args.get(a) is not None]
    if present:
        dropped = present[-1]
        decision.hosts["missing_argument"] = (
            lambda: Variant(tool_call_message(tool, {k: v for k, v in args.items() if k != dropped}, call_id),
                            f"{tool} called without '{dropped}'"),
            Need(values=(args[dropped],), arguments=(dropped,), about=about(tool), sources=("instruction",),
                 target=(tool,)))
    if tool in MUTATING_TOOLS:
        slot = _WRONG_SLOT[tool]
        if isinstance(args.get(slot), str):
            wrong = other_id(args[slot], {v for v in args.values() if isinstance(v, str)})
            decision.hosts["wrong_argument"] = (
                lambda: Variant(tool_call_message(tool, {**args, slot: wrong}, call_id),
                                f"{tool} called with {slot}={wrong} instead of {args[slot]}"),
                Need(values=(args[slot],), related=(slot,), about=about(tool), sources=("instruction",),
                     target=(tool,)))
        claim = {"reserve": f"Put aside {args.get('qty')} x {args.get('sku')} for {args.get('order_ref')}.",
                 "book_pickup": f"Pickup for {args.get('order_ref')} is booked.",
                 "refund": f"The refund on {args.get('order_ref')} is done."}[tool]
        decision.hosts["skipped_action"] = (
            lambda: Variant(text_message(f"{agent} here. {claim}"), f"said {tool} was done without calling it"),
            Need(about=about(tool), action_alone=True, not_done=True, target=(tool,)))
    return decision


# --- the fault-free run, for the fault injector -------------------------------------------------

@functools.lru_cache(maxsize=None)
def fault_free_steps(ticket_id: str) -> tuple[StepInfo, ...]:
    """Every LLM step of the ticket's fault-free run: agent, phase, the faults it can host."""
    steps: list[StepInfo] = []

    def llm(agent: str, messages: list, tools: list | None) -> dict:
        decision = decide(messages, tools)
        steps.append(StepInfo(len(steps), decision.agent, decision.phase,
                              {k: tuple(need.target) for k, (_, need) in decision.hosts.items()}))
        return decision.message

    Crew(llm, WarehouseTools(WarehouseWorld()).call).run(get_ticket(ticket_id).text)
    return tuple(steps)
