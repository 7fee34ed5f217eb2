"""What the recorded session shows about the step an intervention targets: the evidence a
template states its correction from.

The argument an error blames or a call left out (`argument_from_error`, `missing_required`),
where the instruction, the task or a tool result states its value (`value_in_context`), the
argument values that appear nowhere in what the agent had seen (`unsupported_arguments`), the
tools an instruction asks for and those called since (`instruction_tools`), and the results
read since (`results_since_instruction`); what the corrective action itself takes is read by
action_evidence.py. Readers only: interventions.py writes the text.
"""
from __future__ import annotations

import re

from tracefix.collector.document import content_text, session_task


ARGUMENT_PATTERNS = [
    re.compile(r"required (?:positional |keyword )?argument[s]?:?\s*'([A-Za-z_]\w*)'"),
    re.compile(r"missing (?:required )?(?:argument|parameter|field)s?:?\s*'?\"?([A-Za-z_]\w*)"),
    re.compile(r"(?:argument|parameter|field) '([A-Za-z_]\w*)'"),
    re.compile(r"KeyError: '([A-Za-z_]\w*)'"),
    re.compile(r"'([A-Za-z_]\w*)' is required"),
    re.compile(r"(?:invalid|wrong|bad)\s+(?:value\s+(?:for|of)\s+)?'?\"?([A-Za-z_]\w*)"),
]
FINAL_ANSWER = re.compile(r"\bfinal answer\b|\bFINAL\b|\banswer\s*:", re.I)


def argument_from_error(error: str | None, allowed: set[str] | None = None) -> str | None:
    """The argument an error message blames; restricted to the tool's parameters when known."""
    for pattern in ARGUMENT_PATTERNS:
        for m in pattern.finditer(error or ""):
            name = m.group(1)
            if name.lower() in {"value", "argument", "the", "a", "an", "input"}:
                continue
            if allowed and name not in allowed:
                continue
            return name
    return None


def tool_parameters(name: str | None, definitions: list[dict] | None) -> set[str]:
    for d in definitions or []:
        fn = d.get("function", d)
        if fn.get("name") == name:
            return set(((fn.get("parameters") or {}).get("properties") or {}).keys())
    return set()


def missing_required(call: dict, definitions: list[dict] | None) -> list[str]:
    """Required parameters of the called tool (from the request's tool definitions) it left out."""
    for d in definitions or []:
        fn = d.get("function", d)
        if fn.get("name") == call.get("name"):
            required = (fn.get("parameters") or {}).get("required") or []
            args = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
            return [r for r in required if r not in args]
    return []


def output_text(step: dict) -> str:
    return ((step.get("output_message") or {}).get("content") or "").strip()


def is_final_answer(step: dict, doc: dict) -> bool:
    if step.get("tool_calls"):
        return False
    last_of_session = step["index"] == (doc.get("steps") or [{}])[-1].get("index")
    return last_of_session or bool(FINAL_ANSWER.search(output_text(step)))


# A value-like token: an identifier with a digit in it, or a number.
VALUE = re.compile(r"(?<![\w.:-])(?:[A-Za-z][\w]*[-_:]?\d[\w-]*|\$?\d[\d,]*(?:\.\d+)?)(?![\w-])")


def values_in(text: str | None) -> list[str]:
    return [v.lstrip("$").rstrip(".,") for v in VALUE.findall(str(text or ""))]


def value_shape(value: str) -> str:
    """What kind of value a token is: its leading letters up to a separator, else up to the
    first digit (ACC-1002 -> ACC-, ord_e3d15 -> ORD_; "" for a number)."""
    prefix = re.match(r"[A-Za-z]+[-_:#]", value)
    return (prefix.group(0) if prefix else re.sub(r"\d.*$", "", value)).upper()


def latest_instruction(step: dict) -> str | None:
    """The newest user turn in the step's input: what the acting agent was asked to do."""
    for m in reversed(step.get("input_messages") or []):
        text = content_text(m.get("content")) if m.get("role") == "user" else ""
        if text and text.strip():
            return text
    return None


def context_text(step: dict, doc: dict) -> str:
    """Everything the acting agent had seen at the step: its input messages and the task."""
    parts = [content_text(m.get("content")) or "" for m in step.get("input_messages") or [] if m.get("role") != "system"]
    return "\n".join(parts + [str(session_task(doc) or "")])


