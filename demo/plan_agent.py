"""`plan-agent`: a scripted, domain-free tool-using model (a test and demo component).

The bank demo's model only plays the bank team. This one plays any agent whose task spells
out its plan, so agents written with any framework can be driven through a small tool-using
task over real HTTP. The task is the first user message; its plan lines are
``N. tool_name {JSON arguments}`` (or ``- tool_name {...}``)::

    Refund order A-1001.
    1. get_order {"order_id": "A-1001"}
    2. refund {"order_id": "A-1001", "amount": 20}

Each request it answers with the next plan step: the first step not yet called (the
assistant tool calls in the conversation, matched in plan order). When that step's tool is
among the request's ``tools`` it calls it; when it is not (another agent holds that tool) it
says so in text, naming the tool, so a router or handoff can move on; when the plan is done
it answers ``DONE:`` with every tool result it saw. Everything is read from the messages, so
a replayed prefix gets the same continuation.

Faults: the sim's ``--plan-fault TOOL.ARG=VALUE`` makes the model send ARG=VALUE (JSON, else
text) whenever it calls TOOL, unless an edit in its context says otherwise. An edit is any
message after the task that is not a tool result. The model follows it by content, not by
keyword: an edit that names the argument and states a value (``amount=20``, ``amount: 20``,
``amount is 20``, ``"amount": 20``) makes it send that value (a wrong value too); one that
names the argument and points to the task (``check it against the task``) makes it take the
task's value; anything else changes nothing.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

MODEL = "plan-agent"
PLAN_LINE = re.compile(r"^\s*(?:\d+[.)]|-)\s*([A-Za-z_][\w.\-]*)\s*(\{.*\})\s*$")
FAULT_SPEC = re.compile(r"^([A-Za-z_][\w.\-]*)\.(\w+)=(.*)$")


@dataclass(frozen=True)
class PlanStep:
    tool: str
    arguments: dict


@dataclass(frozen=True)
class PlanFault:
    """The model's flaw: it sends `argument`=`value` whenever it calls `tool`."""
    tool: str
    argument: str
    value: Any


def parse_fault(spec: str) -> PlanFault:
    m = FAULT_SPEC.match(spec.strip())
    if not m:
        raise ValueError(f"--plan-fault wants TOOL.ARG=VALUE, got {spec!r}")
    tool, argument, raw = m.groups()
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return PlanFault(tool, argument, value)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def parse_plan(task: str) -> list[PlanStep]:
    steps = []
    for line in task.splitlines():
        m = PLAN_LINE.match(line)
        if not m:
            continue
        try:
            arguments = json.loads(m.group(2))
        except ValueError:
            continue
        if isinstance(arguments, dict):
            steps.append(PlanStep(m.group(1), arguments))
    return steps


def _task_index(messages: list[dict]) -> int | None:
    return next((i for i, m in enumerate(messages) if m.get("role") == "user" and parse_plan(_text(m.get("content")))),
                None)


def _called(messages: list[dict]) -> list[str]:
    return [(c.get("function") or {}).get("name") for m in messages if m.get("role") == "assistant"
            for c in m.get("tool_calls") or []]


def _next_step(plan: list[PlanStep], called: list[str]) -> int:
    done = 0
    for name in called:
        if done < len(plan) and name == plan[done].tool:
            done += 1
    return done


def _value_from_edit(text: str, argument: str, task_value: Any) -> tuple[bool, Any]:
    """(whether the edit says what `argument` should be, and the value it says)."""
    named = re.search(rf"(?<![\w-]){re.escape(argument)}(?![\w-])", text)
    if not named:
        return False, None
    stated = re.search(rf"""["'`]?{re.escape(argument)}["'`]?\s*(?:=|:|\bis\b|\bshould be\b|\bmust be\b)\s*"""
                       r"""("[^"]*"|'[^']*'|`[^`]*`|-?\d+(?:\.\d+)?|[\w@.\-]+)""", text)
    if stated:
        raw = stated.group(1).strip("`'\"")
        try:
            return True, json.loads(raw)
        except ValueError:
            return True, raw
    if re.search(r"\btask\b", text, re.I):  # a pointer to where the right value is
        return True, task_value
    return False, None


def _arguments(step: PlanStep, fault: PlanFault | None, edits: list[str]) -> dict:
    arguments = dict(step.arguments)
    if fault is None or fault.tool != step.tool:
        return arguments
    value = fault.value
    for text in edits:  # the latest edit that speaks about the argument wins
        says, stated = _value_from_edit(text, fault.argument, step.arguments.get(fault.argument))
        if says:
            value = stated
    arguments[fault.argument] = value
    return arguments


def _call_id(messages: list[dict], tool: str) -> str:
    digest = hashlib.sha256(json.dumps([len(messages), tool, _called(messages)]).encode()).hexdigest()
    return f"call_{digest[:16]}"


def answer(messages: list[dict], tools: list | None, faults: tuple[PlanFault, ...] = ()) -> dict:
    """The next assistant message for this conversation."""
    index = _task_index(messages)
    if index is None:
        return {"role": "assistant", "content": "plan-agent (scripted test model): give me a task with plan lines "
                                                "like `1. tool_name {\"arg\": 1}`."}
    plan = parse_plan(_text(messages[index].get("content")))
    position = _next_step(plan, _called(messages))
    results = [_text(m.get("content")) for m in messages if m.get("role") == "tool"]
    if position >= len(plan):
        return {"role": "assistant", "content": "DONE: " + " | ".join(results)}
    step = plan[position]
    offered = {(t.get("function") or t).get("name") for t in tools or [] if isinstance(t, dict)}
    if step.tool not in offered:
        return {"role": "assistant", "content": f"My part is done; the next step needs `{step.tool}`."}
    edits = [_text(m.get("content")) for m in messages[index + 1:] if m.get("role") in ("user", "system", "developer")]
    fault = next((f for f in faults if f.tool == step.tool), None)
    arguments = _arguments(step, fault, edits)
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": _call_id(messages, step.tool), "type": "function",
         "function": {"name": step.tool, "arguments": json.dumps(arguments)}}]}


def plan_agent(body: dict, ctx: Any) -> dict:
    return answer(body.get("messages") or [], body.get("tools"), tuple(getattr(ctx, "plan_faults", ()) or ()))
