"""Session steps -> transition units (AgentTether section III-B).

A transition unit (the type is in transition_unit.py) bundles one decision: its observation
(what the agent newly saw), belief (its text), action (text or tool calls with arguments)
and feedback (tool results and errors), plus derived attributes the graph and the detectors
read: status, a normalized error signature, tool, phase (plan | instruct | act | answer), the
artifacts the step produced and consumed, agent and tokens (not how long the step took:
features.py says why).

Works on plain session-document dicts (docs/contracts.md section 1), for instrumented
sessions (kind "llm") and imported message logs (kind "message"). Pure Python: no numpy,
so it is cheap to import anywhere.

`build_units` makes the units and runs the readings, each in a module of its own: the
values a step names and whether its input showed them (values.py), who plans and who works
(roles.py), tool results as records (records.py) and a report read against them
(agent_reports.py), failures read from results and retries (failures.py), and picks that conflict
with the task or the final answer (conflicts.py).
"""
from __future__ import annotations

import bisect
import re
from typing import Any

from tracefix.attributes import from_json_text
from tracefix.collector.document import content_text, session_task

from .conflicts import clear_misled_picks, conflicts_in, mark_answer_conflicts, task_clauses_of, words_about
from .failures import (is_empty_result, mark_error_shaped_results, mark_failed_rounds, mark_recovered_errors,
                       message_error, off_shape_result, result_error, structured_result_tools)
from .records import Record, records_of, text_result
from .agent_reports import (dropped_findings, mark_restated_fields, misattributed_values, mispaired_numbers,
                            misread_listings, omitted_records)
from .roles import (DELEGATION_TOOL, TOOL_SPEAKER, hub_agents, in_words_only, is_coordinator, mark_coordinating_messages,
                    phase_for_llm, phase_for_message)
from .transition_unit import TransitionUnit
from .values import WORD, compact_json, extract_artifacts, normalize_error, unsupported_in, used_values, values_text


# A claim of success or of failure in an agent's words: a generic English phrase list, the
# words any report of an outcome uses, and none of an app's own (an error's wording, "not
# found", "invalid", "denied", "insufficient", is the bank's tools', not a report's). A report
# worded without them still counts where the conversation shows its outcome: a round handed
# out again failed (failures.mark_failed_rounds), a worker's words-only answer taken as done
# is a claim (evidence/unacted_claims.py). bench/localization.py --perturb paraphrase rewords
# every failure word and is the check that localization does not rest on this list.
_SUCCESS_CLAIM = re.compile(r"\b(?:success(?:ful|fully)?|succeeded|completed|done|confirmed|worked)\b", re.I)
_FAILURE_CLAIM = re.compile(r"\b(?:fail(?:s|ed|ure)?|errors?|unable|could not|couldn't|cannot|can't)\b", re.I)


# How much of a growing prompt is read for the step's context: enough for the current
# sub-task, bounded so long sessions stay linear.
_CONTEXT_MESSAGES = 40
_CONTEXT_CHARS = 40_000


def _context_text(input_messages: list[dict]) -> str:
    """The text the agent could see in its input (recent messages, tool calls included)."""
    parts: list[str] = []
    size = 0
    for msg in reversed((input_messages or [])[-_CONTEXT_MESSAGES:]):
        text = content_text(msg.get("content"))
        for tc in msg.get("tool_calls") or []:
            text += " " + str((tc.get("function") or {}).get("arguments") or "")
        parts.append(text)
        size += len(text)
        if size > _CONTEXT_CHARS:
            break
    return "\n".join(reversed(parts))[-_CONTEXT_CHARS:]


def _tail(texts: list[str], chars: int) -> str:
    """The last `chars` characters of the texts joined by newlines, joining only what is kept."""
    kept, size = [], 0
    for text in reversed(texts):
        kept.append(text)
        size += len(text) + 1
        if size > chars:
            break
    return "\n".join(reversed(kept))[-chars:]


def _text_signature(agent: str, text: str) -> str | None:
    """A text-only step said again word for word (an instruction re-sent) is a loop too."""
    norm = " ".join(text.split())
    return f"{agent} says {norm[:300]}" if len(norm) >= 20 else None


