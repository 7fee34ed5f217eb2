"""`tracefix regress`'s work: run dataset items (`tracefix.collector.datasets`) again on the
agent code installed now, and say what changed.

Each item runs `runs` times in the replay's own isolated children (`replay.runner`: a
process per run, forked from a zygote, its own folder, session and timeout), under the
replay's trust rules (`admit`): its entrypoint allowed here (--allow-module /
--allow-entrypoint) and signed by the app (TRACEFIX_REPLAY_KEY, or --allow-unsigned). A run's
cassette has no LLM step: every LLM call goes live to the agent's model, from the first.
Tools (`tools`): `recorded` serves a call its recording when one with the same fingerprint
(tool and arguments) was recorded and not served yet, and runs it live otherwise; `live`
runs every call live, which, as in a replay, needs state a snapshot restores (the item's
first snapshots are restored before the first call) or --allow-live-tools.

A run is scored by the app's own signal: the evaluator's outcome as the child's report
carries it (`tracefix.session` outcome), and the milestones it reported. A run of an app
without an evaluator is scored, when an LLM is configured, by the replay's judge
(`judge.judge_success`: the run's output and log against the recorded task and how the
recorded run went), and its verdict says so; without one it stays unscored. An item's verdict
(`verdict`) compares its recorded outcome with its runs' k/N: fixed, still failing, flaky,
newly failing, passing; refused (not run: why) and error (no run got as far as an outcome).
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

from tracefix import replay_signing
from tracefix.entrypoints import EntrypointRefused, check as check_entrypoint
from tracefix.replay import judge, runner
from tracefix.replay.admission import UnsignedSession
from tracefix.replay.pipeline import wait_for_session

TOOL_MODES = ("recorded", "live")
VERDICTS = ("fixed", "still failing", "flaky", "newly failing", "passing", "refused", "error")
FAILING = ("still failing", "newly failing")  # what makes `tracefix regress` exit 1
UNCHECKED = ("refused", "error")  # what makes it exit 2: nothing says the item passes
# who scored a run other than the app's evaluator (a run's `judged_by`, judge.judge_success's names)
SCORED_BY = {"llm": "the LLM judge", "ground_truth": "the session's ground truth"}


@dataclass
class RegressOptions:
    allowed_modules: list[str] = field(default_factory=list)
    allowed_entrypoints: list[str] = field(default_factory=list)
    runs: int = 3
    tools: str = "recorded"
    allow_live_tools: bool = False
    replay_key: bytes | None = None
    allow_unsigned: bool = False
    concurrency: int = 3
    preload: bool = True
    timeout_s: float = runner.DEFAULT_TIMEOUT_S
    overrides: dict = field(default_factory=dict)
    otlp_endpoint: str | None = None
    otlp_headers: dict | None = None
    workdir: str | None = None
    keep: bool = False

    def __post_init__(self):
        if self.tools not in TOOL_MODES:
            raise ValueError(f"--tools is one of {', '.join(TOOL_MODES)}, not {self.tools!r}")


def new_run_id() -> str:
    return f"rg-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def admit(item: dict, options: RegressOptions) -> str | None:
    """Why `item` may not run here (its entrypoint not allowed, not signed, not replayable, live
    tools on unrestored state), else None. A note on an unsigned item run anyway is `signed_note`."""
    entrypoint, inputs = item.get("entrypoint"), item.get("inputs")
    if not entrypoint or inputs is None:
        return "no recorded entrypoint and inputs: record the session inside tracefix.session(entrypoint=..., inputs=...)"
    try:
        check_entrypoint(entrypoint, options.allowed_modules, options.allowed_entrypoints)
        signed_note(item, options)
    except EntrypointRefused as exc:  # UnsignedSession is one too
        return str(exc)
    if options.tools == "live" and not options.allow_live_tools and item.get("recorded_tools") \
            and not item.get("snapshots"):
        return ("its tools would run live on state that no snapshot restores; track the state with "
                "tracefix.track(key, obj), serve them from the recording (--tools recorded) or pass --allow-live-tools")
    return None


def signed_note(item: dict, options: RegressOptions) -> str | None:
    """None when the app signed the item's entrypoint, inputs and session id with the replay
    key; with --allow-unsigned the note that says it was not; else UnsignedSession."""
    why = replay_signing.why_unverified(item.get("signatures") or [], options.replay_key, item["session_id"],
                                        item.get("entrypoint"), item.get("inputs"))
    if why is None:
        return None
    if options.allow_unsigned:
        return f"run without a valid signature (--allow-unsigned): {why}"
    raise UnsignedSession(f"{why}; {replay_signing.ALLOW_HINT}")


def cassette_of(item: dict, tools: str) -> dict:
    """A run's cassette (contracts §4): no LLM step (every call live), the item's first
    snapshots, and with `recorded` tools its recorded tool calls."""
    return {"session_id": item["session_id"], "entrypoint": item["entrypoint"], "inputs": item["inputs"], "steps": [],
            "snapshots": list(item.get("snapshots") or []),
            "recorded_tools": list(item.get("recorded_tools") or []) if tools == "recorded" else []}


def score_run(result: dict) -> dict:
    """One run as the item's result keeps it: success by the app's evaluator (None: unjudged),
    the milestones it reported, what was served from the recording, wall time, error."""
    report = result.get("report") or {}
    evaluation = report["evaluation"] if isinstance(report.get("evaluation"), dict) else {}
    outcome = report.get("outcome")
    milestones = [m for m in evaluation.get("milestones") or [] if isinstance(m, dict)]
    counts = report.get("counts") or {}
    error = result.get("error") if not outcome else None  # an agent that raised after the evaluator ran has an outcome
    return {"child_session_id": result["child_session_id"],
            "success": None if outcome is None else outcome == "success",
            "judged_by": None if outcome is None else "evaluator",
            "milestones": [{"name": str(m.get("name")), "achieved": bool(m.get("achieved"))} for m in milestones],
            "llm_requests": counts.get("llm_live", 0), "tools_recorded": counts.get("tool_cassette", 0),
            "tools_live": counts.get("tool_live", 0), "wall_s": result.get("wall_s"), "error": error,
            **({"log_tail": result.get("log_tail")} if error else {})}


def before_of(item: dict) -> bool | None:
    """Whether the item's session succeeded as recorded: its evaluator's outcome; a thumbs-down
    without one counts as a failure."""
    if item.get("outcome") in ("success", "failure"):
        return item["outcome"] == "success"
    if item.get("kind") == "thumbs-down" or (item.get("feedback_score") is not None and item["feedback_score"] < 0):
        return False
    return None


def recorded_complaint(item: dict, doc: dict) -> str | None:
    """What the judge is told of the recorded run: the feedback's comments and how it went."""
    said = [str(f["comment"]) for f in doc.get("feedback") or [] if f.get("comment")]
    before = before_of(item)
    if item.get("outcome") in ("success", "failure"):
        said.append(f"the recorded run's outcome: {item['outcome']}")
    elif before is False:
        said.append("a person gave the recorded run a thumbs-down")
    return "; ".join(said) or None


