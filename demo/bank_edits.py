"""What the `bank-agent` model does with an edit it read (a :class:`~tracefix.demo.edits.Reading`,
:mod:`tracefix.demo.edits`): values it states go into an instruction (:func:`adopt_ids`) or a
call (:func:`adopt_arguments`), right or wrong; the Orchestrator passes what it says about a
worker's action on to the worker (:func:`relays`); and the two repeating habits of the model
(a worker's failed call, the Orchestrator's instruction after a re-plan) are broken only by
an edit that carries what the repeated message lacked (:func:`repair_need`, :func:`resend_need`).
"""
from __future__ import annotations

import re

from . import edits as edit_reading
from .bank_instructions import action_words
from .edits import Need, Reading
from .tools import required_arguments

# the words an edit uses for an instruction's details, besides the action itself
INSTRUCTION_DETAILS = r"\b(accounts?|amounts?|identifiers?|ids?|check numbers?)\b"


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


def relays(edit: Reading, action: str) -> bool:
    """Whether the Orchestrator passes an edit on to the worker (as a note under its
    instruction): when it talks about the worker's action, states values or names one of the
    action's arguments."""
    return bool(edit.mentions_any(action_words(action)) or edit.ids or edit.amounts
                or any(edit.mentions_argument(a) for a in required_arguments(action)))


def repair_need(tool: str, repeated: dict, correct: dict) -> Need:
    """What an edit must carry to make the agent drop a repeated failed call for the right one."""
    differing = tuple(k for k in set(repeated) | set(correct) if repeated.get(k) != correct.get(k))
    return Need(values=tuple(correct[k] for k in differing if correct.get(k) is not None),
                arguments=tuple(k for k in differing if repeated.get(k) is None),
                related=differing, about=action_words(tool), sources=("instruction", "results"),
                target=(tool,))


def resend_need(action: str, fresh: str, earlier: str) -> Need:
    """What an edit must carry to make the Orchestrator, retrying a sub-task after a re-plan,
    send the instruction it would write now instead of repeating its earlier one."""
    fresh_ids = re.findall(r"[A-Z]+-\d+", fresh)
    earlier_ids = re.findall(r"[A-Z]+-\d+", earlier)
    return Need(values=tuple(i for i in fresh_ids if i not in earlier_ids),
                about=action_words(action) + "|" + INSTRUCTION_DETAILS,
                sources=("reports", "instruction"), action_alone=not earlier_ids)
