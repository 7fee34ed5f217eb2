"""Interventions: turn a hypothesis into one minimal edit at the message-passing layer.

Kinds (contracts §4): ``add_message`` (a message added to the input of step t),
``replace_output`` (the agent's output at t replaced, for an orchestrator instruction or
plan), ``replace_tool_result``. With an LLM the edit comes from the intervention prompt;
without one, from a template over the evidence in the session.

A template states the corrective action first, in plain words, from the session's evidence:
the tool to call (or the worker to instruct and with which tool), each argument with its value,
and where the session states that value ("Call `transfer` now with amount = 25.50,
from_account = ACC-1013 and to_account = ACC-1011, as the instruction you were given at step 9
gives them"; "Instruct PaymentsAgent to call `deposit_check` with account_id = ACC-1014 ...
The result of `get_accounts` at step 3 gives ACC-1014 as savings"); then what went wrong in the
recorded run, and the instruction quoted. It relies on no prefix or keyword: an agent that reads
it learns the action and the value, not a code word. Only a value the session does not state is
left to the agent ("take its value from your instruction or the earlier tool results").
What the session shows is read by intervention_evidence.py (the blamed argument, values seen
nowhere, the results read) and action_evidence.py (each argument's value and its source, the
plan item, the worker and tool an instruction is for, the fields a report got wrong); this
module writes the text and the edit from it.

Every intervention also carries ``expect``: what the acting agent should visibly do at or
after t if it follows the edit. The heuristic fulfilment judge checks the replay against it.
An edit never contains the session's ground-truth answer (checked, not just asked for).
"""
from __future__ import annotations

import hashlib
import json

from tracefix.analysis.values import scalar_values
from tracefix.collector.document import session_task
from tracefix.replay import prompts
from tracefix.replay.action_evidence import (arguments_in, coordinates, instructed, misreported, plan_item,
                                             receiver, reported_value, said_at)
from tracefix.replay.intervention_evidence import (argument_from_error, context_text, downstream_failing_tool,
                                                   instruction_tools, is_final_answer, latest_instruction,
                                                   missing_required, output_text, results_since_instruction,
                                                   tool_parameters, unsupported_arguments, value_in_context,
                                                   value_shape, values_in)

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


def _values(pairs: dict[str, str]) -> str:
    said = [f"{name} = {value}" for name, value in pairs.items()]
    return ", ".join(said[:-1]) + " and " + said[-1] if len(said) > 1 else "".join(said)


def _from_instruction(doc: dict, step: dict) -> str:
    """Where the acting agent's instruction came from, in words: the step that wrote it."""
    at = said_at(doc, latest_instruction(step), step["index"])
    return f"the instruction you were given at step {at}" if at is not None else "your instruction"


