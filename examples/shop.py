"""The small shop every example agent works on: one order desk (tracked state), two tools,
one task, one evaluator. Shared so each example file shows only its framework's code."""
from __future__ import annotations

import copy
import json

import tracefix

MODEL = "plan-agent"  # `tracefix sim` serves it: it follows the plan written in the task
ORDER_ID = "A-1001"
# The plan lines are for the scripted model; a real model would work the task out itself.
TASK = (f"The customer wants a full refund of order {ORDER_ID}. Look the order up, then refund its total.\n"
        f'1. get_order {{"order_id": "{ORDER_ID}"}}\n'
        f'2. refund {{"order_id": "{ORDER_ID}", "amount": 20}}\n')
HANDOFF_TASK = TASK.replace("2. refund", '2. transfer_to_refunds {}\n3. refund')


class OrderDesk:
    """The shop's state; tracefix snapshots it at every step and a replay restores it."""

    INITIAL = {ORDER_ID: {"total": 20, "refunded": 0, "status": "delivered"}}

    def __init__(self) -> None:
        self.orders = copy.deepcopy(self.INITIAL)

    def snapshot(self) -> dict:
        return copy.deepcopy(self.orders)

    def restore(self, state: dict) -> None:
        self.orders = copy.deepcopy(state)


desk = tracefix.track("desk", OrderDesk())


@tracefix.tool
def get_order(order_id: str) -> dict:
    """Look an order up by its id."""
    if order_id not in desk.orders:
        raise KeyError(f"no order {order_id}")
    return {"order_id": order_id, **desk.orders[order_id]}


@tracefix.tool
def refund(order_id: str, amount: float) -> dict:
    """Refund `amount` of an order's total."""
    order = desk.orders[order_id]
    left = order["total"] - order["refunded"]
    if amount > left:
        raise ValueError(f"argument 'amount' ({amount}) exceeds what is left to refund on {order_id} ({left})")
    order["refunded"] += amount
    order["status"] = "refunded" if order["refunded"] == order["total"] else "partly refunded"
    return {"order_id": order_id, "refunded": order["refunded"]}


def fully_refunded(inputs: dict, output, tracked: dict) -> dict:
    """The evaluator: success when the order is refunded in full, whatever the agent says."""
    order = tracked["desk"].orders[ORDER_ID]
    ok = order["refunded"] == order["total"]
    return {"success": ok, "score": 1.0 if ok else 0.0,
            "reason": f"{ORDER_ID}: refunded {order['refunded']} of {order['total']}"}


def as_text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)
