"""Edits to try on a recorded fault, in five classes, written from the fault's ground truth
and the session alone. This module is the test side's: the scripted model's reader
(tracefix.demo.edit_reader and the domains' vocabularies) never imports it, and it imports
nothing of theirs, so the two share no word list by accident. Its phrasings are written the
way a person would write a fix, with synonyms, passive voice, other orders, with and without
the tool's name, and values written differently ($1,000 / 1000 dollars / 1000.00).

Classes:
- correct: the fix, plainly (the tool, the argument, the value);
- paraphrased: the same fix reworded (at least three per fault kind);
- misleading: a wrong fix (negation, another tool, "already done", wrong values, wrong agent);
- irrelevant: says nothing about the task;
- wrong_step: the correct edit at a step that is not the fault's.
"""
from __future__ import annotations

import re

CLASSES = ("correct", "paraphrased", "misleading", "irrelevant", "wrong_step")

# How a person names each tool's action without its name (the test's own words).
SPOKEN = {
    "transfer": ("the transfer", "move the money", "moving the money"),
    "deposit_check": ("the check deposit", "deposit the check", "depositing the check"),
    "close_account": ("closing the account", "close the account", "closing the account"),
    "lookup_customer": ("the customer lookup", "look up the customer", "looking up the customer"),
    "get_accounts": ("the list of accounts", "list the accounts", "listing the accounts"),
    "get_balance": ("the balance", "check the balance", "checking the balance"),
    "get_transactions": ("the transaction history", "pull the transactions", "pulling the transactions"),
    "order_details": ("the order's lines", "pull up the order", "pulling up the order"),
    "stock_level": ("the stock count", "check the stock", "checking the stock"),
    "reserve": ("the reservation", "put the items aside", "putting the items aside"),
    "book_pickup": ("the pickup booking", "book the pickup", "booking the pickup"),
    "parcel_status": ("the parcel's status", "track the parcel", "tracking the parcel"),
    "payment_info": ("the payment record", "look up the payment", "looking up the payment"),
    "refund": ("the refund", "pay the money back", "paying the money back"),
}
ARGUMENT_SPOKEN = {"to_account": "destination account", "from_account": "source account", "account_id": "account",
                   "check_number": "check number", "customer_id": "customer id", "name": "customer's name",
                   "amount": "amount", "order_ref": "order reference", "sku": "item", "parcel": "tracking number",
                   "service": "service level", "qty": "quantity"}
# Values of each shape that exist nowhere in the testbed: adopting one fails the task.
WRONG_VALUES = {"ACC": "ACC-1099", "CUST": "CUST-099", "CHK": "CHK-5999", "ord": "ord_fffff", "sku": "sku:99-z",
                "#": "#9999"}
OTHER_AGENT = {"PaymentsAgent": "AccountAgent", "AccountAgent": "PaymentsAgent", "Stocker": "Cashier",
               "Courier": "Stocker", "Cashier": "Courier", "Orchestrator": "AccountAgent", "Dispatcher": "Courier"}
OTHER_TOOL = {"transfer": "get_transactions", "deposit_check": "get_transactions", "get_transactions": "transfer",
              "close_account": "get_balance", "lookup_customer": "get_balance", "get_accounts": "get_balance",
              "get_balance": "close_account", "order_details": "stock_level", "stock_level": "order_details",
              "reserve": "stock_level", "book_pickup": "parcel_status", "parcel_status": "book_pickup",
              "payment_info": "refund", "refund": "payment_info"}
IRRELEVANT = ("Please keep your answers short and friendly.", "Remember that the customer prefers email.",
              "Thanks, this is going well so far.")
_VALUE = re.compile(r"ACC-\d+|CUST-\d+|CHK-\d+|ord_[0-9a-f]{5}|sku:\d{2}-[a-z]|#\d{4}")


