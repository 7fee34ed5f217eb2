"""Prompts for the product's LLM stages, in DoVer's structure (Appendix B), in our own words.

Each prompt is a (system, user) pair. The system prompt's first line names the stage
(``tracefix-stage: <stage>``) so a scripted model (the demo's ``sim-analyst``) can dispatch
on it; the user message is one JSON object, like DoVer's inputs. Session logs are shown as
``[Step k] agent: content`` lines (DoVer found explicit step indices matter), with each
step's content truncated so long sessions stay inside a context window.
"""
from __future__ import annotations

import json
import re

STAGE_PREFIX = "tracefix-stage: "
STAGES = ("segmentation", "attribution", "intervention", "fulfilment", "milestones", "success")
STEP_CHARS = 400  # per-step content cap in logs shown to the LLM


def stage_header(stage: str) -> str:
    assert stage in STAGES, stage
    return STAGE_PREFIX + stage


def stage_of(system_prompt: str) -> str | None:
    """The stage a prompt belongs to (read back by the scripted analyst)."""
    first = (system_prompt or "").split("\n", 1)[0].strip()
    return first[len(STAGE_PREFIX):] if first.startswith(STAGE_PREFIX) else None


def _short(value, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_as_seen(error: str | None) -> str:
    """"pkg.mod.Type: message" as the agent saw it: "Type: message"."""
    return re.sub(r"^(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*:)", r"\1", (error or "").strip())


def step_content(step: dict, limit: int = STEP_CHARS) -> str:
    """One line for a step: what the agent said or called, and what its tools returned."""
    if step.get("kind") == "message":
        return _short((step.get("output_message") or {}).get("content") or "", limit)
    parts = []
    text = ((step.get("output_message") or {}).get("content") or "").strip()
    if text:
        parts.append(text)
    for call in step.get("tool_calls") or []:
        piece = f"calls {call.get('name')}({_short(call.get('arguments') or {}, 160)})"
        if call.get("error"):
            piece += f" -> error {error_as_seen(call['error'])}"
        elif "result" in call:
            piece += f" -> {_short(call.get('result'), 160)}"
        parts.append(piece)
    if step.get("error"):
        parts.append(f"error {step['error']}")
    return _short(" | ".join(parts) or "(no output)", limit)


def format_steps(steps: list[dict], limit: int = STEP_CHARS) -> str:
    return "\n".join(f"[Step {s['index']}] {s.get('agent') or 'agent'}: {step_content(s, limit)}" for s in steps)


def _user(payload: dict) -> str:
    return json.dumps(payload, indent=1, default=str)


def segmentation(task: str | None, steps: list[dict]) -> tuple[str, str]:
    system = f"""{stage_header('segmentation')}
You analyse the log of one session of an LLM agent system and split it into trials.

About the system: one or several agents work on a task one at a time. Usually one agent plays
the orchestrator: it makes a plan, hands instructions to the other agents, and updates the
plan when execution stalls. The flow cycles through "plan", "execute", "re-plan".

About the input: a JSON object with `problem` (the task) and `session_logs`, one line per
step, `[Step k] agent: content`.

How to split: a trial is one attempt at the task, made of a planning step and the execution
steps that carry out that plan. Label every step as initial planning (exactly one), plan
update (a major revision of the whole plan, not a different detail of the same execution),
execution, or other (acknowledgements, the final report). Instructions the orchestrator gives
while executing a plan are execution, not planning. Consecutive planning steps are allowed.

Answer with one JSON object only:
{{"initial_planning_step": {{"step_index": <int>, "reason": <string>}},
  "plan_update_steps": [{{"plan_update_step_index": <int>, "reason": <string>}}]}}"""
    return system, _user({"problem": task, "session_logs": format_steps(steps)})


def attribution(task: str | None, trial: dict, trial_steps: list[dict], previous: list[dict],
                evidence: list[dict], outcome: dict) -> tuple[str, str]:
    system = f"""{stage_header('attribution')}
You analyse one trial of a failed session of an LLM agent system and find the step where it
first went wrong.

The session was split into trials; a trial starts at a planning (or re-planning) step and
continues with the steps that execute that plan. You get one trial's log as
`[Step k] agent: content` lines, summaries of the earlier trials, how the session ended, and
an evidence packet from anomaly detectors (steps that looked unusual, with the features and
dependency paths that made them stand out). The evidence is a lead, not a verdict.

Guidance: pick the single agent most directly responsible for the failure of this trial
(an agent that made a mistake over one that was merely redundant; the most serious mistake
if several). Then pick the first step where that agent made the mistake. Count steps only
with the bracketed [Step k] indices shown; the step must lie inside this trial. Explain the
reason so that a reader who has not seen the log understands it.

Answer with one JSON object only:
{{"trial_summary": <string>, "is_succeed": <bool>, "mistake_agent": <string>,
  "mistake_step_index": <int>, "mistake_reason": <string>}}"""
    return system, _user({
        "problem": task,
        "session_outcome": outcome,
        "previous_trial_summary": previous,
        "trial": {"index": trial["index"], "start": trial["start"], "end": trial["end"]},
        "evidence_packet": evidence,
        "trial_logs_to_summarize": format_steps(trial_steps),
    })


def intervention(task: str | None, hypothesis: dict, context_steps: list[dict], failed_step: dict,
                 evidence: dict, memory_notes: list[str]) -> tuple[str, str]:
    system = f"""{stage_header('intervention')}
You debug multi-agent LLM systems. A failure analysis points at one step of a failed session.
Design one minimal edit at the message-passing layer that would fix the root cause when the
session is re-run from that step.

Kinds of edit:
- "replace_output": replace what the agent said at the step (use it for a wrong orchestrator
  instruction or plan: give the corrected instruction as one atomic next step; category
  "orchestrator_instruction" or "plan").
- "add_message": add a message to the input of the step (category "correction"), addressed to
  the acting agent as plain advice.
- "replace_tool_result": replace what a tool returned at the step (category "tool_result").

Write the text so that any agent, which has not seen this analysis, can act on it:
- say what went wrong at this step in the recorded run (the wrong or missing value, the
  skipped action, the misread result, the premature answer);
- say what the right value or action is, and quote where the session shows it: the task, the
  instruction the agent was given, a tool result, a report. When the evidence does not pin a
  value down, point to where the agent will find it ("the id is in the instruction you
  were given") instead of guessing;
- no fixed prefix or code word is needed; the agent acts on content, not on keywords.

Rules: keep the change minimal and targeted; no global resets; never state the task's final
answer or any expected result value in the edit; do not repeat an edit that memory lists as
already tried without success.

Answer with one JSON object only:
{{"step": <int>, "kind": <string>, "category": <string>, "text": <string>,
  "tool_call_id": <string or null>, "rationale": <string>}}"""
    return system, _user({
        "problem": task,
        "failure_analysis": {"step": hypothesis["step"], "agent": hypothesis.get("agent"),
                             "reason": hypothesis.get("reason"), "evidence": evidence},
        "context_before": format_steps(context_steps),
        "failed_step": format_steps([failed_step], limit=1200),
        "failed_step_input_tail": [
            {"role": m.get("role"), "content": _short(m.get("content") or "", 600)}
            for m in (failed_step.get("input_messages") or [])[-4:] if m.get("role") != "system"
        ],
        "repair_memory": memory_notes,
    })


def fulfilment(intervention_: dict, original_steps: list[dict], new_steps: list[dict]) -> tuple[str, str]:
    system = f"""{stage_header('fulfilment')}
You judge a re-run of an agent session after an intervention. The session was replayed up to
step t as recorded; at step t an edit was applied; after t the agents ran live.

Decide whether the agents actually carried out the intervention (did the acting agent do what
the edit asked, at or after step t?), not whether the task succeeded. An intervention that is
ignored, contradicted or only acknowledged without the asked action is not fulfilled.

Answer with one JSON object only:
{{"fulfilled": <bool>, "reason": <string>, "quotes": [<short verbatim quotes from the new log>]}}"""
    return system, _user({
        "intervention": {k: intervention_.get(k) for k in ("step", "kind", "category", "text", "agent")},
        "original_log_from_t": format_steps(original_steps),
        "new_log_from_t": format_steps(new_steps),
    })


def milestones(task: str | None, ground_truth, session_steps: list[dict],
               given: list[dict] | None) -> tuple[str, str]:
    system = f"""{stage_header('milestones')}
You measure progress of an agent session against at most five milestones.

If `milestones` is empty, first derive at most five ordered, tool-agnostic milestones that a
correct solution of `problem` passes through (the last one confirms the ground-truth result),
each with `name`. Then, for every milestone, decide from the session log alone whether it was
achieved (clear evidence that its result happened, not merely attempted).

Answer with one JSON object only:
{{"milestones": [{{"name": <string>, "achieved": <bool>, "evidence": <string>}}]}}"""
    return system, _user({
        "problem": task, "ground_truth_answer": ground_truth,
        "milestones": [{"name": m.get("name")} for m in (given or [])],
        "session_log": format_steps(session_steps),
    })


def success(task: str | None, complaint: str | None, output, session_steps: list[dict]) -> tuple[str, str]:
    system = f"""{stage_header('success')}
You judge whether a re-run of an agent session fixed what the user complained about in the
original run. Judge from the task, the complaint, the final output and the log.

Answer with one JSON object only:
{{"success": <bool>, "reason": <string>}}"""
    return system, _user({"problem": task, "user_complaint": complaint, "final_output": output,
                          "session_log": format_steps(session_steps)})
