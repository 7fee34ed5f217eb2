"""Judging one replay: did it succeed, did the agents carry out the intervention, what progress.

Each answer says how it was reached (the result's ``judged_by``):

- success: the session's registered evaluator (the child's report) > the session's ground
  truth (compared with the replay's output) > an LLM judge against the user's complaint;
- fulfilled: an LLM judge comparing the original and the new log from step t, or a
  heuristic: did the acting agent, at or after t, do what the intervention's ``expect``
  names (call the tool, with the argument; call no more the tool it was told not to;
  continue instead of answering; change the instruction). A person's edit is expected to do
  what it asks (edit_expectation.py); one that reading cannot place is "unknown" without an
  LLM judge (judged_by "unknown");
- progress: DoVer's Prog = (A(new) - A(orig)) / K over the evaluator's milestones, or over
  LLM-judged milestones when the session has a ground truth.
"""
from __future__ import annotations

import json
import re

from tracefix.collector.document import content_text, session_task
from tracefix.replay import prompts


def _evaluator_success(report: dict) -> bool | None:
    evaluation = report.get("evaluation")
    if isinstance(evaluation, dict) and isinstance(evaluation.get("success"), bool):
        return evaluation["success"]
    if report.get("outcome") in ("success", "failure"):
        return report["outcome"] == "success"
    return None


def _text_of(output) -> str:
    if isinstance(output, dict):
        for key in ("final_answer", "answer", "output", "result"):
            if key in output:
                return _text_of(output[key])
    return output if isinstance(output, str) else json.dumps(output, sort_keys=True, default=str)


def _matches_ground_truth(output, ground_truth) -> bool:
    if output == ground_truth:
        return True
    expected = _text_of(ground_truth).strip().lower()
    return bool(expected) and expected in _text_of(output).strip().lower()


def judge_success(report: dict, doc: dict, child_doc: dict | None, llm=None,
                  complaint: str | None = None) -> tuple[bool | None, str]:
    """(success, how judged). `complaint`: what the LLM judge is told went wrong in the original
    run; by default the comments of the session's feedback."""
    found = _evaluator_success(report)
    if found is not None:
        return found, "evaluator"
    if doc.get("ground_truth") not in (None, ""):
        return _matches_ground_truth(report.get("output"), doc["ground_truth"]), "ground_truth"
    if llm is not None and child_doc is not None:
        complaint = complaint or "; ".join(f.get("comment") for f in doc.get("feedback") or [] if f.get("comment")) or None
        try:
            system, user = prompts.success(session_task(doc), complaint, report.get("output"), child_doc.get("steps") or [])
            answer = llm.complete_json("success", system, user)
            if isinstance(answer.get("success"), bool):
                return answer["success"], "llm"
        except Exception:  # an LLM failure leaves success unjudged, it does not fail the run
            pass
    return None, "unjudged"


# --- fulfilment ------------------------------------------------------------------------------

def _calls_from(steps: list[dict], t: int, agent: str | None = None) -> list[dict]:
    return [c for s in steps if s["index"] >= t and (agent is None or s.get("agent") == agent)
            for c in s.get("tool_calls") or []]


def _norm(text: str | None) -> str:
    return " ".join((text or "").split()).lower()


# Values an edit states: quoted text, and tokens carrying a digit (ids, amounts, dates).
_QUOTED = re.compile(r"`([^`]{1,120})`|\"([^\"]{1,120})\"")
_STEP_REFERENCE = re.compile(r"\bsteps?\s+\d+(?:\s*(?:-|to|and)\s*\d+)?", re.I)
_DIGIT_TOKEN = re.compile(r"(?<![\w.-])[\w.:/-]*\d[\w.:/-]*")


