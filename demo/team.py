"""How the banking team talks: the orchestrator/worker loop, independent of how the LLM is
reached and how tools run.

:mod:`tracefix.demo.bank` drives it with the openai client and instrumented tools; the
scripted model drives the very same loop in-process to learn what a fault-free run of a task
looks like (which step is which), so the two can never drift apart.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
from typing import Any, Callable, ContextManager

from .tools import WORKER_TOOLS, required_arguments, tool_spec

ORCHESTRATOR = "Orchestrator"
WORKERS = tuple(WORKER_TOOLS)
AGENTS = (ORCHESTRATOR, *WORKERS)
MAX_ORCHESTRATOR_TURNS = 16
MAX_WORKER_TOOL_CALLS = 6

# llm(agent, messages, tools) -> assistant message dict {"role", "content", "tool_calls"?}
LLM = Callable[[str, list, "list | None"], dict]
# run_tool(name, arguments) -> JSON-serializable result; raises on bad input
RunTool = Callable[[str, dict], Any]

_ROLE_RE = re.compile(r"You are (?:the )?(Orchestrator|[A-Z][A-Za-z]*Agent)\b")

# The app's second version (`tracefix demo --regress` regresses version 1's failures on it):
# it checks a worker's tool call for its required arguments before running it, and re-asks the
# worker for a call that lacks one. Nothing else differs: the model and its faults do not change.
VERSION_ENV = "TRACEFIX_DEMO_AGENT_VERSION"


def agent_version() -> int:
    """The app's version this process runs: TRACEFIX_DEMO_AGENT_VERSION (1 when unset)."""
    raw = os.environ.get(VERSION_ENV, "").strip()
    if raw not in ("", "1", "2"):
        raise ValueError(f"{VERSION_ENV} is 1 or 2, not {raw!r}")
    return int(raw or 1)


def missing_arguments(function: dict) -> list[str]:
    """The required arguments a tool call leaves out (none when its arguments cannot be read:
    the tool says what is wrong with those)."""
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        return []
    if not isinstance(arguments, dict) or function.get("name") not in {t for ts in WORKER_TOOLS.values() for t in ts}:
        return []
    return [a for a in required_arguments(function["name"]) if arguments.get(a) in (None, "")]


def re_ask(name: str, missing: list[str]) -> str:
    """Version 2's request for a complete call, in the words a person would use."""
    words = " and ".join(f"the {a.replace('_', ' ')}" for a in missing)
    return (f"Your call of {name} left out {' and '.join(repr(a) for a in missing)}: include {words}, "
            f"from your instruction, and call {name} again.")


def system_prompt(agent: str) -> str:
    if agent == ORCHESTRATOR:
        workers = "; ".join(f"{w} (tools: {', '.join(t)})" for w, t in WORKER_TOOLS.items())
        return (f"You are the Orchestrator of a bank's support team. Your workers: {workers}. "
                "First write a numbered PLAN. Then instruct one worker at a time, starting your message "
                "with the worker's name, and give the identifiers and amounts it needs. Read each REPORT; "
                "if a step failed, write a REVISED PLAN and retry (at most twice). When done, reply "
                "'FINAL ANSWER: ...' addressed to the customer.")
    tools = ", ".join(WORKER_TOOLS[agent])
    return (f"You are {agent}, a worker of the bank's support team with the tools {tools}. Carry out the "
            "Orchestrator's instruction with your tools, one call at a time, then reply with a short "
            "REPORT of what you found or did. If the instruction does not say what to do, do nothing and "
            "report that you could not act.")


def role_in_system_prompt(messages: list[dict], pattern: re.Pattern[str]) -> str | None:
    """The agent a conversation belongs to: `pattern`'s first group in its system prompt (each
    demo app names its agents there its own way)."""
    for m in messages:
        if m.get("role") == "system":
            found = pattern.search(str(m.get("content") or ""))
            if found:
                return found.group(1)
    return None


def role_of(messages: list[dict]) -> str | None:
    return role_in_system_prompt(messages, _ROLE_RE)


def tools_for(agent: str) -> list[dict] | None:
    return [tool_spec(t) for t in WORKER_TOOLS[agent]] if agent in WORKER_TOOLS else None


