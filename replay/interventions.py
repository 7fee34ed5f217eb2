"""Interventions: turn a hypothesis into one minimal edit at the message-passing layer.

Kinds (contracts §4): ``add_message`` (a message added to the input of step t),
``replace_output`` (the agent's output at t replaced, for an orchestrator instruction or
plan), ``replace_tool_result``. With an LLM the edit comes from the intervention prompt;
without one, from a template over the evidence in the session.

A template is written as advice any agent can act on: it says what went wrong at this step
in the recorded run and what the right value or action is, quoting where the session shows
it (the instruction or task the agent was given, the results its tools returned, the plan).
It relies on no prefix or keyword: an agent that reads it learns the value, not a code word.
A value the evidence cannot pin down is pointed to ("take it from your instruction: ...").
What the session shows (the blamed argument, its value, the plan line, the results read) is
read by intervention_evidence.py; this module writes the text and the edit from it.

Every intervention also carries ``expect``: what the acting agent should visibly do at or
after t if it follows the edit. The heuristic fulfilment judge checks the replay against it.
An edit never contains the session's ground-truth answer (checked, not just asked for).
"""
from __future__ import annotations

import hashlib
import json

from tracefix.analysis.roles import is_coordinator
from tracefix.analysis.values import scalar_values
from tracefix.collector.document import session_task
from tracefix.replay import prompts
from tracefix.replay.intervention_evidence import (argument_from_error, context_text, downstream_failing_tool,
                                                   instruction_tools, is_final_answer, latest_instruction,
                                                   missing_required, output_text, plan_line_for,
                                                   results_since_instruction, tool_parameters, unsupported_arguments,
                                                   value_in_context, value_shape, values_in)

KINDS = ("add_message", "replace_output", "replace_tool_result")
CATEGORIES = ("orchestrator_instruction", "plan", "correction", "tool_result")


def intervention_id(hypothesis_id: str, kind: str, text: str) -> str:
    return "iv-" + hashlib.sha1(f"{hypothesis_id}|{kind}|{text}".encode()).hexdigest()[:10]


def _quote(error: str | None) -> str:
    error = prompts.error_as_seen(error).replace("\n", " ")
    return error if len(error) <= 160 else error[:157] + "..."


