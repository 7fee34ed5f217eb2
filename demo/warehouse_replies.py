"""A warehouse crew member's reply, both ways: what it says about its tool calls
(:func:`reply`, :func:`sentences`; "Stocker here. ..." or "Stocker here. Stuck: ..." when a
tool refused, :func:`refusal`) and the facts the Dispatcher learns back from it
(:func:`learn`, :func:`believe`), which fill the ticket's note and reply templates
(:func:`resolve`, :mod:`tracefix.demo.warehouse_tasks`).
"""
from __future__ import annotations

import json
import re
from typing import Any

from .scripted import Call, tool_calls
from .warehouse_tasks import Job

UNKNOWN = "(unknown)"


def refusal(result: Any) -> str | None:
    """Why a tool said no, in whichever of its three ways it says it; None when it did not."""
    if isinstance(result, dict) and result.get("ok") is False:
        return str(result.get("reason") or "refused")
    if isinstance(result, str):
        if result.lower().startswith("unable to"):
            return result
        if re.match(r"[A-Za-z_.]*(Error|Exception)\b", result):
            return result
    return None


def crew_calls(messages: list[dict]) -> list[Call]:
    """The crew's tool calls in `messages`, each refusal read as the warehouse's tools say it."""
    return tool_calls(messages, refusal=refusal)


# --- what a crew member says -----------------------------------------------------------------------

def sentences(c: Call) -> list[str]:
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


def reply(agent: str, calls: list[Call]) -> str:
    said = []
    for c in calls:
        if c.error:
            continue
        try:
            said += sentences(c)
        except (KeyError, TypeError, IndexError, AttributeError):
            said.append(f"{c.name} gave {json.dumps(c.result, sort_keys=True)}.")
    return " ".join([f"{agent} here.", *said])


# --- what the Dispatcher reads back --------------------------------------------------------------

def is_reply(m: dict) -> bool:
    return m.get("role") == "user" and re.match(r"(\w+) here\.", str(m.get("content") or "")) is not None


def stuck(text: str) -> str | None:
    """Why a crew member is stuck, when its reply says it is."""
    m = re.match(r"\w+ here\. Stuck: (.*)", text, re.S)
    return m.group(1).strip().rstrip(".") if m else None


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
