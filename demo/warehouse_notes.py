"""How the `warehouse-crew` model's crew members read a Dispatcher's note: which job it asks
for with the arguments it states (:func:`parse_note`), and the ways a text may talk about a
job's action (:func:`about`, which the edit rules reuse).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .warehouse_world import required_arguments

ID = re.compile(r"ord_[0-9a-f]{5}|sku:\d{2}-[a-z]|#\d{4}")  # an order, a sku or a parcel
INTENTS = {
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
    return rf"\b{re.escape(tool.replace('_', ' '))}\b|{INTENTS[tool]}"


@dataclass
class Intent:
    tool: str
    args: dict


def parse_note(text: str, own: list[str]) -> tuple[Intent | None, str | None]:
    """The one call a note asks for, with the arguments it states; or (None, why not)."""
    found = sorted((m.start(), tool) for tool in own for m in [re.search(INTENTS[tool], text, re.I)] if m)
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