def classify_orchestrator_output(text: str) -> tuple[str, str | None, str]:
    """(kind, worker, text): kind is "final", "plan" or "instruct". Robust to replaced
    outputs written by someone else: a plan is anything that looks like a numbered plan,
    an instruction anything naming a worker, everything else is the answer."""
    text = (text or "").strip()
    final = re.search(r"FINAL ANSWER:\s*(.*)", text, re.S | re.I)
    if final:
        return "final", None, final.group(1).strip()
    if re.match(r"(REVISED\s+)?PLAN\b", text, re.I) or (
            re.search(r"^\s*1\.", text, re.M) and re.search(r"^\s*2\.", text, re.M)):
        return "plan", None, text
    named = [(text.find(w), w) for w in WORKERS if w in text]
    if named:
        return "instruct", min(named)[1], text
    return "final", None, text


def tool_error_text(exc: BaseException) -> str:
    """"Type: message", the same text whether the tool ran or tracefix replayed its recorded
    error (a replayed non-builtin exception arrives as RecordedToolError("Type: message"))."""
    if type(exc).__name__ == "RecordedToolError":
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class Team:
    """One run of the Orchestrator and its workers on one task instruction."""

    def __init__(self, llm: LLM, run_tool: RunTool,
                 agent_scope: Callable[[str], ContextManager] = lambda name: contextlib.nullcontext(),
                 version: int | None = None):
        self.llm = llm
        self.run_tool = run_tool
        self.agent_scope = agent_scope
        self.replans = 0
        self.version = version if version is not None else agent_version()

    def run(self, instruction: str) -> str:
        orchestrator = [{"role": "system", "content": system_prompt(ORCHESTRATOR)},
                        {"role": "user", "content": f"Task: {instruction}"}]
        # Workers keep their conversation across instructions, as a stateful agent would.
        workers = {w: [{"role": "system", "content": system_prompt(w)}] for w in WORKERS}
        for _ in range(MAX_ORCHESTRATOR_TURNS):
            with self.agent_scope(ORCHESTRATOR):
                message = self.llm(ORCHESTRATOR, list(orchestrator), None)
            orchestrator.append(message)
            kind, worker, text = classify_orchestrator_output(message.get("content") or "")
            if kind == "final":
                return text
            if kind == "plan":
                if re.match(r"REVISED", text, re.I):
                    self.replans += 1
                continue
            report = self._run_worker(worker, workers[worker], text)
            orchestrator.append({"role": "user", "content": report})
        return f"I could not complete the request: the Orchestrator gave no answer in {MAX_ORCHESTRATOR_TURNS} turns."

    def _run_worker(self, worker: str, messages: list[dict], instruction: str) -> str:
        messages.append({"role": "user", "content": instruction})
        tools = tools_for(worker)
        calls = 0
        with self.agent_scope(worker):
            while True:
                message = self.llm(worker, list(messages), tools)
                messages.append(message)
                if not message.get("tool_calls"):
                    content = (message.get("content") or "").strip()
                    return content if content.startswith("REPORT") else f"REPORT from {worker}: {content}"
                if calls >= MAX_WORKER_TOOL_CALLS:
                    return f"REPORT from {worker}: FAILED. I gave up after {calls} tool calls."
                asks = []
                for call in message["tool_calls"]:
                    missing = missing_arguments(call["function"]) if self.version >= 2 else []
                    content = (json.dumps({"error": f"not run: missing {', '.join(missing)}"}) if missing
                               else self._tool_content(call["function"]))
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
                    asks += [re_ask(call["function"]["name"], missing)] if missing else []
                    calls += 1
                messages += [{"role": "user", "content": text} for text in asks]

    def _tool_content(self, function: dict) -> str:
        try:
            arguments = json.loads(function.get("arguments") or "{}")
            if not isinstance(arguments, dict):
                raise ValueError("tool arguments must be a JSON object")
        except ValueError as exc:
            return json.dumps({"error": f"{function.get('name')}: invalid arguments: {exc}"})
        try:
            result = self.run_tool(function["name"], arguments)
        except Exception as exc:  # a tool error is what the agent observes, not a crash of the app
            return json.dumps({"error": tool_error_text(exc)})
        # Sorted keys: a result replayed from a recording (whatever its key order) gives the
        # same message text, so the next LLM call's fingerprint matches the recorded one.
        return json.dumps(result, sort_keys=True)