def _observation(input_messages: list[dict]) -> str:
    """What the agent newly saw: the input messages after its last own assistant turn.
    Reading only the tail keeps a step O(1) however long the growing prompt is."""
    tail: list[str] = []
    for msg in reversed(input_messages or []):
        if msg.get("role") == "assistant":
            break
        tail.append(content_text(msg.get("content")))
        if len(tail) >= 8:
            break
    return "\n".join(reversed(tail))


def build_units(doc: dict) -> list[TransitionUnit]:
    """All transition units of a session document, in step order."""
    steps = sorted(doc.get("steps") or [], key=lambda s: s.get("index", 0))
    task = session_task(doc)
    units: list[TransitionUnit] = []
    n = len(steps)
    said: list[str] = []  # message logs: what was said before, the context of the next message
    results: list[list[Record]] = []  # the records of each tool result so far, newest last
    task_words = {w.lower() for w in WORD.findall(task or "")}
    task_clauses = task_clauses_of(task or "")
    conflicted: set[str] = set()
    hubs = hub_agents([s.get("agent") or "agent" for s in steps if (s.get("kind") or "llm") == "llm"])
    structured = structured_result_tools(steps)
    # (agent, tool) -> the steps and results of its calls, in order; the reports of text steps.
    fetched: dict[tuple[str, str], tuple[list[int], list[Any]]] = {}
    reports: list[tuple[TransitionUnit, list[Any], int, set[str]]] = []
    for pos, step in enumerate(steps):
        is_last = pos == n - 1
        if (step.get("kind") or "llm") == "message":
            unit = _unit_from_message(step, pos, is_last)
            context = (task or "") + "\n" + _tail(said, _CONTEXT_CHARS)
            if not unit.feedback:  # a tool's output reports the world; only agents can invent
                unit.unsupported = unsupported_in(used_values(unit.action["calls"], unit.action["text"]), context)
            said.append(unit.action["text"])
            if len(said) > _CONTEXT_MESSAGES:
                del said[0]
        else:
            unit = _unit_from_llm(step, pos, is_last, task, hubs, structured)
            if not unit.action["calls"] and unit.action["text"]:
                calls = _own_calls(units, unit.agent)
                own = [result for _, result in calls]
                unit.misattributed = sorted(set(misattributed_values(unit.action["text"], own))
                                            | set(mispaired_numbers(unit.action["text"], own)))
                if own:
                    reports.append((unit, own, *_block(units, unit.agent)))
                unit.omitted = sorted(set(omitted_records(unit.action["text"], own))
                                      | set(dropped_findings(unit.action["text"], calls)))
                unit.restated = misread_listings(unit.action["text"], calls)
            if task_words and results and not is_last:
                # Only the first step to pick a conflicting id chose it; later ones were handed it.
                used = used_values(unit.action["calls"], unit.action["text"])
                unit.task_conflicts = [v for v in conflicts_in(used, results[-_CONTEXT_MESSAGES:],
                                                                words_about(used, task_clauses) or task_words)
                                       if v not in conflicted]
                conflicted.update(unit.task_conflicts)
            for c, f in zip(unit.action["calls"], unit.feedback):
                if f.get("result") is not None and not f.get("error"):
                    steps_of, results_of = fetched.setdefault((unit.agent, c["name"]), ([], []))
                    steps_of.append(pos)
                    results_of.append(f["result"])
            results += [records_of(f["result"]) for f in unit.feedback if isinstance(f.get("result"), (dict, list))
                        or (text_result(f.get("result")) and not f.get("error"))]
        units.append(unit)
    for unit, own, start, tools in reports:
        # The same lookups the agent made for other values, before or after this report: a
        # word of theirs that it attaches to its own record is not that record's.
        others = _other_results(fetched, unit.agent, tools, start, unit.index)
        if others:
            unit.misattributed = sorted(set(unit.misattributed) | set(misattributed_values(unit.action["text"], own, others)))
    mark_coordinating_messages(units)
    mark_error_shaped_results(units)
    mark_recovered_errors(units)
    mark_failed_rounds(units)
    mark_restated_fields(units, task or "")
    clear_misled_picks(units)
    mark_answer_conflicts(units)
    return units


