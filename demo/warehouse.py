"""The warehouse demo app: a Dispatcher and three crew members (Stocker, Courier, Cashier) on
the plain `openai` client, instrumented with tracefix's public API as a user would. The
second testbed domain next to :mod:`tracefix.demo.bank`, so nothing is tuned to one app.

    import tracefix
    tracefix.init()
    from tracefix.demo.warehouse import run_task
    run_task("w01", base_url="http://127.0.0.1:8765/v1")   # -> {"final_answer": ..., ...}

The reward (`evaluate`, registered as the evaluator of `run_task`): the world's hash equals
the gold actions replayed on a fresh world, and the reply states every required output.
The scripted model is told who calls in headers (`X-Demo-Task`, `X-Demo-Step`,
`X-Demo-Session`, `X-Demo-Replay`), as the bank app does.
"""
from __future__ import annotations

import contextvars
import functools
import os
import threading
import uuid
from typing import Any

import tracefix

from .variants import scored, split_id
from .warehouse_content import content
from .warehouse_model import fault_free_outcome
from .warehouse_tasks import Ticket, get_ticket
from .warehouse_team import Crew
from .warehouse_world import WarehouseTools, WarehouseWorld

MODEL = os.environ.get("TRACEFIX_DEMO_WAREHOUSE_MODEL", "warehouse-crew")
ENTRYPOINT = "tracefix.demo.warehouse:run_task"

_tools: contextvars.ContextVar[WarehouseTools] = contextvars.ContextVar("tracefix_demo_warehouse")
_last = threading.local()


def last_database() -> WarehouseWorld:
    """The world of the latest run_task in this thread (demo-run and tests score with it)."""
    world = getattr(_last, "world", None)
    if world is None:
        raise RuntimeError("run_task has not run in this thread")
    return world


def _desk() -> WarehouseTools:
    try:
        return _tools.get()
    except LookupError:
        raise RuntimeError("warehouse tools are only usable inside run_task") from None


@tracefix.tool
def order_details(order_ref: str | None = None) -> dict:
    return _desk().order_details(order_ref=order_ref)


@tracefix.tool
def stock_level(sku: str | None = None) -> dict:
    return _desk().stock_level(sku=sku)


@tracefix.tool
def reserve(sku: str | None = None, qty: int | None = None, order_ref: str | None = None) -> dict:
    return _desk().reserve(sku=sku, qty=qty, order_ref=order_ref)


@tracefix.tool
def book_pickup(order_ref: str | None = None, service: str | None = None) -> dict:
    return _desk().book_pickup(order_ref=order_ref, service=service)


@tracefix.tool
def parcel_status(parcel: str | None = None) -> dict:
    return _desk().parcel_status(parcel=parcel)


@tracefix.tool
def payment_info(order_ref: str | None = None) -> str:
    return _desk().payment_info(order_ref=order_ref)


@tracefix.tool
def refund(order_ref: str | None = None, amount: float | None = None) -> str:
    return _desk().refund(order_ref=order_ref, amount=amount)


TOOLS = {fn.__name__: fn for fn in (order_details, stock_level, reserve, book_pickup, parcel_status,
                                    payment_info, refund)}


def run_tool(name: str, arguments: dict) -> Any:
    fn = TOOLS.get(name)
    if fn is None:
        raise LookupError(f"no tool called {name!r}")
    return fn(**arguments)


def _assistant_message(message: Any) -> dict:
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.function.name, "arguments": c.function.arguments}}
                             for c in message.tool_calls]
    return out


@tracefix.session
def run_task(task_id: str, *, base_url: str, seed: int = 0) -> dict:
    """Work one warehouse ticket against an OpenAI-compatible endpoint; returns the reply."""
    import openai  # the demo extra; kept out of module import

    ticket = get_ticket(task_id)
    world = fresh_world(task_id)
    tracefix.track("world", world)
    _last.world = world
    token = _tools.set(WarehouseTools(world))
    headers = {"X-Demo-Task": task_id,
               "X-Demo-Session": tracefix.current_session_id() or f"local-{uuid.uuid4().hex[:12]}"}
    if tracefix.replay_active():
        headers["X-Demo-Replay"] = "1"
    client = openai.OpenAI(base_url=base_url, api_key=os.environ.get("TRACEFIX_DEMO_API_KEY", "sim-key"),
                           default_headers=headers, max_retries=0)
    steps = 0

    def llm(agent: str, messages: list, tools: list | None) -> dict:
        nonlocal steps
        kwargs: dict[str, Any] = {"model": MODEL, "messages": messages, "seed": seed,
                                  "extra_headers": {"X-Demo-Step": str(steps)}}
        if tools:
            kwargs["tools"] = tools
        steps += 1
        return _assistant_message(client.chat.completions.create(**kwargs).choices[0].message)

    try:
        crew = Crew(llm, run_tool, tracefix.agent)
        answer = crew.run(ticket.text)
    finally:
        _tools.reset(token)
        client.close()
    return {"final_answer": answer, "task_id": task_id, "llm_calls": steps, "replans": crew.retakes}


def fresh_world(task_id: str) -> WarehouseWorld:
    """The world a run of this ticket starts from: its seed's warehouse (:mod:`tracefix.demo.warehouse_content`)."""
    return WarehouseWorld(content(split_id(task_id)[1]).state)


@functools.lru_cache(maxsize=None)
def scored_ticket(task_id: str) -> Ticket:
    """The ticket with what its reward checks (a variant's derived: :func:`tracefix.demo.variants.scored`)."""
    return scored(task_id, get_ticket, fault_free_outcome)


def gold_world(task_id: str) -> WarehouseWorld:
    world = fresh_world(task_id)
    tools = WarehouseTools(world)
    for name, args in scored_ticket(task_id).gold_actions:
        tools.call(name, dict(args))
    return world


def evaluate(task_id: str, world: Any, final_answer: str | None) -> dict:
    """World hash equals the gold one AND the reply states every required output; one
    milestone per gold action (done as in gold) and per required output."""
    ticket = scored_ticket(task_id)
    actual = world if isinstance(world, WarehouseWorld) else WarehouseWorld(world)
    answer = final_answer or ""
    world_match = actual.hash() == gold_world(task_id).hash()
    missing = [o for o in ticket.required_outputs if o.lower() not in answer.lower()]
    milestones = [{"name": f"{name} {sorted(args.items())}", "achieved": _achieved(actual, name, args)}
                  for name, args in ticket.gold_actions]
    milestones += [{"name": f"reply states {o}", "achieved": o not in missing} for o in ticket.required_outputs]
    success = world_match and not missing
    return {"success": success, "score": 1.0 if success else 0.0, "db_match": world_match,
            "missing_outputs": missing, "milestones": milestones}


def _achieved(world: WarehouseWorld, name: str, args: dict) -> bool:
    order = world.state["orders"].get(args.get("order_ref"), {})
    if name == "reserve":
        return order.get("reserved", {}).get(args["sku"], 0) >= args["qty"]
    if name == "book_pickup":
        return order.get("status") == "shipped"
    if name == "refund":
        return any(r["order_ref"] == args["order_ref"] and r["cents"] == round(args["amount"] * 100)
                   for r in world.state["refunds"])
    return False


@tracefix.evaluator(ENTRYPOINT)
def reward(inputs: dict, output: Any, tracked: dict) -> dict:
    answer = output.get("final_answer") if isinstance(output, dict) else None
    world = tracked.get("world")
    if world is None:
        return {"success": False, "score": 0.0, "error": "the world was not tracked"}
    return evaluate(inputs["task_id"], world, answer)