def stated_values(text: str | None, known_names: set[str]) -> set[str]:
    """The concrete values an edit states, without the names it merely mentions (tools,
    arguments, agents): a corrected id or amount is what a followed edit must show."""
    text = _STEP_REFERENCE.sub(" ", text or "")  # "at step 3" points into the log, it is no value
    found = {a or b for a, b in _QUOTED.findall(text)}
    found |= set(_DIGIT_TOKEN.findall(text))
    return {v.strip().rstrip(".,;:") for v in found
            if v.strip() and v.strip() not in known_names and any(c.isdigit() for c in v)}


def _action(step: dict | None) -> tuple:
    """What an agent did at a step, comparable across runs: its text and its tool calls."""
    if step is None:
        return ()
    calls = tuple((c.get("name"), json.dumps(c.get("arguments"), sort_keys=True, default=str))
                  for c in step.get("tool_calls") or [])
    return (_norm((step.get("output_message") or {}).get("content")), calls)


def _step_text(step: dict | None) -> str:
    """What an agent said and called at a step, as one text to look for values in."""
    if step is None:
        return ""
    calls = [json.dumps(c.get("arguments"), sort_keys=True, default=str) for c in step.get("tool_calls") or []]
    return " ".join([content_text((step.get("output_message") or {}).get("content")), *calls])


def fulfilled_heuristic(intervention: dict, doc: dict, child_doc: dict) -> bool:
    """Did the replay, at or after t, move the way the intervention asked?

    Never when the agent did at t exactly what it did originally. For a tool call: the
    asked tool is called by the acting agent, differently from the failed call, and with
    one of the values the edit states when it states any. For an early answer: the session
    goes on past t, and the pending tool, when one is named, is called. For a changed text (an
    instruction, a report): it carries a value the edit states, when the edit states any."""
    t = intervention["step"]
    expect = intervention.get("expect") or {}
    new_steps = child_doc.get("steps") or []
    old_by_index = {s["index"]: s for s in doc.get("steps") or []}
    new_by_index = {s["index"]: s for s in new_steps}
    action, tool, argument, agent = expect.get("action"), expect.get("tool"), expect.get("argument"), expect.get("agent")
    new_t, old_t = new_by_index.get(t), old_by_index.get(t)
    if new_t is None:
        return False

    if action == "replaced":
        applied = new_t.get("replay_source") == "intervention" or (
            intervention.get("kind") == "replace_output"
            and _norm((new_t.get("output_message") or {}).get("content")) == _norm(intervention.get("text")))
        return applied and any(s["index"] > t for s in new_steps)
    if action == "avoid_tool" and tool:
        # asked not to call a tool: fulfilled when no agent calls it from t on
        return not any(c.get("name") == tool for c in _calls_from(new_steps, t))
    if _action(new_t) == _action(old_t):
        return False  # the edit changed nothing the agent did
    if action == "call_tool" and tool:
        old_call = next((c for c in (old_t or {}).get("tool_calls") or [] if c.get("name") == tool), None)
        old_args = (old_call or {}).get("arguments") if isinstance((old_call or {}).get("arguments"), dict) else {}
        names = {tool, argument, agent, *old_args} - {None}
        wanted = stated_values(intervention.get("text"), names) - {str(v) for v in old_args.values()}
        for call in _calls_from(new_steps, t, agent):
            if call.get("name") != tool:
                continue
            args = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
            if wanted and not any(v in json.dumps(args, default=str) for v in wanted):
                continue  # the call does not carry what the edit said
            if argument is None:
                if args != old_args or (old_call or {}).get("error") and not call.get("error"):
                    return True
            elif argument not in old_args:
                if args.get(argument) is not None:
                    return True
            elif args.get(argument) != old_args.get(argument):
                return True
        return False
    if action == "continue":
        # the session no longer ends with the answer at t (an orchestrator goes on by instructing,
        # a worker by calling), and the pending action, when one is named, now happens
        goes_on = any(s["index"] > t for s in new_steps)
        calls = _calls_from(new_steps, t)
        return goes_on and (any(c.get("name") == tool for c in calls) if tool else bool(calls))
    # A changed text (an instruction, a report) follows the edit only when it carries a value
    # the edit states that the original did not: an appended remark or a reworded repeat is
    # not the edit carried out.
    old_text, new_text = _step_text(old_t), _step_text(new_t)
    wanted = {v for v in stated_values(intervention.get("text"), {tool, argument, agent} - {None}) if v not in old_text}
    if wanted and not any(v in new_text for v in wanted):
        return False
    if action == "instruct" and tool:
        return any(c.get("name") == tool for c in _calls_from(new_steps, t))
    return True  # the step's action changed (checked above)