def _own_calls(units: list[TransitionUnit], agent: str) -> list[tuple[Any, Any]]:
    """(arguments, result) of `agent`'s calls that returned a result in its current block,
    newest first (see `_block`)."""
    out: list[tuple[Any, Any]] = []
    for u in reversed(units):
        if u.agent != agent or in_words_only(u):
            break
        out += [(c["arguments"], f["result"]) for c, f in zip(u.action["calls"], u.feedback)
                if f.get("result") is not None and not f.get("error")]
    return out


def _block(units: list[TransitionUnit], agent: str) -> tuple[int, set[str]]:
    """Where `agent`'s current block starts, and the tools it called in it. A block is the
    agent's steps since another agent spoke or since it last spoke in words only: a report
    covers the calls after the last report, so a single agent that plans, acts and reports
    in turn has one block per report, as a worker handed work by a coordinator has."""
    start = len(units)
    while start > 0 and units[start - 1].agent == agent and not in_words_only(units[start - 1]):
        start -= 1
    return start, {c["name"] for u in units[start:] for c in u.action["calls"]}


# How many results of the same lookup, on each side of a report, it is compared with.
_OTHER_RESULTS = 20


def _other_results(fetched: dict[tuple[str, str], tuple[list[int], list[Any]]], agent: str, tools: set[str],
                   start: int, end: int) -> list[Any]:
    """Results of `agent`'s calls to `tools` outside the steps start..end (its block and
    its report): the nearest _OTHER_RESULTS before and after, per tool."""
    out: list[Any] = []
    for tool in sorted(tools):
        steps_of, results_of = fetched.get((agent, tool), ([], []))
        lo, hi = bisect.bisect_left(steps_of, start), bisect.bisect_right(steps_of, end)
        out += results_of[max(0, lo - _OTHER_RESULTS):lo] + results_of[hi:hi + _OTHER_RESULTS]
    return out


def _unit_from_llm(step: dict, pos: int, is_last: bool, task: str | None, hubs: set[str] = frozenset(),
                   structured_tools: set[str] = frozenset()) -> TransitionUnit:
    out = step.get("output_message") or {}
    text = content_text(out.get("content"))
    reasoning = content_text(out.get("reasoning_content") or out.get("reasoning") or "")
    calls: list[dict] = []
    feedback: list[dict] = []
    for tc in step.get("tool_calls") or []:
        args = from_json_text(tc.get("arguments"))
        calls.append({"name": tc.get("name") or "", "arguments": args})
        feedback.append({"tool": tc.get("name") or "", "result": tc.get("result"), "error": tc.get("error")})
    if not calls:  # a call requested but never executed still counts as the action
        for tc in out.get("tool_calls") or []:
            fn = tc.get("function") or {}
            calls.append({"name": fn.get("name") or "", "arguments": from_json_text(fn.get("arguments"))})
    agent = step.get("agent") or "agent"
    phase = phase_for_llm(agent, text, calls, is_last, agent in hubs or is_coordinator(agent))

    errors = [f"{f['tool']}: {f['error']}" for f in feedback if f.get("error")]
    result_errors = [f"{f['tool']}: {e}" for f in feedback if not f.get("error")
                     and (e := result_error(f.get("result")) or off_shape_result(f.get("result"), f["tool"], structured_tools))]
    step_error = step.get("error")
    error_text = step_error or (errors + result_errors or [None])[0]
    if step_error or errors:
        outcome = "exception"
    elif result_errors:
        outcome = "error_result"
    elif feedback and all(is_empty_result(f.get("result")) for f in feedback):
        outcome = "empty_result"
    elif feedback:
        outcome = "result"
    else:
        outcome = "none"
    status = "error" if error_text else ("empty" if not text.strip() and not calls else "ok")

    produced = extract_artifacts(values_text([f.get("result") for f in feedback]))
    produced |= extract_artifacts(" ".join(str(f.get("error") or "") for f in feedback))
    produced |= extract_artifacts(text)  # a plan or instruction hands values on too
    consumed = extract_artifacts(values_text([c["arguments"] for c in calls]))
    consumed |= extract_artifacts(text)
    return TransitionUnit(
        index=pos, kind="llm", agent=agent, phase=phase, status=status, outcome=outcome,
        observation=_observation(step.get("input_messages") or []), belief=reasoning or text,
        action={"text": text, "calls": calls}, feedback=feedback,
        tool=calls[0]["name"] if calls else None, tools=[c["name"] for c in calls],
        call_signatures=[f"{c['name']}({compact_json(c['arguments'])})" for c in calls]
        or [sig for sig in [_text_signature(agent, text)] if sig],
        error_signature=normalize_error(error_text), error_text=str(error_text) if error_text else None,
        artifacts_produced=produced, artifacts_consumed=consumed,
        unsupported=unsupported_in(used_values(calls, text),
                                   (task or "") + "\n" + _context_text(step.get("input_messages") or [])),
        input_tokens=int(step.get("input_tokens") or 0), output_tokens=int(step.get("output_tokens") or 0),
        output_length=len(text) + sum(len(s) for s in (compact_json(c["arguments"]) for c in calls)),
        claims_success=bool(_SUCCESS_CLAIM.search(text)), claims_failure=bool(_FAILURE_CLAIM.search(text)),
    )


