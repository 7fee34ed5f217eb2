"""What a person's own edit asks for, as the fulfilment judge's ``expect`` (judge.py).

A template intervention carries the expectation it was written from; a person's ``--edit``
does not, and judging it by the template's expectation would measure the template's fix, not
the edit. This reads the edit for the one thing the heuristic judge can check without an LLM:
which of the session's tools it asks the agent to call (and with which of the tool's
parameters; a parameter only one tool takes names that tool), which one it says not to call (or calls already done), or that it says the work
is not finished. An edit it cannot read this way gets ``{"action": "unknown"}``: its
fulfilment is unknown without an LLM judge, and the verdict says so.

Negation is read per clause ("do not call X", "X was already done" ask for no call of X; "X
has not been done yet" asks for it). The tool and parameter names come from the session (its
calls and recorded tool definitions), nothing else.
"""
from __future__ import annotations

import re

_NOT_YET = re.compile(r"\b(?:not|never) (?:yet )?(?:been )?(?:called|done|made|carried out|run|executed|performed)\b|"
                      r"\bstill (?:pending|to do|needs?|has to)\b|\b(?:is|are) (?:still )?pending\b", re.I)
_ALREADY = re.compile(r"\balready\b|\b(?:was|were|is|has been|have been) (?:done|carried out|made|completed|executed)\b", re.I)
_DONT = re.compile(r"\b(?:do not|don't|never|must not|should not|no need to|avoid|skip)\b", re.I)
_NOT_FINISHED = re.compile(r"\b(?:do not|don't|not) (?:yet )?(?:give|send|write)?\s*(?:the |a |your )?(?:final )?"
                           r"answer\b|\bnot (?:yet )?(?:finished|done|complete)\b|\bbefore (?:you )?(?:answer|give)", re.I)


def session_tools(doc: dict, definitions: list[dict] | None = None) -> dict[str, set[str]]:
    """Each tool the session called or declared, with its parameters."""
    tools: dict[str, set[str]] = {}
    for step in doc.get("steps") or []:
        for call in step.get("tool_calls") or []:
            if call.get("name"):
                args = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
                tools.setdefault(call["name"], set()).update(args)
    for d in definitions or []:
        fn = d.get("function", d)
        if fn.get("name"):
            tools.setdefault(fn["name"], set()).update(((fn.get("parameters") or {}).get("properties") or {}))
    return tools


def _named(name: str, clause: str) -> re.Match | None:
    spoken = r"[_ ]".join(re.escape(p) for p in name.split("_"))
    return re.search(rf"(?<![\w]){spoken}(?![\w])", clause, re.I)


def expectation(text: str, doc: dict, agent: str | None, definitions: list[dict] | None = None) -> dict:
    """The ``expect`` of a person's edit: call_tool / avoid_tool / continue, or unknown."""
    tools = session_tools(doc, definitions)
    wanted, avoided, unfinished = [], [], False
    for clause in re.split(r"(?<=\S)[.!?](?=\s|$)|[;\n]|,?\s+\bbut\b\s+", text or ""):
        if _NOT_FINISHED.search(clause):
            unfinished = True
        for name in tools:
            m = _named(name, clause)
            if m is None:
                continue
            if _NOT_YET.search(clause):
                wanted.append(name)
            elif _ALREADY.search(clause) or _DONT.search(clause[:m.start()]):
                avoided.append(name)
            else:
                wanted.append(name)
    wanted = [w for w in dict.fromkeys(wanted) if w not in avoided]
    if len(wanted) == 1:
        tool = wanted[0]
        argument = next((p for p in sorted(tools[tool]) if _named(p, text)), None)
        return {"agent": agent, "action": "call_tool", "tool": tool, "argument": argument}
    if not wanted and not avoided:
        # no tool named: a parameter that only one tool takes names the call ("the check number is ...")
        owners = {tool for tool, params in tools.items() for p in params if _named(p, text)}
        if len(owners) == 1:
            tool = owners.pop()
            argument = next(p for p in sorted(tools[tool]) if _named(p, text))
            return {"agent": agent, "action": "call_tool", "tool": tool, "argument": argument}
    if avoided and not wanted:
        return {"agent": agent, "action": "avoid_tool", "tool": avoided[0], "argument": None}
    if unfinished:
        return {"agent": agent, "action": "continue", "tool": None, "argument": None}
    return {"agent": agent, "action": "unknown", "tool": None, "argument": None}
