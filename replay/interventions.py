"""Interventions: turn a hypothesis into one minimal edit at the message-passing layer.

Kinds (contracts §4): ``add_message`` (a correction appended to the input of step t),
``replace_output`` (the agent's output at t replaced, for an orchestrator instruction or
plan), ``replace_tool_result``. With an LLM the edit comes from the intervention prompt;
without one, from a template over the evidence: the acting agent, the failing tool, its
error, and the argument or action the evidence points to. A correction starts with
``CORRECTION for <agent>:`` and names its target, because agents (and the demo's scripted
model) act on an explicit, addressed instruction and ignore vague advice.

Every intervention also carries ``expect``: what the acting agent should visibly do at or
after t if it follows the edit. The heuristic fulfilment judge checks the replay against it.
An edit never contains the session's ground-truth answer (checked, not just asked for).
"""
from __future__ import annotations

import hashlib
import json
import re

from tracefix.analysis.units import is_coordinator
from tracefix.collector.document import session_task
from tracefix.replay import prompts

KINDS = ("add_message", "replace_output", "replace_tool_result")
CATEGORIES = ("orchestrator_instruction", "plan", "correction", "tool_result")

ARGUMENT_PATTERNS = [
    re.compile(r"required (?:positional |keyword )?argument[s]?:?\s*'([A-Za-z_]\w*)'"),
    re.compile(r"missing (?:required )?(?:argument|parameter|field)s?:?\s*'?\"?([A-Za-z_]\w*)"),
    re.compile(r"(?:argument|parameter|field) '([A-Za-z_]\w*)'"),
    re.compile(r"KeyError: '([A-Za-z_]\w*)'"),
    re.compile(r"'([A-Za-z_]\w*)' is required"),
    re.compile(r"(?:invalid|wrong|bad)\s+(?:value\s+(?:for|of)\s+)?'?\"?([A-Za-z_]\w*)"),
]
FINAL_ANSWER = re.compile(r"\bfinal answer\b|\bFINAL\b|\banswer\s*:", re.I)


def intervention_id(hypothesis_id: str, kind: str, text: str) -> str:
    return "iv-" + hashlib.sha1(f"{hypothesis_id}|{kind}|{text}".encode()).hexdigest()[:10]


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


def _output_text(step: dict) -> str:
    return ((step.get("output_message") or {}).get("content") or "").strip()


def _is_final_answer(step: dict, doc: dict) -> bool:
    if step.get("tool_calls"):
        return False
    last_of_session = step["index"] == (doc.get("steps") or [{}])[-1].get("index")
    return last_of_session or bool(FINAL_ANSWER.search(_output_text(step)))


def _quote(error: str | None) -> str:
    error = prompts.error_as_seen(error).replace("\n", " ")
    return error if len(error) <= 160 else error[:157] + "..."