def judge_unscored(item: dict, results: list[dict], runs: list[dict], access, llm) -> None:
    """Score, in place, the runs the app left without an outcome (no evaluator) that ended
    without an error, by the replay's judge: the run's output and stored session against
    the recorded session (its document when stored here, else the item's inputs)."""
    todo = [(result, run) for result, run in zip(results, runs) if run["success"] is None and not run["error"]]
    if not todo:
        return
    doc = (access.get_session(item["session_id"]) if item.get("stored") else None) or {"inputs": item.get("inputs")}
    complaint = recorded_complaint(item, doc)
    for result, run in todo:
        child_doc = wait_for_session(access, run["child_session_id"])
        success, by = judge.judge_success(result.get("report") or {}, doc, child_doc, llm, complaint)
        if success is not None:
            run["success"], run["judged_by"] = success, by


def verdict(before: bool | None, runs: list[dict], *, llm_judge: bool = False) -> tuple[str, str]:
    """(verdict, reason) of an item from its recorded outcome and its runs. `llm_judge`: an
    LLM judge was there to score runs without an outcome."""
    judged = [r for r in runs if r["success"] is not None]
    if not judged:
        first = next((r["error"] for r in runs if r.get("error")), None)
        return "error", first or (
            "could not be scored: no run reported an outcome (the app has no evaluator, or the agent never ended "
            "its session) " + ("and the LLM judge gave no answer" if llm_judge else
                               "and no LLM judge is configured (TRACEFIX_LLM_BASE_URL or --llm-base-url)"))
    k, n = sum(1 for r in judged if r["success"]), len(runs)
    if 0 < k < n:
        return "flaky", f"{k}/{n} runs succeeded"
    if k == n:
        return ("passing", f"all {n} runs succeeded, as recorded") if before else \
            ("fixed", f"all {n} runs succeeded; the recorded session " + ("failed" if before is False else "had no outcome"))
    return ("newly failing", f"no run succeeded; the recorded session succeeded") if before else \
        ("still failing", f"no run of {n} succeeded")