def judge_fulfilled(intervention: dict, doc: dict, child_doc: dict | None, llm=None) -> tuple[bool | None, str]:
    if child_doc is None or not child_doc.get("steps"):
        return None, "unavailable"
    t = intervention["step"]
    unreadable = (intervention.get("expect") or {}).get("action") == "unknown"
    if llm is not None:
        try:
            system, user = prompts.fulfilment(intervention, [s for s in doc.get("steps") or [] if s["index"] >= t],
                                              [s for s in child_doc["steps"] if s["index"] >= t])
            answer = llm.complete_json("fulfilment", system, user)
            if isinstance(answer.get("fulfilled"), bool):
                return answer["fulfilled"], "llm"
        except Exception:  # fall through to the heuristic
            pass
    if unreadable:
        return None, "unknown"  # a person's edit the heuristic cannot read: only an LLM judge can say
    return fulfilled_heuristic(intervention, doc, child_doc), "heuristic"


# --- progress --------------------------------------------------------------------------------

def _achieved(milestones) -> int:
    return sum(1 for m in milestones or [] if isinstance(m, dict) and m.get("achieved"))


def progress_from_milestones(original: list[dict], new: list[dict]) -> float | None:
    k = max(len(original or []), len(new or []))
    if k == 0:
        return None
    return (_achieved(new) - _achieved(original)) / k


class MilestoneJudge:
    """LLM milestones for sessions with a ground truth but no evaluator milestones (DoVer 4.2).

    The milestones are derived once, from the original run, and then every replay is
    scored against that same list so K stays fixed.
    """

    def __init__(self, llm, doc: dict):
        self.llm, self.doc = llm, doc
        self.milestones: list[dict] | None = None
        self.original_achieved: list[dict] = []

    def _ask(self, steps: list[dict], given: list[dict] | None) -> list[dict]:
        system, user = prompts.milestones(session_task(self.doc), self.doc.get("ground_truth"), steps, given)
        answer = self.llm.complete_json("milestones", system, user)
        found = [m for m in answer.get("milestones") or [] if isinstance(m, dict) and m.get("name")][:5]
        if not found:
            raise ValueError("milestone answer lists no milestones")
        return [{"name": m["name"], "achieved": bool(m.get("achieved"))} for m in found]

    def progress(self, child_doc: dict) -> float | None:
        if self.milestones is None:
            self.original_achieved = self._ask(self.doc.get("steps") or [], None)
            self.milestones = [{"name": m["name"]} for m in self.original_achieved]
        new = self._ask(child_doc.get("steps") or [], self.milestones)
        return progress_from_milestones(self.original_achieved, new[: len(self.milestones)])


def judge_progress(report: dict, doc: dict, child_doc: dict | None,
                   milestone_judge: MilestoneJudge | None = None) -> tuple[float | None, str]:
    original = (doc.get("evaluation") or {}).get("milestones") if isinstance(doc.get("evaluation"), dict) else None
    new = (report.get("evaluation") or {}).get("milestones") if isinstance(report.get("evaluation"), dict) else None
    if new is not None and (original or new):
        return progress_from_milestones(original or [], new), "milestones"
    if milestone_judge is not None and child_doc is not None:
        try:
            return milestone_judge.progress(child_doc), "llm_milestones"
        except Exception:
            pass
    return None, "unmeasured"