def template(doc: dict, hypothesis: dict, definitions: list[dict] | None = None,
             memory_notes: list[str] | None = None, session_definitions: dict | None = None) -> dict:
    """The deterministic intervention for a hypothesis, from the step and its evidence: the
    corrective action first (the tool, its arguments, their values and where the session
    states them), then what went wrong in the recorded run."""
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
    source = _from_instruction(doc, step)

    if call is not None:
        text, expect = _call_fix(doc, step, call, evidence, definitions, source, quoted)
        return _finish(doc, hypothesis, step, "add_message", "correction", text + retry, {"agent": agent, **expect},
                       "template")

    if is_final_answer(step, doc):
        pending = evidence_tool or next((c.get("name") for s in steps.values() if s["index"] < step["index"]
                                         for c in s.get("tool_calls") or [] if c.get("error")), None)
        item = plan_item(doc, step)
        worker, tool, _ = instructed(doc, step, item, session_definitions) if item else (None, None, {})
        pending = pending or tool
        todo = (f' "{item}" from your plan has not been carried out yet' if item
                else f" the `{pending}` action has not succeeded yet" if pending else " the task is not finished")
        then = (f" Instruct {worker} to carry it out" + (f" with `{pending}`" if pending else "") + " first"
                if worker else " Carry out every remaining step of the plan first")
        text = (f"Do not give the final answer yet:{todo}.{then}, check the results, and only then answer. "
                f'The task: "{_excerpt(session_task(doc))}"{retry}')
        expect = {"agent": agent, "action": "continue", "tool": pending, "argument": None}
        return _finish(doc, hypothesis, step, "add_message", "correction", text, expect, "template")

    if coordinates(doc, agent):
        text, target = _instruction_fix(doc, step, evidence_tool, session_definitions)
        expect = {"agent": agent, "action": "instruct", "tool": target, "argument": None}
        return _finish(doc, hypothesis, step, "add_message", "correction", text + retry, expect, "template")

    # A worker's text at t: either it skipped the tool its instruction asks for, or it
    # misread the result of the tool it just called.
    asked, called = instruction_tools(doc, step, definitions)
    skipped = next((t for t in asked if t not in called), None)
    if skipped or (not called and instruction):
        tool = skipped or evidence_tool
        given = arguments_in(instruction, tool, definitions, doc) if tool else {}
        action = f"Call `{tool}` now" if tool else "Carry out what your instruction asks with your tools now"
        action += (f" with {_values(given)}, as {source} gives them" if given
                   else f", with the values {source} gives")
        said = (f"you reported the work as done here, but `{skipped}`, which your instruction asks for, was never "
                "called" if skipped else "you answered here without calling any tool since your instruction")
        text = (f"{action}, then report its result. In the recorded run {said}: the action has not been carried "
                f"out yet.{quoted}{retry}")
        expect = {"agent": agent, "action": "call_tool", "tool": tool, "argument": None}
        return _finish(doc, hypothesis, step, "add_message", "correction", text, expect, "template")
    # Every result read since the instruction is a suspect; quote them (most recent first).
    read = list(dict.fromkeys(reversed(called))) or ([evidence_tool] if evidence_tool else [])
    tool = read[0] if read else None
    results = results_since_instruction(step)
    wrong = misreported(results, output_text(step))
    shown = "; ".join(f"`{name}` returned {_excerpt(content, 300)}" for name, content in results[-2:])
    named = " and ".join(f"`{t}`" for t in read) if read else "your tools"
    text = ((f"Report {', '.join(wrong)}, as {named} returned. " if wrong else "")
            + f"In the recorded run your report here did not match what {named} returned. "
            + (f"What the tools returned: {shown}. " if shown else "")
            + f"Report exactly those values, field by field.{retry}")
    expect = {"agent": agent, "action": "reread", "tool": tool, "argument": None}
    return _finish(doc, hypothesis, step, "add_message", "correction", text, expect, "template")


def _call_fix(doc: dict, step: dict, call: dict, evidence: dict, definitions: list[dict] | None, source: str,
              quoted: str) -> tuple[str, dict]:
    """The fix of a tool call at t: the call again with the right value of the argument it got
    wrong or left out, where the session states that value; then what the recorded call did."""
    tool = call.get("name")
    error = call.get("error") or (evidence.get("error") if evidence.get("tool") in (None, tool) else None)
    missing = missing_required(call, definitions)
    # Only the tool's declared parameters can be blamed, when the schema was recorded.
    allowed = tool_parameters(tool, definitions) or None
    argument = (missing[0] if missing else None) or argument_from_error(error, allowed)
    args = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
    given = arguments_in(latest_instruction(step), tool, definitions, doc)
    failed = f" failed with `{_quote(error)}`" if error else ""  # the verb of "the call ... at this point"

    def stated(name: str) -> tuple[str, str] | None:
        found = value_in_context(name, step, doc)
        if found and found[1] == "your instruction":
            found = (found[0], source)
        return found or ((given[name], source) if name in given else None)

    if argument and argument not in args:
        found = stated(argument)
        fix = (f"Call `{tool}` again with {argument} = {found[0]}, as {found[1]} states." if found
               else f"Call `{tool}` again with {argument}: take its value from your instruction or the earlier "
                    "tool results.")
        said = f"In the recorded run, the call to `{tool}` at this point left out {argument}{failed and ' and' + failed}."
        text = f"{fix} {said}{quoted}"
    else:
        wrong = unsupported_arguments(call, step, doc)
        if argument and argument in args:
            wrong = [w for w in wrong if w[0] == argument] or [(argument, args[argument], None)]
        if wrong:
            right = {name: candidate or (found[0] if found and found[0] != str(value) else None)
                     for name, value, candidate in wrong for found in [stated(name)]}
            right = {name: value for name, value in right.items() if value}
            fix = (f"Call `{tool}` again with {_values(right)}, as {source} states. " if right else "")
            said = "; ".join(f"{name} was {value}, which is wrong: it appears nowhere in what you were given"
                             for name, value, _ in wrong)
            argument = argument or next(iter(right), wrong[0][0])
            text = f"{fix}In the recorded run, the call to `{tool}` at this point{failed}: {said}.{quoted}"
        else:
            fix = (f"Call `{tool}` again with {_values(given)}, as {source} states, and check every other argument "
                   "against it and the earlier tool results." if given else
                   f"Check every argument of `{tool}` against your instruction and the earlier tool results, "
                   "then call it again.")
            text = (f"{fix} In the recorded run, the call to `{tool}` at this point"
                    f"{failed or ' did not do what the task requires'}.{quoted}")
    text += " Do not report the action as done before the call succeeds."
    return text, {"action": "call_tool", "tool": tool, "argument": argument}


