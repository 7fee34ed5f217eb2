"""What the scripted team models (`bank-agent` in :mod:`tracefix.demo.policy`, `warehouse-crew`
in :mod:`tracefix.demo.warehouse_model`) share with the fault injector (:mod:`tracefix.demo.faults`):

- the fault kinds a model can host (:data:`KINDS`);
- a model's answer for one step (:class:`Decision`): the correct message, and the faulty
  variants this step could host, each with what an edit must carry to prevent it;
- the messages a model writes (text, one tool call) and the tool calls it reads back from a
  conversation (:func:`tool_calls`);
- a task's fault-free run as the injector sees it (:class:`StepInfo`, :func:`fault_free_run`).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from .edit_reader import Asks
from .needs import Need

KINDS = ("wrong_argument", "missing_argument", "skipped_action", "wrong_instruction",
         "vague_instruction", "misread_tool_result", "early_final_answer")


@dataclass
class Variant:
    message: dict
    detail: str


# kind -> (the faulty variant, what an edit must carry to prevent it)
Hosts = dict[str, tuple[Callable[[], Variant], Need]]


@dataclass
class Decision:
    agent: str | None
    phase: str  # plan | replan | instruct | final | tool | report | chat
    message: dict
    tool: str | None = None
    hosts: Hosts = field(default_factory=dict)  # the faults this step could host
    edit: Asks | None = None  # what the edits this step read ask for, when it read them


def text_message(content: str) -> dict:
    return {"role": "assistant", "content": content}


def tool_call_message(name: str, arguments: dict, call_id: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def call_id(messages: list[dict], name: str) -> str:
    # Derived from the conversation so identical contexts give identical ids.
    digest = hashlib.sha256(json.dumps([len(messages), name, messages[-1].get("content")],
                                       default=str).encode()).hexdigest()
    return f"call_{digest[:12]}"


@dataclass
class Call:
    name: str
    args: dict
    result: Any
    error: str | None


def _error_object(result: Any) -> str | None:
    """The bank's tools refuse with `{"error": ...}` and nothing else."""
    return result.get("error") if isinstance(result, dict) and set(result) == {"error"} else None


def tool_calls(messages: list[dict], refusal: Callable[[Any], str | None] = _error_object) -> list[Call]:
    """The tool calls of a conversation with their parsed results; `refusal` says which results
    are a tool saying no (each demo app's tools refuse their own way)."""
    results = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
    calls = []
    for m in messages:
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function", {})
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                args = {}
            if not isinstance(args, dict):  # '[1]', '"x"': a call's arguments are an object or nothing
                args = {}
            raw = results.get(tc.get("id"))
            try:
                result = json.loads(raw) if raw is not None else None
            except ValueError:
                result = raw
            error = refusal(result)
            calls.append(Call(fn.get("name"), args, None if error else result, error))
    return calls


@dataclass(frozen=True)
class StepInfo:
    step: int
    agent: str | None
    phase: str
    hosts: dict  # kind -> target names


# an app's team loop: calls `llm(agent, messages, tools)` for every LLM step of one task
TeamRun = Callable[[Callable[[str, list, "list | None"], dict]], Any]


def fault_free_run(decide: Callable[..., Decision], run_team: TeamRun) -> tuple[StepInfo, ...]:
    """Every LLM step of a task's fault-free run (the team played in-process by `decide`,
    which passes over edits): agent, phase and which faults it can host."""
    steps: list[StepInfo] = []

    def llm(agent: str, messages: list, tools: list | None) -> dict:
        decision = decide(messages, tools)
        steps.append(StepInfo(len(steps), decision.agent, decision.phase,
                              {k: tuple(need.target) for k, (_, need) in decision.hosts.items()}))
        return decision.message

    run_team(llm)
    return tuple(steps)


def next_other(pool: list[str], value: str, avoid: set[str]) -> str:
    """The id after `value` in `pool` (cyclically; from the start when `value` is not in it) that
    is neither `value` nor in `avoid`: a plausible wrong id of the same kind. `value` itself when
    there is none."""
    start = pool.index(value) if value in pool else -1
    for offset in range(1, len(pool) + 1):
        candidate = pool[(start + offset) % len(pool)]
        if candidate != value and candidate not in avoid:
            return candidate
    return value