def template(doc: dict, hypothesis: dict, definitions: list[dict] | None = None,
             memory_notes: list[str] | None = None) -> dict:
    """The deterministic intervention for a hypothesis, from the step and its evidence."""
    steps = {s["index"]: s for s in doc.get("steps") or []}
    step = steps[hypothesis["step"]]
    agent = hypothesis.get("agent") or step.get("agent") or "assistant"
    evidence = hypothesis.get("evidence") or {}
    calls = step.get("tool_calls") or []
    failing = next((c for c in calls if c.get("error")), None)
    evidence_tool = evidence.get("tool")
    call = failing or next((c for c in calls if c.get("name") == evidence_tool), None) or (calls[0] if calls else None)
    retry = " This was already tried once without effect, so follow it exactly." if memory_notes else ""

    if call is not None:
        tool = call.get("name")
        error = call.get("error") or (evidence.get("error") if evidence_tool in (None, tool) else None)
        missing = missing_required(call, definitions)
        # Only the tool's declared parameters can be blamed, when the schema was recorded.
        allowed = tool_parameters(tool, definitions) or None
        argument = (missing[0] if missing else None) or argument_from_error(error, allowed)
        problem = f"it failed with `{_quote(error)}`" if error else "it did not do what the task requires"
        if argument and argument in (call.get("arguments") or {}):
            fix = f"pass the correct value for the `{argument}` argument (check it against the task and the earlier tool results)"
        elif argument:
            fix = f"include the required `{argument}` argument, taken from the task"
        else:
            fix = "check every argument against the task and the earlier tool results before calling it"
        text = (f"CORRECTION for {agent}: your call to the tool `{tool}` at this point was wrong: {problem}. "
                f"Call `{tool}` again and {fix}. Do not skip `{tool}` and do not give a final answer before it succeeds.{retry}")
        expect = {"agent": agent, "action": "call_tool", "tool": tool, "argument": argument}
        return _finish(doc, hypothesis, step, "add_message", "correction", text, expect, "template")

    if _is_final_answer(step, doc):
        pending = evidence_tool or next((c.get("name") for s in steps.values() if s["index"] < step["index"]
                                         for c in s.get("tool_calls") or [] if c.get("error")), None)
        todo = f" (the `{pending}` action has not succeeded yet)" if pending else ""
        text = (f"CORRECTION for {agent}: do not give the final answer yet{todo}. "
                f"First complete every action the task requires with the tools, check their results, "
                f"and only then give the final answer.{retry}")
        expect = {"agent": agent, "action": "continue", "tool": pending, "argument": None}
        return _finish(doc, hypothesis, step, "add_message", "correction", text, expect, "template")

    if is_coordinator(agent):
        # An orchestrator's instruction at t: hold it to the plan line it should carry out,
        # which names the worker and the action (and any failing tool downstream).
        plan_line = _plan_line_for(doc, step)
        target = evidence_tool or _downstream_failing_tool(doc, step)
        parts = [f"CORRECTION for {agent}: your instruction at this step was wrong or too vague."]
        if plan_line:
            parts.append(f"It must carry out this step of your plan: \"{plan_line}\".")
        parts.append("Instruct the responsible worker precisely, with every identifier and amount it needs.")
        if target:
            parts.append(f"The `{target}` action must be carried out correctly.")
        text = " ".join(parts) + retry
        expect = {"agent": agent, "action": "instruct", "tool": target, "argument": None}
        return _finish(doc, hypothesis, step, "add_message", "correction", text, expect, "template")

    # A worker's text at t: either it skipped the tool its instruction asks for, or it
    # misread the result of the tool it just called.
    asked, called = _instruction_tools(doc, step, definitions)
    skipped = next((t for t in asked if t not in called), None)
    if skipped:
        text = (f"CORRECTION for {agent}: you did not call `{skipped}`, which your instruction requires. "
                f"Call `{skipped}` now with the identifiers and amounts from the instruction, then report "
                f"its result.{retry}")
        expect = {"agent": agent, "action": "call_tool", "tool": skipped, "argument": None}
        return _finish(doc, hypothesis, step, "add_message", "correction", text, expect, "template")
    # Every result read since the instruction is a suspect; name them all (most recent first).
    read = list(dict.fromkeys(reversed(called))) or ([evidence_tool] if evidence_tool else [])
    tool = read[0] if read else None
    named = (("the results of " + " and ".join(f"`{t}`" for t in read)) if len(read) > 1
             else f"the result of `{tool}`" if tool else "the last tool result")
    text = (f"CORRECTION for {agent}: you misread {named}. Read {named} again carefully, field by field, "
            f"and report exactly what it says.{retry}")
    expect = {"agent": agent, "action": "reread", "tool": tool, "argument": None}
    return _finish(doc, hypothesis, step, "add_message", "correction", text, expect, "template")


def _known_tools(doc: dict, definitions: list[dict] | None) -> list[str]:
    names = [(d.get("function", d)).get("name") for d in definitions or []]
    names += [c.get("name") for s in doc.get("steps") or [] for c in s.get("tool_calls") or []]
    return [n for i, n in enumerate(names) if n and n not in names[:i]]


def _instruction_tools(doc: dict, step: dict, definitions: list[dict] | None) -> tuple[list[str], list[str]]:
    """(tools the agent's latest instruction names, tools it called since that instruction)."""
    messages = step.get("input_messages") or []
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last_user is None:
        return [], []
    instruction = str(messages[last_user].get("content") or "")
    asked = [t for t in _known_tools(doc, definitions) if re.search(rf"\b{re.escape(t)}\b", instruction)]
    called = [(c.get("function") or {}).get("name") for m in messages[last_user + 1:] for c in m.get("tool_calls") or []]
    return asked, [c for c in called if c]


PLAN_ITEM = re.compile(r"^\s*(\d+)[.)]\s*(.+)$", re.M)


def _plan_line_for(doc: dict, step: dict) -> str | None:
    """The numbered line of the current plan that the orchestrator's instruction at t should
    carry out: the plan is the latest planning output before t, and the k-th instruction
    after it carries out its k-th line."""
    from tracefix.replay.trials import looks_like_plan

    agent = step.get("agent")
    plan, instructions = None, 0
    for s in doc.get("steps") or []:
        if s["index"] > step["index"]:
            break
        if s.get("agent") != agent:
            continue
        if looks_like_plan(s, None):
            plan, instructions = _output_text(s), 0
        elif not s.get("tool_calls"):
            instructions += 1
    if not plan or instructions == 0:
        return None
    items = {int(n): line.strip() for n, line in PLAN_ITEM.findall(plan)}
    return items.get(instructions)


