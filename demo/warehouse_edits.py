"""What the `warehouse-crew` model does with an edit it read (an
:class:`~tracefix.demo.edit_reader.Asks`, read in the warehouse's words, :data:`VOCABULARY`):
the ids and sums it asks for go into the Dispatcher's note (:func:`adopt_in_note`) or a crew
member's call (:func:`adopt_arguments`), right or wrong, and arguments it says to leave out
are left out. The crew's habits (a refused call repeated, a stuck job's note re-sent) are
broken only by an edit that decides what the repeated message got wrong (:func:`decides_any`).
"""
from __future__ import annotations

import re

from .edit_reader import Asks, Vocabulary
from .edit_reader import read_all as read_asks
from .warehouse_team import CREW, DISPATCHER
from .warehouse_world import required_arguments

TOOL_WORDS = {
    "order_details": r"order[_ ]details|pull up|what is on (?:it|the order)|look (?:up|at) the order|the order's lines",
    "stock_level": r"stock[_ ]level|\bstock\b|on the shelf|how many|inventory",
    "reserve": r"\breserv(?:e|ed|ing|ation)\b|put (?:\w+ )?aside|set (?:\w+ )?aside|hold back|allocate",
    "book_pickup": r"book[_ ]pickup|\bpick-?ups?\b|\bcollection\b|book (?:a |the )?courier",
    "parcel_status": r"parcel[_ ]status|\btrack(?:ing)?\b|where (?:is )?(?:the )?parcel",
    "payment_info": r"payment[_ ]info|what was paid|\bpayment\b",
    "refund": r"\brefund(?:s|ed|ing)?\b|pay (?:\w+ )?back|reimburse|money back",
}
ARGUMENT_WORDS = {
    "order_ref": r"order[_ ]ref(?:erence)?|\border\b(?! details)",
    "sku": r"\bsku\b|\bitem\b|\bproduct\b",
    "qty": r"\bqty\b|quantit(?:y|ies)|\bunits\b",
    "service": r"\bservice\b|\bspeed\b|delivery (?:option|level|type)",
    "parcel": r"\bparcel\b|tracking (?:number|no)",
    "amount": r"\bamount\b|\bsum\b|how much",
}
SHAPES = {"order_ref": r"ord_[0-9a-f]{5}", "sku": r"sku:\d{2}-[a-z]", "parcel": r"#\d{4}", "qty": r"\d+",
          "amount": r"[\d.]+", "service": r"express|standard"}
VOCABULARY = Vocabulary(TOOL_WORDS, ARGUMENT_WORDS, (DISPATCHER, *CREW), SHAPES,
                        words={"service": "express|standard"})
_IDS = ("order_ref", "sku", "parcel")


def read(texts: list[str], own_action: str | None = None) -> Asks | None:
    return read_asks(texts, VOCABULARY, own_action=own_action)


def _id_values(asks: Asks) -> dict[str, str]:
    """The ids the edit asks for, by the argument they fill (named or placed by shape)."""
    found = {k: v for k, v in asks.values.items() if k in _IDS}
    for stated in asks.free:
        for argument in _IDS:
            if re.fullmatch(SHAPES[argument], stated.value, re.I):
                found.setdefault(argument, stated.value)
    return found


def _amount(asks: Asks) -> str | None:
    return asks.values.get("amount") or next((s.value for s in asks.free if re.fullmatch(r"[\d.]+", s.value)), None)


def adopt_in_note(note: str, asks: Asks | None) -> str:
    """The Dispatcher's note with the ids and sum an edit asks for in place of its own."""
    if asks is None:
        return note
    for argument, value in _id_values(asks).items():
        note = re.sub(SHAPES[argument], value, note, count=1)
    amount = _amount(asks)
    if amount:
        note = re.sub(r"\b\d+\.\d{2}\b", f"{float(amount):.2f}", note, count=1)
    if "service" in asks.values:
        note = re.sub(r"\b(?:standard|express)\b", asks.values["service"], note, count=1)
    return note


def adopt_arguments(tool: str, args: dict, asks: Asks | None) -> dict:
    """A crew member's call as the edit asks (right or wrong), arguments it says to drop dropped."""
    if asks is None:
        return args
    args = dict(args)
    parameters = required_arguments(tool)
    for argument, value in _id_values(asks).items():
        if argument in parameters:
            args[argument] = value
    amount = _amount(asks)
    if amount and "amount" in parameters:
        args["amount"] = float(amount)
    if "service" in asks.values and "service" in parameters:
        args["service"] = asks.values["service"]
    for argument in asks.omit:
        args.pop(argument, None)
    return args


def decides_any(asks: Asks | None, tool: str) -> bool:
    """Whether an edit decides anything about this action: a value, a source, or the action itself."""
    return asks is not None and bool(asks.values or asks.free or asks.source or asks.include or asks.asks_for(tool))