def _wrong_value_like(value: str | None) -> str:
    for prefix, wrong in WRONG_VALUES.items():
        if value and value.startswith(prefix):
            return wrong
    return "ACC-1099"


def _fault_facts(fault: dict, doc: dict) -> dict:
    """What the ground truth says: the tool, the argument, the right and the wrong value, the agent."""
    detail, target = fault.get("detail") or "", list(fault.get("target") or [])
    facts = {"kind": fault["kind"], "agent": fault.get("agent") or "", "tool": None, "arg": None, "right": None,
             "wrong": None, "worker": None}
    m = re.match(r"(\w+) called with (\w+)=(\S+) instead of (\S+)", detail)
    if m:
        facts.update(tool=m.group(1), arg=m.group(2), wrong=m.group(3), right=m.group(4))
    m = re.match(r"(\w+) called without '(\w+)'", detail)
    if m:
        facts.update(tool=m.group(1), arg=m.group(2))
        facts["right"] = _value_from_instruction(doc, fault["step"], m.group(2))
    m = re.search(r"(?:instructed|told) (\w+) to use (\S+) instead of (\S+) for (\w+)", detail)
    if m:
        facts.update(worker=m.group(1), wrong=m.group(2), right=m.group(3), tool=m.group(4))
    m = re.search(r"(?:instruction|note) to (\w+) for (\w+)", detail)
    if m:
        facts.update(worker=m.group(1), tool=m.group(2))
    m = re.search(r"\((\w+)\) was done", detail)
    if m:
        facts["tool"] = m.group(1)
    m = re.search(r"(?:reported|said) (\w+) (?:as|was) done without", detail)
    if m:
        facts["tool"] = m.group(1)
    if fault["kind"] == "misread_tool_result":
        facts["tool"] = target[0] if target else None
        m = re.search(r"instead of '?([^' ]+)'?$", detail)
        facts["right"] = m.group(1) if m else None
    if facts["tool"] is None and target and target[-1] in SPOKEN:
        facts["tool"] = target[-1]
    return facts


def _value_from_instruction(doc: dict, step: int, argument: str) -> str | None:
    """The value the agent's instruction gives for a dropped argument, when it has that shape."""
    shapes = {"check_number": r"CHK-\d+", "customer_id": r"CUST-\d+", "account_id": r"ACC-\d+",
              "to_account": r"ACC-\d+", "from_account": r"ACC-\d+", "order_ref": r"ord_[0-9a-f]{5}",
              "sku": r"sku:\d{2}-[a-z]", "parcel": r"#\d{4}", "service": r"\b(?:express|standard)\b"}
    if argument not in shapes:
        return None
    at = next((s for s in doc.get("steps") or [] if s["index"] == step), None) or {}
    texts = [str(m.get("content") or "") for m in at.get("input_messages") or [] if m.get("role") == "user"]
    found = re.findall(shapes[argument], " ".join(texts))
    return found[-1] if found else None