def _downstream_failing_tool(doc: dict, step: dict) -> str | None:
    for s in doc.get("steps") or []:
        if s["index"] > step["index"]:
            for c in s.get("tool_calls") or []:
                if c.get("error"):
                    return c.get("name")
    return None


def _finish(doc: dict, hypothesis: dict, step: dict, kind: str, category: str, text: str,
            expect: dict, source: str, tool_call_id: str | None = None) -> dict:
    if kind != "add_message":
        # A replaced output or tool result is applied by the replay itself; what can be
        # checked is that it was applied and the agents went on from it.
        expect = {"agent": expect.get("agent"), "action": "replaced", "tool": expect.get("tool"), "argument": None}
    iv = {"id": intervention_id(hypothesis["id"], kind, text), "step": step["index"], "kind": kind,
          "category": category, "text": text, "role": "user", "agent": hypothesis.get("agent") or step.get("agent"),
          "before": _before(step, kind, tool_call_id), "expect": expect, "source": source}
    if tool_call_id:
        iv["tool_call_id"] = tool_call_id
    return iv


def _before(step: dict, kind: str, tool_call_id: str | None) -> str:
    if kind == "replace_tool_result":
        call = next((c for c in step.get("tool_calls") or [] if c.get("id") == tool_call_id), {})
        return json.dumps(call.get("result"), default=str)
    if kind == "replace_output":
        return prompts.step_content(step, limit=2000)
    messages = step.get("input_messages") or []
    return (messages[-1].get("content") or "") if messages else ""


def leaks_ground_truth(text: str, ground_truth) -> bool:
    """True when the edit states the ground-truth answer (or any substantial value of it)."""
    if ground_truth in (None, "", [], {}):
        return False
    values = []

    def collect(value):
        if isinstance(value, dict):
            for v in value.values():
                collect(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                collect(v)
        elif value is not None and not isinstance(value, bool):
            values.append(str(value))

    collect(ground_truth)
    lowered = text.lower()
    return any(len(v) >= 3 and v.lower() in lowered for v in values)


def from_llm(llm, doc: dict, hypothesis: dict, memory_notes: list[str]) -> dict:
    steps = doc.get("steps") or []
    by_index = {s["index"]: s for s in steps}
    step = by_index[hypothesis["step"]]
    context = [s for s in steps if hypothesis["step"] - 2 <= s["index"] < hypothesis["step"]]
    system, user = prompts.intervention(session_task(doc), hypothesis, context, step,
                                        hypothesis.get("evidence") or {}, memory_notes)
    answer = llm.complete_json("intervention", system, user)
    kind = answer.get("kind") or "add_message"
    if kind not in KINDS:
        raise ValueError(f"unknown intervention kind {kind!r}")
    text = answer.get("text") or answer.get("replacement_text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("intervention answer has no text")
    if leaks_ground_truth(text, doc.get("ground_truth")):
        raise ValueError("intervention text states the ground-truth answer")
    category = answer.get("category") if answer.get("category") in CATEGORIES else (
        "tool_result" if kind == "replace_tool_result" else "correction" if kind == "add_message" else "orchestrator_instruction")
    tool_call_id = answer.get("tool_call_id")
    if kind == "replace_tool_result":
        ids = [c.get("id") for c in step.get("tool_calls") or []]
        if tool_call_id not in ids:
            if not ids:
                raise ValueError("replace_tool_result at a step without tool calls")
            tool_call_id = ids[0]
    # The LLM may move the edit (e.g. onto the instruction before a worker's mistake) but
    # only within the recorded steps.
    moved = answer.get("step", step["index"])
    target = by_index.get(int(moved)) if isinstance(moved, (int, str)) and str(moved).lstrip("-").isdigit() else None
    target = target or step
    base = template(doc, {**hypothesis, "step": target["index"]}, None, memory_notes)
    return _finish(doc, {**hypothesis, "step": target["index"]}, target, kind, category, text.strip(),
                   base["expect"], "llm", tool_call_id if kind == "replace_tool_result" else None)


def generate(doc: dict, hypothesis: dict, llm=None, *, definitions: list[dict] | None = None,
             memory_notes: list[str] | None = None) -> tuple[dict, str, str | None]:
    """(intervention, stage label "llm"|"fallback", note on a fallback or None)."""
    note = None
    if llm is not None:
        try:
            return from_llm(llm, doc, hypothesis, memory_notes or []), "llm", None
        except Exception as exc:
            note = f"intervention for step {hypothesis['step']}: LLM answer unusable ({exc}); used a template"
    return template(doc, hypothesis, definitions, memory_notes), "fallback", note
