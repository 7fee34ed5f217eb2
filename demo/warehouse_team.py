"""How the warehouse crew talks: a Dispatcher writes a checklist, hands one job at a time to
a crew member with an ``@Name`` note, reads the crew's replies, takes a second run at a
stuck job once, and ends with a ``Reply to customer:`` message.

Independent of how the LLM is reached and how tools run: :mod:`tracefix.demo.warehouse`
drives it with the openai client and instrumented tools, the scripted model drives the
very same loop in-process to learn which step is which (:func:`warehouse_model.fault_free_steps`).
"""
from __future__ import annotations

import contextlib
import json
import re
from typing import Any, Callable, ContextManager

from .team import role_in_system_prompt, tool_error_text
from .warehouse_world import CREW_TOOLS, tool_spec

DISPATCHER = "Dispatcher"
CREW = tuple(CREW_TOOLS)
MAX_DISPATCHER_TURNS = 14
MAX_TOOL_CALLS_PER_JOB = 4
REPLY_MARK = "Reply to customer:"
TICKET_MARK = "New ticket: "

LLM = Callable[[str, list, "list | None"], dict]
RunTool = Callable[[str, dict], Any]

_ROLE_RE = re.compile(r"\bYour role: (\w+)\.")


def system_prompt(agent: str) -> str:
    if agent == DISPATCHER:
        crew = " ".join(f"{c} handles {', '.join(t)}." for c, t in CREW_TOOLS.items())
        return (f"Warehouse crew. Your role: {DISPATCHER}. {crew} Start with a Checklist of jobs. Then send one "
                "job at a time as a note that begins with @ and the crew member's name, carrying the order refs, "
                "skus, quantities and sums it needs. If a crew member is stuck, write a new Checklist and try "
                f"once more. Finish with '{REPLY_MARK} ...'.")
    return (f"Warehouse crew. Your role: {agent}. Your tools: {', '.join(CREW_TOOLS[agent])}. Do what the "
            f"Dispatcher's note asks, one tool call at a time, then answer in a few words starting '{agent} here.' "
            "If the note does not say what to do, touch nothing and say you are stuck.")


def role_of(messages: list[dict]) -> str | None:
    return role_in_system_prompt(messages, _ROLE_RE)


def tools_for(agent: str) -> list[dict] | None:
    return [tool_spec(t) for t in CREW_TOOLS[agent]] if agent in CREW_TOOLS else None


def classify_dispatcher_output(text: str) -> tuple[str, str | None, str]:
    """(kind, crew member, text): "plan", "job" or "reply". A checklist is anything starting
    'Checklist' or with two or more bullet lines; a job a note addressed with @Name."""
    text = (text or "").strip()
    if text.lower().startswith(REPLY_MARK.lower()):
        return "reply", None, text[len(REPLY_MARK):].strip()
    if text.lower().startswith("checklist") or len(re.findall(r"^\s*[-*] ", text, re.M)) >= 2:
        return "plan", None, text
    addressed = re.match(r"@(\w+)", text)
    if addressed and addressed.group(1) in CREW:
        return "job", addressed.group(1), text
    return "reply", None, text


class Crew:
    """One run of the Dispatcher and its crew on one ticket."""

    def __init__(self, llm: LLM, run_tool: RunTool,
                 agent_scope: Callable[[str], ContextManager] = lambda name: contextlib.nullcontext()):
        self.llm = llm
        self.run_tool = run_tool
        self.agent_scope = agent_scope
        self.retakes = 0

    def run(self, ticket: str) -> str:
        dispatcher = [{"role": "system", "content": system_prompt(DISPATCHER)},
                      {"role": "user", "content": TICKET_MARK + ticket}]
        crew = {c: [{"role": "system", "content": system_prompt(c)}] for c in CREW}
        for _ in range(MAX_DISPATCHER_TURNS):
            with self.agent_scope(DISPATCHER):
                message = self.llm(DISPATCHER, list(dispatcher), None)
            dispatcher.append(message)
            kind, member, text = classify_dispatcher_output(message.get("content") or "")
            if kind == "reply":
                return text
            if kind == "plan":
                if re.search(r"\btake \d", text):
                    self.retakes += 1
                continue
            assert member is not None  # a "job" always names its crew member
            dispatcher.append({"role": "user", "content": self._job(member, crew[member], text)})
        return f"Sorry, this ticket got no reply within {MAX_DISPATCHER_TURNS} turns."

    def _job(self, member: str, messages: list[dict], note: str) -> str:
        messages.append({"role": "user", "content": note})
        tools = tools_for(member)
        calls = 0
        with self.agent_scope(member):
            while True:
                message = self.llm(member, list(messages), tools)
                messages.append(message)
                if not message.get("tool_calls"):
                    content = (message.get("content") or "").strip()
                    return content if content.startswith(f"{member} here") else f"{member} here. {content}"
                if calls >= MAX_TOOL_CALLS_PER_JOB:
                    return f"{member} here. Stuck: {calls} tool calls and still no result."
                for call in message["tool_calls"]:
                    messages.append({"role": "tool", "tool_call_id": call["id"],
                                     "content": self._tool_content(call["function"])})
                    calls += 1

    def _tool_content(self, function: dict) -> str:
        try:
            arguments = json.loads(function.get("arguments") or "{}")
            if not isinstance(arguments, dict):
                raise ValueError("arguments must be a JSON object")
        except ValueError as exc:
            return f"ValueError: {function.get('name')}: unreadable arguments ({exc})"
        try:
            result = self.run_tool(function["name"], arguments)
        except Exception as exc:  # what the crew member sees; the app goes on
            return tool_error_text(exc)
        # Text answers (the till) stay text; structured ones are JSON with sorted keys, so a
        # result replayed from a recording gives the same message and the same fingerprint.
        return result if isinstance(result, str) else json.dumps(result, sort_keys=True)