def _excerpt(text: str | None, limit: int = 220) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
    retry = " An earlier, vaguer correction at this point was not enough, so be exact." if memory_notes else ""
    instruction = latest_instruction(step)
    quoted = f' Your instruction says: "{_excerpt(instruction)}"' if instruction else ""

    if call is not None:
        tool = call.get("name")
        error = call.get("error") or (evidence.get("error") if evidence_tool in (None, tool) else None)
        missing = missing_required(call, definitions)
        # Only the tool's declared parameters can be blamed, when the schema was recorded.
        allowed = tool_parameters(tool, definitions) or None
        argument = (missing[0] if missing else None) or argument_from_error(error, allowed)
        args = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
        failed = f" failed with `{_quote(error)}`" if error else ""  # the verb of "the call ... at this point"
        if argument and argument not in args:
            found = value_in_context(argument, step, doc)
            fix = (f"Pass {argument} = {found[0]}, as {found[1]} states." if found
                   else f"Take the value of {argument} from your instruction or the earlier tool results.")
            text = f"In the recorded run, the call to `{tool}` at this point left out {argument}{failed and ' and' + failed}. {fix}{quoted}"
        else:
            wrong = unsupported_arguments(call, step, doc)
            if argument and argument in args:
                wrong = [w for w in wrong if w[0] == argument] or [(argument, args[argument], None)]
            if wrong:
                said = "; ".join(f"{name} was {value}, which is wrong: it appears nowhere in what you were given"
                                 + (f", and the right value is {candidate}" if candidate else "")
                                 for name, value, candidate in wrong)
                # Where the instruction or the task names the right value, say it outright.
                stated = [(name, found) for name, value, candidate in wrong if candidate is None
                          for found in [value_in_context(name, step, doc)] if found and found[0] != str(value)]
                fixes = "".join(f" Pass {name} = {found[0]}, as {found[1]} states." for name, found in stated)
                argument = argument or wrong[0][0]
                text = f"In the recorded run, the call to `{tool}` at this point{failed}: {said}.{fixes}{quoted}"
            else:
                text = (f"In the recorded run, the call to `{tool}` at this point{failed or ' did not do what the task requires'}. "
                        f"Check every argument against your instruction and the earlier tool results before calling it.{quoted}")
        text += " Do not report the action as done before the call succeeds." + retry
        expect = {"agent": agent, "action": "call_tool", "tool": tool, "argument": argument}
        return _finish(doc, hypothesis, step, "add_message", "correction", text, expect, "template")

    if is_final_answer(step, doc):
        pending = evidence_tool or next((c.get("name") for s in steps.values() if s["index"] < step["index"]
                                         for c in s.get("tool_calls") or [] if c.get("error")), None)
        plan_line = plan_line_for(doc, step)
        todo = (f' Step "{plan_line}" of your plan has not been carried out yet.' if plan_line
                else f" The `{pending}` action has not succeeded yet." if pending else "")
        text = (f"The task is not finished, so do not give the final answer yet.{todo} "
                f"Carry out every remaining step of the plan first, check the results, and only then answer. "
                f'The task: "{_excerpt(session_task(doc))}"{retry}')
        expect = {"agent": agent, "action": "continue", "tool": pending, "argument": None}
        return _finish(doc, hypothesis, step, "add_message", "correction", text, expect, "template")

    if is_coordinator(agent):
        # An orchestrator's instruction at t: hold it to the plan line it should carry out and
        # to the values the task and the reports give.
        plan_line = plan_line_for(doc, step)
        target = evidence_tool or downstream_failing_tool(doc, step)
        original = output_text(step)
        context = context_text(step, doc)
        strays = [v for v in dict.fromkeys(values_in(original)) if value_shape(v) and v not in context]
        parts = []
        if plan_line:
            parts.append(f'The instruction at this step must carry out step "{plan_line}" of your plan.')
        if strays:
            parts.append(f"In the recorded run it used {', '.join(strays)}, which is wrong: it appears in no report "
                         "and not in the task.")
        elif not values_in(original):
            parts.append("In the recorded run it named no account, amount or identifier, so the worker could not act.")
        parts.append("Give the worker the action and every identifier and amount it needs, each checked against "
                     f'what the workers reported and the task: "{_excerpt(session_task(doc))}"')
        text = " ".join(parts) + retry
        expect = {"agent": agent, "action": "instruct", "tool": target, "argument": None}
        return _finish(doc, hypothesis, step, "add_message", "correction", text, expect, "template")

    # A worker's text at t: either it skipped the tool its instruction asks for, or it
    # misread the result of the tool it just called.
    asked, called = instruction_tools(doc, step, definitions)
    skipped = next((t for t in asked if t not in called), None)
    if skipped:
        text = (f"In the recorded run you reported the work as done here, but `{skipped}`, which your instruction "
                f"asks for, was never called: the action has not been carried out yet. Call it now with the values "
                f"from your instruction, then report its result.{quoted}{retry}")
        expect = {"agent": agent, "action": "call_tool", "tool": skipped, "argument": None}
        return _finish(doc, hypothesis, step, "add_message", "correction", text, expect, "template")
    if not called and instruction:
        text = (f"In the recorded run you answered here without calling any tool since your instruction: what it "
                f"asks for has not been carried out yet. Carry it out with your tools and the "
                f"values from your instruction, then report the results.{quoted}{retry}")
        expect = {"agent": agent, "action": "call_tool", "tool": evidence_tool, "argument": None}
        return _finish(doc, hypothesis, step, "add_message", "correction", text, expect, "template")
    # Every result read since the instruction is a suspect; quote them (most recent first).
    read = list(dict.fromkeys(reversed(called))) or ([evidence_tool] if evidence_tool else [])
    tool = read[0] if read else None
    results = results_since_instruction(step)
    shown = "; ".join(f"`{name}` returned {_excerpt(content, 300)}" for name, content in results[-2:])
    named = " and ".join(f"`{t}`" for t in read) if read else "your tools"
    text = (f"In the recorded run your report here did not match what {named} returned. "
            + (f"What the tools returned: {shown}. " if shown else "")
            + f"Report exactly those values, field by field.{retry}")
    expect = {"agent": agent, "action": "reread", "tool": tool, "argument": None}
    return _finish(doc, hypothesis, step, "add_message", "correction", text, expect, "template")


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
    lowered = text.lower()
    return any(len(v) >= 3 and v.lower() in lowered for v in scalar_values(ground_truth))


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
