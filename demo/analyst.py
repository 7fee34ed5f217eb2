"""`sim-analyst`: a scripted stand-in for the product's own LLM (a test and demo component).

The scripted LLM server serves it as one more model, so tracefix's LLM stages (segmenting,
attributing, writing interventions, judging) run their real ``openai`` code path over
HTTP without a hosted model. It reads the stage from the first line of the system prompt
(``tracefix-stage: <stage>``, see ``tracefix.replay.prompts``) and the JSON object in the
user message, and answers with one JSON object, deterministically, by reading the
``[Step k] agent: content`` log the way a careful human would: plans come from the
orchestrator, the first tool error of a trial is its mistake, a correction names the agent,
the tool and the blamed argument.

It is not a model of anything; it only makes the LLM path testable.
"""
from __future__ import annotations

import json
import re

from tracefix.analysis.roles import coordinators

MODEL = "sim-analyst"
STAGE_PREFIX = "tracefix-stage: "
STEP_LINE = re.compile(r"^\[Step (\d+)\] ([^:]+): (.*)$")
CALL = re.compile(r"^calls (\w+)\((.*?)\)(?: -> (.*))?$", re.S)
ARGUMENT = re.compile(r"argument '(\w+)'")
BACKTICKED = re.compile(r"`(\w+)`")


def parse_log(text: str | None) -> list[dict]:
    steps = []
    for line in (text or "").splitlines():
        m = STEP_LINE.match(line.strip())
        if m:
            content = m.group(3)
            calls = []
            for part in content.split(" | "):  # how prompts.step_content joins a step's pieces
                c = CALL.match(part.strip())
                if c:
                    outcome = c.group(3) or ""
                    calls.append({"name": c.group(1), "args": c.group(2),
                                  "error": outcome[len("error "):] if outcome.startswith("error ") else None})
            steps.append({"index": int(m.group(1)), "agent": m.group(2).strip(), "content": content, "calls": calls})
    return steps


def _is_plan(step: dict, planners: set[str]) -> bool:
    return step["agent"] in planners and not step["calls"] and "plan" in step["content"].lower()


def segmentation(data: dict) -> dict:
    steps = parse_log(data.get("session_logs"))
    planners = coordinators([s["agent"] for s in steps])
    plans = [s["index"] for s in steps if _is_plan(s, planners)] or ([steps[0]["index"]] if steps else [0])
    return {"initial_planning_step": {"step_index": plans[0], "reason": "the orchestrator lays out the plan"},
            "plan_update_steps": [{"plan_update_step_index": p, "reason": "the orchestrator revises the plan"}
                                  for p in plans[1:]]}


def attribution(data: dict) -> dict:
    steps = parse_log(data.get("trial_logs_to_summarize"))
    errored = next((s for s in steps if any(c["error"] for c in s["calls"])), None)
    evidence = [e for e in data.get("evidence_packet") or [] if isinstance(e, dict) and e.get("step") is not None]
    if errored is not None:
        call = next(c for c in errored["calls"] if c["error"])
        pick, reason = errored, f"{errored['agent']} called {call['name']} and it failed: {call['error']}"
    elif evidence:
        pick = next((s for s in steps if s["index"] == evidence[0]["step"]), steps[-1] if steps else None)
        reason = f"the detectors single out step {evidence[0]['step']}: {evidence[0].get('rationale') or 'anomalous'}"
    else:
        pick, reason = (steps[-1] if steps else None), "the trial ends without reaching the goal"
    if pick is None:
        return {"is_succeed": True, "mistake_step_index": None}
    return {"trial_summary": f"{len(steps)} steps; mistake at step {pick['index']}", "is_succeed": False,
            "mistake_agent": pick["agent"], "mistake_step_index": pick["index"], "mistake_reason": reason}


def intervention(data: dict) -> dict:
    analysis = data.get("failure_analysis") or {}
    failed = parse_log(data.get("failed_step"))
    step = failed[0] if failed else {"index": analysis.get("step"), "agent": analysis.get("agent"), "content": "",
                                     "calls": []}
    call = next((c for c in step["calls"] if c["error"]), step["calls"][0] if step["calls"] else None)
    tail = [m for m in data.get("failed_step_input_tail") or [] if isinstance(m, dict) and m.get("role") == "user"]
    given = f' The instruction you were given: "{tail[-1].get("content")}"' if tail else ""
    if call is not None:
        m = ARGUMENT.search(call["error"] or "")
        fix = (f"Pass the `{m.group(1)}` argument; its value is in the instruction you were given." if m
               else "Check each argument against the instruction you were given.")
        error = f" and failed with: {call['error']}" if call["error"] else ""
        text = f"In the recorded run the call to `{call['name']}` here was wrong{error}. {fix}{given}"
    elif "final answer" in step["content"].lower():
        text = ("The task is not finished, so do not give the final answer yet: carry out the remaining "
                "steps of your plan with the workers first, then answer.")
    else:
        tool = (analysis.get("evidence") or {}).get("tool")
        target = f" The `{tool}` action has to be carried out." if tool else ""
        text = ("The instruction at this step was wrong or incomplete: give the worker the action and every "
                f"identifier and amount it needs, checked against what the workers reported.{target}")
    return {"step": step["index"], "kind": "add_message", "category": "correction", "text": text,
            "tool_call_id": None, "rationale": analysis.get("reason") or ""}