def value_in_context(argument: str, step: dict, doc: dict) -> tuple[str, str] | None:
    """(value, where) for an argument the call left out: a tool result's field of that name,
    else an id-like token or a quoted value right after the argument's words in the
    instruction or the task."""
    for m in reversed(step.get("input_messages") or []):
        if m.get("role") == "tool":
            found = re.search(rf'"{re.escape(argument)}"\s*:\s*"?([^",}}]+)', content_text(m.get("content")) or "")
            if found:
                return found.group(1).strip(), "an earlier tool result"
    cues = [w for w in argument.lower().split("_") if w not in ("id", "number", "no", "num", "value") and len(w) > 2]
    for where, text in (("your instruction", latest_instruction(step)), ("the task", session_task(doc))):
        # the argument by name with its value ("amount": 20, amount=20, amount: 20)
        named = re.search(rf"""(?<![\w-])["'`]?{re.escape(argument)}["'`]?\s*[:=]\s*(?:"([^"\n]{{1,80}})"|([^\s",}}\]]+))""",
                          str(text or ""))
        if named:
            return (named.group(1) or named.group(2)).rstrip("."), where
        for cue in cues:
            # an id right after the argument's word ("check CHK-5001"), or a quoted value ("named "Ann"")
            found = re.search(rf"\b{re.escape(cue)}\w*\s+(?:\w+\s+)?(?:([A-Za-z][\w]*[-_]?\d[\w-]*)|\"([^\"]{{1,80}})\")",
                              str(text or ""), re.I)
            if found:
                return found.group(1) or found.group(2), where
    return None


def unsupported_arguments(call: dict, step: dict, doc: dict) -> list[tuple[str, str, str | None]]:
    """(argument, value, candidate) for each id-like argument value that appears nowhere in
    what the agent had seen, with the one value of the same shape its instruction gives and
    no other argument uses, when there is exactly one."""
    args = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
    context = context_text(step, doc)
    used = {str(v) for v in args.values()}
    offered = values_in(latest_instruction(step)) or values_in(session_task(doc))
    out = []
    for name, value in args.items():
        if not isinstance(value, str) or not re.search(r"\d", value) or not value_shape(value):
            continue
        if value in context:
            continue
        same = [v for v in dict.fromkeys(offered) if value_shape(v) == value_shape(value) and v not in used]
        out.append((name, value, same[0] if len(same) == 1 else None))
    return out


def results_since_instruction(step: dict) -> list[tuple[str, str]]:
    """(tool name, result text) of the tool results after the agent's latest instruction."""
    messages = step.get("input_messages") or []
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    names = {c.get("id"): (c.get("function") or {}).get("name") for m in messages for c in m.get("tool_calls") or []}
    return [(names.get(m.get("tool_call_id")) or "a tool", content_text(m.get("content")))
            for m in messages[last_user + 1:] if m.get("role") == "tool"]


def _known_tools(doc: dict, definitions: list[dict] | None) -> list[str]:
    names = [(d.get("function", d)).get("name") for d in definitions or []]
    names += [c.get("name") for s in doc.get("steps") or [] for c in s.get("tool_calls") or []]
    return [n for i, n in enumerate(names) if n and n not in names[:i]]


def instruction_tools(doc: dict, step: dict, definitions: list[dict] | None) -> tuple[list[str], list[str]]:
    """(tools the agent's latest instruction names, tools it called since that instruction)."""
    messages = step.get("input_messages") or []
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last_user is None:
        return [], []
    instruction = str(messages[last_user].get("content") or "")
    asked = [t for t in _known_tools(doc, definitions) if re.search(rf"\b{re.escape(t)}\b", instruction)]
    called = [(c.get("function") or {}).get("name") for m in messages[last_user + 1:] for c in m.get("tool_calls") or []]
    return asked, [c for c in called if c]


def downstream_failing_tool(doc: dict, step: dict) -> str | None:
    for s in doc.get("steps") or []:
        if s["index"] > step["index"]:
            for c in s.get("tool_calls") or []:
                if c.get("error"):
                    return c.get("name")
    return None