def _message_calls(tool_calls: Any) -> list[dict]:
    """The tool calls an OpenAI-format log keeps on an assistant's message, as {name,
    arguments}; an imported log is the user's file, so anything not shaped like a call is
    skipped rather than trusted."""
    calls = []
    for tc in tool_calls if isinstance(tool_calls, list) else []:
        fn = tc.get("function") if isinstance(tc, dict) else None
        fn = fn if isinstance(fn, dict) else tc
        if isinstance(fn, dict):
            calls.append({"name": str(fn.get("name") or ""), "arguments": from_json_text(fn.get("arguments"))})
    return calls


def _unit_from_message(step: dict, pos: int, is_last: bool) -> TransitionUnit:
    """An imported message: the message is the action; a tool/function message is also feedback."""
    msg = step.get("output_message") if isinstance(step.get("output_message"), dict) else {}
    text = content_text(msg.get("content") if msg else step.get("content"))
    role = (msg.get("role") if msg else None) or step.get("role") or ""
    agent = step.get("agent") or msg.get("name") or role or "agent"
    phase = phase_for_message(role, agent, text, is_last)
    error_text = step.get("error") or message_error(text)
    is_tool_output = role.lower() in {"tool", "function", "ipython"} or bool(TOOL_SPEAKER.search(agent))
    if error_text:
        outcome = "exception" if is_tool_output else "error_result"
    elif is_tool_output:
        outcome = "empty_result" if not text.strip() else "result"
    else:
        outcome = "none"
    calls = [] if is_tool_output else _message_calls(msg.get("tool_calls"))
    if calls and phase != "answer":
        phase = "instruct" if all(DELEGATION_TOOL.search(c["name"]) for c in calls) else "act"
    status = "error" if error_text else ("empty" if not text.strip() and not calls else "ok")
    artifacts = extract_artifacts(text)
    # A message both hands values on (produced) and uses values it was given (consumed).
    if is_tool_output:
        tools, signatures = [agent], []
    elif calls:
        tools = [c["name"] for c in calls]
        signatures = [f"{c['name']}({compact_json(c['arguments'])})" for c in calls]
    else:
        tools, signatures = [], [sig for sig in [_text_signature(agent, text)] if sig]
    return TransitionUnit(
        index=pos, kind="message", agent=agent, phase=phase, status=status, outcome=outcome,
        observation="", belief=text, action={"text": text, "calls": calls},
        feedback=[{"tool": agent, "result": text, "error": error_text}] if is_tool_output else [],
        tool=tools[0] if tools else None, tools=tools,
        call_signatures=signatures,
        error_signature=normalize_error(error_text), error_text=error_text,
        artifacts_produced=artifacts, artifacts_consumed=(artifacts | used_values(calls, "")) if calls else artifacts,
        input_tokens=int(step.get("input_tokens") or 0), output_tokens=int(step.get("output_tokens") or 0),
        output_length=len(text) + sum(len(compact_json(c["arguments"])) for c in calls),
        claims_success=bool(_SUCCESS_CLAIM.search(text)), claims_failure=bool(_FAILURE_CLAIM.search(text)),
    )