def item_result(item: dict, runs: list[dict], run_id: str, *, refused: str | None = None,
                note: str | None = None, llm_judge: bool = False) -> dict:
    """What a regression run stores for one item (contracts §8)."""
    before = before_of(item)
    milestones = item.get("milestones") or []
    if refused is not None:
        name, reason = "refused", refused
    else:
        name, reason = verdict(before, runs, llm_judge=llm_judge)
        scorers = sorted({SCORED_BY[r["judged_by"]] for r in runs if r.get("judged_by") in SCORED_BY})
        if scorers:  # said first: the table shows a reason's start
            reason = f"scored by {' and '.join(scorers)} (no evaluator): {reason}"
    return {"run_id": run_id, "dataset": item.get("dataset"), "session_id": item["session_id"],
            "service": item.get("service"), "entrypoint": item.get("entrypoint"),
            "task": (item.get("inputs") or {}).get("task_id") if isinstance(item.get("inputs"), dict) else None,
            "before": {"success": before, "outcome": item.get("outcome"),
                       "milestones": f"{sum(1 for m in milestones if m.get('achieved'))}/{len(milestones)}"
                       if milestones else None},
            "after": {"succeeded": sum(1 for r in runs if r["success"]), "runs": len(runs)},
            "verdict": name, "reason": reason, "notes": [note] if note else [], "runs": runs,
            "original_wall_s": item.get("wall_s")}


def regress(items: list[dict], options: RegressOptions, *, run_id: str | None = None,
            progress: Callable[[int, int], None] | None = None,
            zygotes=None, access=None, llm=None) -> list[dict]:
    """Run every admitted item `options.runs` times (`options.concurrency` children at once);
    one result per item, in the items' order (refused ones without runs). With `llm` (the
    product's LLM client) and `access` (the collector the runs export to), runs without an
    outcome are scored by the judge (`judge_unscored`)."""
    llm_judge = llm is not None and access is not None
    run_id = run_id or new_run_id()
    refusals: dict[str, str] = {}
    notes: dict[str, str | None] = {}
    jobs: list[runner.ReplayJob] = []
    for item in items:
        refusal = admit(item, options)
        if refusal is not None:
            refusals[item["session_id"]] = refusal
            continue
        notes[item["session_id"]] = signed_note(item, options)
        cassette = cassette_of(item, options.tools)
        jobs += [runner.ReplayJob(key=item["session_id"], run_index=i, cassette=cassette, intervention=None,
                                  parent_session_id=item["session_id"], otlp_endpoint=options.otlp_endpoint,
                                  allowed_modules=list(options.allowed_modules),
                                  allowed_entrypoints=list(options.allowed_entrypoints),
                                  overrides=dict(options.overrides), service=item.get("service"),
                                  otlp_headers=options.otlp_headers, timeout_s=options.timeout_s,
                                  child_session_id="s-regress-" + uuid.uuid4().hex[:16])
                 for i in range(options.runs)]
    results: list[dict] = []
    if jobs:
        with runner.replay_folder(options.workdir, keep=options.keep) as folder:
            results = runner.run_all(jobs, concurrency=options.concurrency, workdir=folder, preload=options.preload,
                                     zygotes=zygotes, progress=progress)
    out = []
    for item in items:
        sid = item["session_id"]
        if sid in refusals:
            out.append(item_result(item, [], run_id, refused=refusals[sid]))
            continue
        mine = [r for r in results if r["key"] == sid]
        refused = next((r["report"]["refused"] for r in mine if (r["report"] or {}).get("refused")), None)
        runs = [] if refused else [score_run(r) for r in mine]
        if llm_judge:
            judge_unscored(item, mine, runs, access, llm)
        out.append(item_result(item, runs, run_id, refused=refused, note=notes.get(sid), llm_judge=llm_judge))
    return out


def exit_code(results: list[dict]) -> int:
    """1 when an item is still or newly failing, else 2 when one could not be checked
    (refused, error), else 0."""
    verdicts = {r["verdict"] for r in results}
    if verdicts & set(FAILING):
        return 1
    return 2 if verdicts & set(UNCHECKED) else 0