def _instruction_fix(doc: dict, step: dict, evidence_tool: str | None,
                     session_definitions: dict | None) -> tuple[str, str | None]:
    """An orchestrator's instruction at t: the worker, the tool and the values the plan item it
    carries out asks for, each from where the session states it (the plan, the task, a report)."""
    item = plan_item(doc, step, receiver(doc, step))
    worker, tool, recorded = instructed(doc, step, item, session_definitions)
    tool = tool or evidence_tool or downstream_failing_tool(doc, step)
    original = output_text(step)
    context = context_text(step, doc)
    strays = [v for v in dict.fromkeys(values_in(original)) if value_shape(v) and v not in context]
    planned = values_in(item)
    right: dict[str, str] = {}
    sources: list[str] = []
    for name, value in recorded.items():
        value = str(value)
        if not value_shape(value) or value in planned:
            continue
        same = [v for v in planned if value_shape(v) == value_shape(value)]
        if len(same) == 1:
            right[name] = same[0]
            sources.append(f"your plan names {same[0]} for it")
        elif value not in strays:
            found = reported_value(doc, step, value_shape(value), item, value)
            if found:
                right[name] = found[0]
                sources.append(f"{found[2]} at step {found[1]} gives {found[0]} as {' '.join(found[3])}")
    named = [v for v in planned if value_shape(v)]
    if not recorded and tool:
        definitions = [d for defs in (session_definitions or {}).values() for d in defs or []]
        right = arguments_in(item, tool, definitions, doc)
    parts = []
    if worker and (tool or item):
        parts.append(f"Instruct {worker} to " + (f"call `{tool}`" if tool else f'carry out "{item}"')
                     + (f" with {_values(right)}" if right else f", naming {', '.join(named)}," if named else "")
                     + (f' to carry out "{item}" from your plan' if item and tool else " from your plan" if item else "")
                     + ".")
    elif item:
        parts.append(f'The instruction at this step must carry out "{item}" from your plan.')
    parts += [said[0].upper() + said[1:] + "." for said in sources]
    if strays:
        parts.append(f"In the recorded run it used {', '.join(strays)}, which is wrong: it appears in no report "
                     "and not in the task.")
    elif not values_in(original):
        parts.append("In the recorded run it named no action, account, amount or identifier, so the worker could "
                     "not act.")
    parts.append(f'Give {worker or "the worker"} every identifier and amount it needs; the task: '
                 f'"{_excerpt(session_task(doc))}"')
    return " ".join(parts), tool


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
             memory_notes: list[str] | None = None,
             session_definitions: dict[int, list[dict]] | None = None) -> tuple[dict, str, str | None]:
    """(intervention, stage label "llm"|"fallback", note on a fallback or None). `definitions`
    are the tools offered at the step, `session_definitions` those of every step (by index)."""
    note = None
    if llm is not None:
        try:
            return from_llm(llm, doc, hypothesis, memory_notes or []), "llm", None
        except Exception as exc:
            note = f"intervention for step {hypothesis['step']}: LLM answer unusable ({exc}); used a template"
    return template(doc, hypothesis, definitions, memory_notes, session_definitions), "fallback", note
