"""The warehouse demo's world: orders, stock, parcels and refunds in one JSON state with
snapshot/restore, and the tools its crew uses on it.

A second testbed next to the bank, built to look different at every surface an analysis
could have been tuned to: other agents and tools, ids like ``ord_7f3a2``, ``sku:88-b`` and
``#4471`` (no upper-case prefix and dash), and three ways a tool says no:

- the stock tools return the failure as a value: ``{"ok": false, "reason": "..."}``;
- the courier tools raise (``LookupError``/``ValueError``, the trace shows a failed tool);
- the till tools answer in plain text, ``"unable to ..."`` on a refusal.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any, Callable

ORDER_RE = re.compile(r"^ord_[0-9a-f]{5}$")
SKU_RE = re.compile(r"^sku:\d{2}-[a-z]$")
PARCEL_RE = re.compile(r"^#\d{4}$")
SERVICES = ("standard", "express")
ETA_DAYS = {"standard": 3, "express": 1}


def _order(customer: str, lines: list[tuple[str, int]], paid_cents: int) -> dict:
    return {"customer": customer, "lines": [{"sku": s, "qty": q} for s, q in lines], "paid_cents": paid_cents,
            "refunded_cents": 0, "status": "open", "reserved": {}, "parcel": None}


# Every run starts from this. Prices are in cents; each order has been paid in full.
INITIAL_STATE: dict[str, Any] = {
    "stock": {
        "sku:88-b": {"item": "desk lamp", "on_hand": 14, "bin": "A7", "price_cents": 2390},
        "sku:12-k": {"item": "cable reel", "on_hand": 3, "bin": "C2", "price_cents": 1150},
        "sku:40-a": {"item": "standing mat", "on_hand": 9, "bin": "B4", "price_cents": 3900},
        "sku:73-m": {"item": "monitor arm", "on_hand": 5, "bin": "D1", "price_cents": 6475},
        "sku:05-t": {"item": "tape gun", "on_hand": 21, "bin": "A2", "price_cents": 845},
        "sku:61-c": {"item": "chair caster set", "on_hand": 7, "bin": "E5", "price_cents": 1880},
    },
    "orders": {
        "ord_7f3a2": _order("Mira Okafor", [("sku:88-b", 2), ("sku:12-k", 1)], 5930),
        "ord_1c9e0": _order("Tomas Berg", [("sku:40-a", 1)], 3900),
        "ord_b41d7": _order("Lena Park", [("sku:73-m", 1), ("sku:05-t", 3)], 9010),
        "ord_52e8c": _order("Yusuf Adeyemi", [("sku:61-c", 2)], 3760),
        "ord_9a06f": _order("Ines Duarte", [("sku:05-t", 4)], 3380),
        "ord_e3d15": _order("Kofi Mensah", [("sku:73-m", 2), ("sku:88-b", 1)], 15340),
    },
    "parcels": {
        "#4471": {"order_ref": "ord_0d2b4", "state": "held at depot", "depot": "Leeds", "attempts": 2},
        "#4472": {"order_ref": "ord_3e7c1", "state": "out for delivery", "depot": "Bristol", "attempts": 0},
        "#4473": {"order_ref": "ord_8f5a9", "state": "delivered", "depot": "Derby", "attempts": 1},
    },
    "refunds": [],
    "next_parcel": 4480,
    "next_refund": 31,
}


def money(cents: int) -> str:
    return f"{cents / 100:.2f}"


class WarehouseWorld:
    """The state the tools act on; `snapshot()`/`restore()` exchange deep copies (tracefix
    tracks it as "world" for replays), `hash()` is what the reward compares."""

    def __init__(self, state: dict | None = None):
        self.state: dict[str, Any] = copy.deepcopy(INITIAL_STATE if state is None else state)

    def snapshot(self) -> dict:
        return copy.deepcopy(self.state)

    def restore(self, state: dict) -> None:
        self.state = copy.deepcopy(state)

    def hash(self) -> str:
        return hashlib.sha256(json.dumps(self.state, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _refusal(reason: str) -> dict:
    return {"ok": False, "reason": reason}


def _cents(value: Any) -> int | None:
    try:
        cents = round(float(str(value).replace(",", "")) * 100)
    except (TypeError, ValueError):
        return None
    return cents if cents > 0 else None


class WarehouseTools:
    """The crew's tools bound to one world; methods are named like the tools."""

    def __init__(self, world: WarehouseWorld):
        self.world = world

    def call(self, name: str, arguments: dict) -> Any:
        fn: Callable | None = TOOL_FUNCTIONS.get(name)
        if fn is None:
            raise LookupError(f"no tool called {name!r}")
        return fn(self, **arguments)

    # --- stock desk: refusals come back as {"ok": false, "reason": ...} ----------------------
    def order_details(self, order_ref: str | None = None) -> dict:
        order = self.world.state["orders"].get(order_ref or "")
        if order is None:
            return _refusal(f"no order matches {order_ref!r}")
        stock = self.world.state["stock"]
        return {"ok": True, "order_ref": order_ref, "customer": order["customer"], "status": order["status"],
                "paid": money(order["paid_cents"]),
                "lines": [{"sku": line["sku"], "qty": line["qty"], "item": stock[line["sku"]]["item"],
                           "unit_price": money(stock[line["sku"]]["price_cents"])} for line in order["lines"]]}

    def stock_level(self, sku: str | None = None) -> dict:
        if not sku:
            return _refusal("stock_level needs a sku")
        row = self.world.state["stock"].get(sku)
        if row is None:
            return _refusal(f"{sku} is not a catalogue item")
        return {"ok": True, "sku": sku, "item": row["item"], "on_hand": row["on_hand"], "bin": row["bin"]}

    def reserve(self, sku: str | None = None, qty: int | None = None, order_ref: str | None = None) -> dict:
        if not sku or qty in (None, "") or not order_ref:
            missing = [n for n, v in (("sku", sku), ("qty", qty), ("order_ref", order_ref)) if v in (None, "")]
            return _refusal(f"reserve needs {', '.join(missing)}")
        row = self.world.state["stock"].get(sku)
        order = self.world.state["orders"].get(order_ref)
        if row is None or order is None:
            return _refusal(f"{sku if row is None else order_ref} is unknown")
        try:
            qty = int(qty)
        except (TypeError, ValueError):
            return _refusal(f"qty must be a whole number, got {qty!r}")
        if qty <= 0 or qty > row["on_hand"]:
            return _refusal(f"only {row['on_hand']} of {sku} on the shelf, asked for {qty}")
        # Any catalogue item can be put aside for any open order: a wrong sku is not refused.
        row["on_hand"] -= qty
        order["reserved"][sku] = order["reserved"].get(sku, 0) + qty
        return {"ok": True, "sku": sku, "qty": qty, "order_ref": order_ref, "left": row["on_hand"]}

    # --- courier desk: refusals raise -----------------------------------------------------------
    def book_pickup(self, order_ref: str | None = None, service: str | None = None) -> dict:
        if not order_ref or not service:
            raise ValueError(f"book_pickup: {'order_ref' if not order_ref else 'service'} is required")
        if service not in SERVICES:
            raise ValueError(f"book_pickup: service must be one of {', '.join(SERVICES)}, got {service!r}")
        order = self.world.state["orders"].get(order_ref)
        if order is None:
            raise LookupError(f"book_pickup: no order {order_ref}")
        if order["status"] != "open":
            raise ValueError(f"book_pickup: {order_ref} is already {order['status']}")
        short = [line["sku"] for line in order["lines"] if order["reserved"].get(line["sku"], 0) < line["qty"]]
        if short:
            raise ValueError(f"book_pickup: {order_ref} is not packed, nothing reserved yet for {', '.join(short)}")
        parcel = f"#{self.world.state['next_parcel']}"
        self.world.state["next_parcel"] += 1
        self.world.state["parcels"][parcel] = {"order_ref": order_ref, "state": "awaiting pickup",
                                               "depot": "Dock 2", "attempts": 0}
        order["status"], order["parcel"] = "shipped", parcel
        return {"parcel": parcel, "order_ref": order_ref, "service": service, "eta_days": ETA_DAYS[service]}

    def parcel_status(self, parcel: str | None = None) -> dict:
        if not parcel:
            raise ValueError("parcel_status: parcel is required")
        row = self.world.state["parcels"].get(parcel)
        if row is None:
            raise LookupError(f"parcel_status: nothing is tracked under {parcel}")
        return {"parcel": parcel, **{k: row[k] for k in ("state", "depot", "attempts")}}

    # --- till: answers in plain text --------------------------------------------------------------
    def payment_info(self, order_ref: str | None = None) -> str:
        order = self.world.state["orders"].get(order_ref or "")
        if order is None:
            return f"unable to find a payment for {order_ref or 'an order with no reference'}"
        return f"{order_ref} paid {money(order['paid_cents'])}, refunded so far {money(order['refunded_cents'])}"

    def refund(self, order_ref: str | None = None, amount: float | str | None = None) -> str:
        order = self.world.state["orders"].get(order_ref or "")
        if order is None:
            return f"unable to refund: no payment on record for {order_ref or 'an order with no reference'}"
        if amount in (None, ""):
            return f"unable to refund {order_ref}: no amount was given"
        cents = _cents(amount)
        if cents is None:
            return f"unable to refund {order_ref}: the amount {amount!r} is not a positive sum"
        left = order["paid_cents"] - order["refunded_cents"]
        if cents > left:
            return f"unable to refund {money(cents)} on {order_ref}: only {money(left)} is refundable"
        ref = f"rf_{self.world.state['next_refund']}"
        self.world.state["next_refund"] += 1
        order["refunded_cents"] += cents
        self.world.state["refunds"].append({"ref": ref, "order_ref": order_ref, "cents": cents})
        return f"refund {ref} issued: {money(cents)} back to the card used for {order_ref}"