def fulfilment(data: dict) -> dict:
    iv = data.get("intervention") or {}
    text = iv.get("text") or ""
    new = parse_log(data.get("new_log_from_t"))
    old = parse_log(data.get("original_log_from_t"))
    named = BACKTICKED.findall(text)
    tool = next((n for n in named if any(c["name"] == n for s in new + old for c in s["calls"])), None)
    argument = next((n for n in named if n != tool), None)
    if tool:
        hits = [c for s in new for c in s["calls"] if c["name"] == tool and (argument is None or f'"{argument}"' in c["args"])]
        return {"fulfilled": bool(hits), "reason": f"{'called' if hits else 'did not call'} {tool} as asked",
                "quotes": [f"calls {tool}({hits[0]['args']})"] if hits else []}
    if "final answer" in text.lower():
        acted = any(s["calls"] for s in new)
        return {"fulfilled": acted, "reason": "kept working before answering" if acted else "answered anyway",
                "quotes": []}
    changed = [s["content"] for s in new[:1]] != [s["content"] for s in old[:1]]
    return {"fulfilled": changed, "reason": "the step changed" if changed else "the step is unchanged", "quotes": []}


def milestones(data: dict) -> dict:
    steps = parse_log(data.get("session_log"))
    ok_tools = [c["name"] for s in steps for c in s["calls"] if not c["error"]]
    given = [m.get("name") for m in data.get("milestones") or [] if m.get("name")]
    if not given:
        tried = []
        for s in steps:
            for c in s["calls"]:
                if c["name"] not in tried:
                    tried.append(c["name"])
        given = [f"{t} succeeds" for t in tried[:4]] + ["final answer matches the ground truth"]
    truth = json.dumps(data.get("ground_truth_answer")) if data.get("ground_truth_answer") is not None else ""
    log_text = "\n".join(s["content"] for s in steps)
    out = []
    for name in given[:5]:
        if name.endswith(" succeeds"):
            achieved = name[: -len(" succeeds")] in ok_tools
        else:
            achieved = bool(truth) and truth.strip('"').lower() in log_text.lower()
        out.append({"name": name, "achieved": achieved, "evidence": "from the tool results in the log"})
    return {"milestones": out}


def success(data: dict) -> dict:
    output = json.dumps(data.get("final_output"), default=str).lower()
    failed = any(w in output for w in ("could not", "unable", "failed", "error", "sorry"))
    return {"success": not failed, "reason": "the final answer reports a failure" if failed else "the final answer reports completion"}


SUMMARY_LINE = re.compile(r"^\[(\d+)\] (\S+) (\w+): (.*)$", re.S)


def analysis(data: dict) -> dict:
    """Confirm a turning point among the analysis' evidence packets: the earliest step on the
    top candidate's dependency path that another candidate also names, else the top candidate
    itself (root causes come before their symptoms); the root cause is that step's summary."""
    packets = [p for p in data.get("candidates") or [] if isinstance(p, dict) and p.get("step") is not None]
    if not packets:
        return {"turning_point": None, "root_cause": "", "recovery_hints": []}
    top = packets[0]
    named = {p["step"] for p in packets[1:]}
    earlier = sorted(s for s in top.get("path") or [] if s in named and s < top["step"])
    step = earlier[0] if earlier else top["step"]
    lines = {int(m.group(1)): m for line in (p.get("steps") or [] for p in packets) for line in line
             if (m := SUMMARY_LINE.match(line))}
    seen = lines.get(step)
    if seen is None:
        return {"turning_point": step, "root_cause": f"step {step} is where the run turned", "recovery_hints": []}
    agent, phase, what = seen.group(2), seen.group(3), seen.group(4)
    hints = [f"have {agent} re-check its {phase} step against the task before acting"]
    tool = re.match(r"(\w+)\(", what)
    if tool:
        hints.insert(0, f"check the arguments of {tool.group(1)} against the earlier tool results")
    return {"turning_point": step, "root_cause": f"{agent} at step {step}: {what}"[:300], "recovery_hints": hints}


HANDLERS = {"segmentation": segmentation, "attribution": attribution, "intervention": intervention,
            "fulfilment": fulfilment, "milestones": milestones, "success": success, "analysis": analysis}


def answer(messages: list[dict]) -> str:
    """The reply text (one JSON object) for a chat request to `sim-analyst`."""
    system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
    first = system.split("\n", 1)[0].strip()
    stage = first[len(STAGE_PREFIX):] if first.startswith(STAGE_PREFIX) else None
    user = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
    if stage not in HANDLERS:
        return json.dumps({"error": f"sim-analyst: unknown stage {stage!r} (first line must be '{STAGE_PREFIX}<stage>')"})
    try:
        data = json.loads(user)
    except ValueError:
        data = {}
    return json.dumps(HANDLERS[stage](data if isinstance(data, dict) else {}))


def handle(body: dict, ctx=None) -> dict:
    """The scripted server's model handler (tracefix.demo.sim serves it as MODEL)."""
    return {"role": "assistant", "content": answer(body.get("messages") or [])}
