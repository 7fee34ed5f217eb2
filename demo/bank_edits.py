"""What the `bank-agent` model does with an edit it read (an :class:`~tracefix.demo.edit_reader.Asks`,
read in the bank's words, :data:`VOCABULARY`): values it asks for go into an instruction
(:func:`adopt_ids`) or a call (:func:`adopt_arguments`), right or wrong, and arguments it says
to leave out are left out; the Orchestrator passes what it says about a worker's action on
to the worker (:func:`relays`); and the two repeating habits of the model (a worker's failed
call, the Orchestrator's instruction after a re-plan) are broken only by an edit that decides
what the repeated message got wrong (:func:`repairs`, :func:`resends`).
"""
from __future__ import annotations

import re

from . import edits as edit_values
from .edit_reader import Asks, Vocabulary
from .edit_reader import read_all as read_asks
from .team import ORCHESTRATOR, WORKERS
from .tools import required_arguments

# How people may name the bank's actions in an edit (richer than an instruction's wording).
TOOL_WORDS = {
    "lookup_customer": r"lookup[_ ]customer|look (?:up|for) (?:the )?customer|find (?:the )?customer|customer lookup|"
                       r"search for the customer",
    "get_accounts": r"get[_ ]accounts|list (?:\w+ )?accounts|accounts of|fetch (?:\w+ )?accounts",
    "get_balance": r"get[_ ]balance|\bbalance\b",
    "close_account": r"close[_ ]account|\bclos(?:e|ing|ed|ure)\b|\bshut\b",
    "transfer": r"\btransfer(?:s|red|ring)?\b|\bmov(?:e|ing|ed) (?:the )?(?:money|funds|\$)|\bwire\b|"
                r"\bsend (?:the )?(?:money|funds|\$)",
    "deposit_check": r"deposit[_ ]check|\bdeposit(?:s|ed|ing)?\b|\bpay (?:the )?(?:check|cheque) in|\bcash (?:the )?(?:check|cheque)",
    "get_transactions": r"get[_ ]transactions|\btransactions?\b|transaction history|\bstatement\b",
}
ARGUMENT_WORDS = {
    "name": r"\b(?:full )?name\b",
    "customer_id": r"customer[_ ]id\b|customer (?:number|identifier)",
    "from_account": r"from[_ ]account|source(?: account)?|account to debit|\bdebit(?:ed)? account|paying account",
    "to_account": r"to[_ ]account|destination(?: account)?|recipient(?: account)?|target account|account to credit|"
                  r"receiving account|\bcredit(?:ed)? account",
    "account_id": r"account[_ ]id\b|\baccount\b",
    "amount": r"\bamount\b|\bsum\b|how much",
    "check_number": r"check[_ ]number|cheque(?: number)?|\bcheck (?:id|no)\b|\bcheck\b(?= CHK)",
}
SHAPES = {"customer_id": r"CUST-\d+", "from_account": r"ACC-\d+", "to_account": r"ACC-\d+",
          "account_id": r"ACC-\d+", "amount": r"[\d.]+", "check_number": r"CHK-\d+"}
VOCABULARY = Vocabulary(TOOL_WORDS, ARGUMENT_WORDS, (ORCHESTRATOR, *WORKERS), SHAPES)


def read(texts: list[str], own_action: str | None = None) -> Asks | None:
    return read_asks(texts, VOCABULARY, own_action=own_action)


def _ids(text: str) -> list[str]:
    return re.findall(r"[A-Z]+-\d+", text)


def adopt_ids(text: str, asks: Asks | None) -> str:
    """An instruction with the ids and amount an edit asks for put in place: a stated source
    replaces the id after "from", a stated destination (or an id without direction) the last
    one of its shape, which is what the action acts on."""
    if asks is None:
        return text
    for argument, value in asks.values.items():
        if argument == "from_account":
            m = re.search(r"from (?:account )?(ACC-\d+)", text)
            if m:
                text = text.replace(m.group(1), value, 1)
        elif SHAPES.get(argument, "").startswith(("ACC", "CUST", "CHK")):
            same = [i for i in _ids(text) if edit_values.shape(i) == edit_values.shape(value)]
            if same and value not in same:
                head, _, tail = text.rpartition(same[-1])
                text = head + value + tail
    for stated in asks.free:
        same = [i for i in _ids(text) if edit_values.shape(i) == edit_values.shape(stated.value)]
        if not same or stated.value in same:
            continue
        if stated.direction == "source":
            m = re.search(rf"from (?:account )?({'|'.join(map(re.escape, same))})", text)
            text = text.replace(m.group(1) if m else same[0], stated.value, 1)
        else:
            head, _, tail = text.rpartition(same[-1])
            text = head + stated.value + tail
    amount = asks.values.get("amount") or next((s.value for s in asks.free if re.fullmatch(r"[\d.]+", s.value)), None)
    if amount:
        text = re.sub(r"\$\s*[\d,]+(?:\.\d+)?", f"${float(amount):.2f}", text, count=1)
    return text


def adopt_arguments(tool: str, args: dict, asks: Asks | None) -> dict:
    """The call's arguments as the edit asks (right or wrong): a value for a named argument, a
    value without one to the argument holding a value of its shape (by direction when there
    are two), an amount to `amount`; an argument it says to leave out is left out."""
    if asks is None:
        return args
    args = dict(args)
    parameters = required_arguments(tool)
    free = list(asks.free)
    for argument, value in asks.values.items():
        if argument in parameters:
            args[argument] = float(value) if argument == "amount" else value
        else:  # a value named for an argument this call lacks: placed by its shape
            free.append(edit_values.Stated(value, "destination" if argument.startswith("to") else None))
    for stated in free:
        if re.fullmatch(r"[\d.]+", stated.value):
            if "amount" in parameters and "amount" not in asks.values:
                args["amount"] = float(stated.value)
            continue
        slots = [k for k in parameters if re.fullmatch(SHAPES.get(k, "$^"), stated.value)]
        if not slots or any(args.get(k) == stated.value for k in slots) or set(slots) & set(asks.values):
            continue
        if len(slots) > 1:
            wanted = "from" if stated.direction == "source" else "to"
            slots = [k for k in slots if k.startswith(wanted)] or slots[-1:]
        args[slots[0]] = stated.value
    for argument in asks.omit:
        args.pop(argument, None)
    return args


def relays(asks: Asks, action: str) -> bool:
    """Whether the Orchestrator passes an edit on to the worker (as a note under its
    instruction): when it asks something about the worker's action or its arguments."""
    arguments = set(required_arguments(action))
    return bool(action in asks.call or action in asks.forbid or asks.free or set(asks.values) & arguments
                or asks.omit & arguments or asks.include & arguments or set(asks.source) & (arguments | {"*"}))


def repairs(asks: Asks | None, repeated: dict, correct: dict) -> bool:
    """Whether an edit decides what a repeated failed call got wrong (so the agent stops
    copying it): every argument it differs in is decided by the edit."""
    if asks is None:
        return False
    differing = [k for k in set(repeated) | set(correct) if repeated.get(k) != correct.get(k)]
    return bool(differing) and all(asks.decides(k, SHAPES.get(k)) or k in asks.include for k in differing)


def resends(asks: Asks | None, action: str) -> bool:
    """Whether an edit makes the Orchestrator, retrying a sub-task after a re-plan, write its
    instruction afresh instead of repeating the earlier one: it says where the values come
    from, states them, or asks for the action."""
    return asks is not None and bool(asks.source or asks.values or asks.free or asks.asks_for(action))