# Which crew member holds which tool (the Dispatcher has none).
CREW_TOOLS: dict[str, list[str]] = {
    "Stocker": ["order_details", "stock_level", "reserve"],
    "Courier": ["book_pickup", "parcel_status"],
    "Cashier": ["payment_info", "refund"],
}
MUTATING_TOOLS = {"reserve", "book_pickup", "refund"}
TOOL_FUNCTIONS: dict[str, Callable] = {n: getattr(WarehouseTools, n) for names in CREW_TOOLS.values() for n in names}

_SPECS = {
    "order_details": ("What an order holds, who placed it, what was paid.", {"order_ref": ("string", "e.g. ord_7f3a2")}),
    "stock_level": ("How many of an item are on the shelf, and where.", {"sku": ("string", "e.g. sku:88-b")}),
    "reserve": ("Put items aside for an order.", {"sku": ("string", "item"), "qty": ("integer", "how many"),
                                                  "order_ref": ("string", "the order")}),
    "book_pickup": ("Book a courier pickup for a packed order.",
                    {"order_ref": ("string", "the order"), "service": ("string", "standard or express")}),
    "parcel_status": ("Where a parcel is.", {"parcel": ("string", "tracking number, e.g. #4471")}),
    "payment_info": ("What was paid for an order and refunded so far.", {"order_ref": ("string", "the order")}),
    "refund": ("Pay money back for an order.", {"order_ref": ("string", "the order"),
                                                "amount": ("number", "sum to pay back")}),
}


def tool_spec(name: str) -> dict:
    description, params = _SPECS[name]
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "required": list(params),
                       "properties": {p: {"type": t, "description": d} for p, (t, d) in params.items()}}}}


def required_arguments(name: str) -> list[str]:
    return list(_SPECS[name][1])