def _correct(f: dict) -> tuple[str, list[str]]:
    tool, arg, right, wrong = f["tool"] or "it", f["arg"], f["right"], f["wrong"]
    noun, verb, gerund = SPOKEN.get(tool, (tool, tool, tool))
    said = ARGUMENT_SPOKEN.get(arg or "", (arg or "").replace("_", " "))
    kind = f["kind"]
    if kind == "wrong_argument":
        return (f"Call {tool} with {arg} = {right}.", [
            f"The {said} should be {right}, not {wrong}.",
            f"{wrong} is wrong here; use {right} instead.",
            f"Redo {noun}, but this time with {right} as the {said}.",
            f"Take the {said} from your instructions rather than using {wrong}."])
    if kind == "missing_argument":
        plain = f"Call {tool} with {arg} = {right}." if right else f"Call {tool} again and pass {arg} this time."
        return (plain, [
            f"You left out the {said}; include it, as your instruction gives it.",
            f"The {said} is required: take it from what you were told and put it in the call.",
            f"Don't forget the {said} this time.",
            f"Add the {said} that your instruction names, then {verb}."])
    if kind == "skipped_action":
        return (f"Call {tool} now; it has not been done yet.", [
            f"{noun[0].upper() + noun[1:]} never happened: carry it out before you report.",
            f"You haven't actually done {noun} yet. Do it now, then report.",
            f"Go ahead and {verb}; only report once it has succeeded.",
            f"It isn't done until {tool} is called, so call it."])
    if kind == "early_final_answer":
        return (f"Do not give the final answer yet: {tool} has not been carried out.", [
            f"The work isn't finished: {noun} is still pending, so keep going.",
            f"Hold off on answering the customer until {noun} is done.",
            f"You answered too early; {gerund} is still left to do.",
            "Not so fast: a step of the plan remains, carry it out before replying."])
    if kind == "wrong_instruction":
        return (f"Tell {f['worker']} to use {right}, not {wrong}.", [
            f"{wrong} is the wrong one; the right one is {right}.",
            f"Check the ids against what the workers reported: {right} is the one to use.",
            f"Your instruction should name {right} instead of {wrong}.",
            f"Use the value from the reports ({right}) rather than {wrong}."])
    if kind == "vague_instruction":
        return (f"Tell {f['worker']} exactly what to do: {tool}, with the ids and amounts from the task.", [
            f"Your instruction was too vague: ask for {noun} and give the values the workers reported.",
            f"Be specific: the worker has to {verb}, using the figures from the request.",
            f"Say which action ({noun}) and pass on the ids named in the task.",
            f"Name the action and the values, as the request gives them: {verb}."])
    if kind == "misread_tool_result":
        return (f"Report exactly what {tool} returned.", [
            f"Re-read the result of {noun}; you misreported it.",
            "Your report does not match the tool's output: copy the values as they came back.",
            f"Look at {noun} again and report it field by field.",
            "You got the numbers wrong: report the data exactly as it was returned."])
    raise ValueError(kind)


def _misleading(f: dict) -> list[str]:
    tool = f["tool"] or "it"
    noun, verb, _ = SPOKEN.get(tool, (tool, tool, tool))
    other_tool = OTHER_TOOL.get(tool, "get_balance")
    other_agent = OTHER_AGENT.get(f["worker"] or f["agent"], "AccountAgent")
    wrong = f["wrong"] or _wrong_value_like(f["right"])
    said = ARGUMENT_SPOKEN.get(f["arg"] or "", "account")
    dollars = "1,000" if f["domain"] == "bank" else "1000"
    return [
        f"Do not call {tool}; it is not needed.",  # negation
        f"{noun[0].upper() + noun[1:]} was already carried out earlier, so just report it as done.",  # already done
        f"Use {wrong} as the {said}, and the amount is ${dollars}.",  # wrong values
        f"Call {other_tool} instead of {tool}.",  # wrong tool
        f"This is {other_agent}'s job: hand it over to {other_agent}.",  # wrong agent
        "Nothing is pending: everything is done, give the final answer now.",  # stop now
    ]


def suite(fault: dict, doc: dict, domain: str, paraphrases: int = 3) -> list[tuple[str, int, str]]:
    """(class, step, edit text) for one recorded fault."""
    f = {**_fault_facts(fault, doc), "domain": domain}
    step = fault["step"]
    plain, reworded = _correct(f)
    steps = [s["index"] for s in doc.get("steps") or []]
    wrong_step = steps[0] if step > 1 else steps[-1]
    out = [("correct", step, plain)]
    out += [("paraphrased", step, t) for t in reworded[:paraphrases]]
    out += [("misleading", step, t) for t in _misleading(f)]
    out += [("irrelevant", step, IRRELEVANT[step % len(IRRELEVANT)])]
    if wrong_step != step:
        out += [("wrong_step", wrong_step, plain)]
    return out
