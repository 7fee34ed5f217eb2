"""The faulty variants the `warehouse-crew` model's steps can host, each with what an edit
must decide to prevent it (:class:`~tracefix.demo.needs.Need`); the fault injector
(:mod:`tracefix.demo.faults`) picks one or none. The kinds are the bank's
(:data:`~tracefix.demo.scripted.KINDS`), adapted to this crew:

- a Dispatcher's note (:func:`note_faults`): another id of the same kind, a note naming no
  action, or a reply to the customer before the work is done;
- a crew member's reply (:func:`reply_faults`): its last look-up misread (an order's items
  rotated across its lines, a quantity, a stock count, a parcel's state, a payment);
- a crew member's tool call (:func:`tool_faults`): a dropped argument, the wrong id, or the
  action said done without the call.
"""
from __future__ import annotations

import json
import re

from .needs import Need
from .scripted import Call, Hosts, Variant, next_other, text_message, tool_call_message
from .warehouse_content import world_beside
from .warehouse_edits import SHAPES
from .warehouse_notes import ID
from .warehouse_replies import reply, sentences
from .warehouse_tasks import Job
from .warehouse_team import REPLY_MARK
from .warehouse_world import MUTATING_TOOLS, required_arguments


_ARGUMENT = {"sku": "sku", "parcel": "parcel", "order": "order_ref"}


def _kind_of(value: str) -> str:
    return "sku" if value.startswith("sku:") else "parcel" if value.startswith("#") else "order"


def other_id(value: str, avoid: set[str]) -> str:
    """A plausible wrong id: the next known id of the same kind."""
    world = world_beside(value)
    pools = {"order": sorted(world["orders"]), "sku": sorted(world["stock"]), "parcel": sorted(world["parcels"])}
    return next_other(pools[_kind_of(value)], value, avoid)


def note_faults(job: Job, note: str, progress: int, jobs: int) -> Hosts:
    """The slips of the Dispatcher's note for job `progress` (of `jobs`)."""
    hosts: Hosts = {}
    ids = ID.findall(note)
    if ids:
        wrong = other_id(ids[-1], set(ids))
        head, _, tail = note.rpartition(ids[-1])
        hosts["wrong_instruction"] = (
            lambda: Variant(text_message(head + wrong + tail),
                            f"told {job.crew} to use {wrong} instead of {ids[-1]} for {job.tool}"),
            Need("wrong_instruction", job.tool, shape=SHAPES[_ARGUMENT[_kind_of(ids[-1])]],
                 target=(job.crew, job.tool)))
    hosts["vague_instruction"] = (
        lambda: Variant(text_message(f"@{job.crew} can you take care of the next bit of this ticket?"),
                        f"note to {job.crew} for {job.tool} named no action, ref or quantity"),
        Need("vague_instruction", job.tool, shape="|".join(SHAPES[a] for a in required_arguments(job.tool)),
             target=(job.crew, job.tool)))
    if progress > 0:
        hosts["early_final_answer"] = (
            lambda: Variant(text_message(f"{REPLY_MARK} All sorted on our side, nothing more to do."),
                            f"replied before job {progress + 1} of {jobs} ({job.tool}) was done"),
            Need("early_final_answer", job.tool, target=("final answer",)))
    return hosts


def _misread(c: Call) -> tuple[Call, str, tuple] | None:
    """The call as misread: (call with a wrong result, detail, the true values it hides)."""
    r = c.result
    try:
        sentences(c)
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


def reply_faults(agent: str, segment: list[Call]) -> Hosts:
    """The slip of a crew member's reply on its job's calls: the last one misread (when it can be)."""
    done = segment[-1]
    misread = _misread(done)
    if misread is None:
        return {}
    wrong, detail, hidden = misread
    return {"misread_tool_result": (
        lambda: Variant(text_message(reply(agent, segment[:-1] + [wrong])), detail),
        Need("misread_tool_result", done.name, values=hidden, target=(done.name,)))}


_WRONG_SLOT = {"reserve": "sku", "book_pickup": "order_ref", "refund": "order_ref"}


def tool_faults(agent: str, tool: str, args: dict, call_id: str) -> Hosts:
    """The slips of a crew member's call of `tool` with `args` (the correct call, id `call_id`)."""
    hosts: Hosts = {}
    present = [a for a in required_arguments(tool) if args.get(a) is not None]
    if present:
        dropped = present[-1]
        hosts["missing_argument"] = (
            lambda: Variant(tool_call_message(tool, {k: v for k, v in args.items() if k != dropped}, call_id),
                            f"{tool} called without '{dropped}'"),
            Need("missing_argument", tool, dropped, SHAPES.get(dropped), target=(tool,)))
    if tool in MUTATING_TOOLS:
        slot = _WRONG_SLOT[tool]
        if isinstance(args.get(slot), str):
            wrong = other_id(args[slot], {v for v in args.values() if isinstance(v, str)})
            hosts["wrong_argument"] = (
                lambda: Variant(tool_call_message(tool, {**args, slot: wrong}, call_id),
                                f"{tool} called with {slot}={wrong} instead of {args[slot]}"),
                Need("wrong_argument", tool, slot, SHAPES.get(slot), target=(tool,)))
        hosts["skipped_action"] = (
            lambda: Variant(done_claim(agent, tool, args), f"said {tool} was done without calling it"),
            Need("skipped_action", tool, target=(tool,)))
    return hosts


def done_claim(agent: str, tool: str, args: dict) -> dict:
    """A crew member's reply saying its action is done, without the call."""
    claim = {"reserve": f"Put aside {args.get('qty')} x {args.get('sku')} for {args.get('order_ref')}.",
             "book_pickup": f"Pickup for {args.get('order_ref')} is booked.",
             "refund": f"The refund on {args.get('order_ref')} is done."}.get(tool, f"{tool} is done.")
    return text_message(f"{agent} here. {claim}")
