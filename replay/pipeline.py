"""DoVer do-then-verify on one recorded session: the replay worker's entry point.

``diagnose(access, session_id, ...)`` segments the session into trials, attributes a
hypothesis to each failed trial, writes one intervention per hypothesis, replays the
session from the intervention step in child processes (``runs`` times each, ``concurrency``
at once), judges every replay, gives each hypothesis its DoVer verdict, and stores the
result (contracts §5) with ``access.save_replay``. With ``rounds > 1`` repair memory
carries what was tried into the next round. A ``tracefix worker`` (replay/worker.py) calls
it for the replay jobs it claims; ``tracefix replay`` calls it from the command line.
"""
from __future__ import annotations

import datetime as dt
import os
import time

from tracefix import replay_signing
from tracefix.entrypoints import EntrypointRefused, check as check_entrypoint
from tracefix.replay import attribution, cassette as cassettes, edit_expectation, interventions, judge, runner, trials, verdicts
from tracefix.replay.admission import ReplayError, check_replayable, check_signature
from tracefix.replay.contracts import ReplayResult
from tracefix.replay.guard import Guard
from tracefix.replay.memory import RepairMemory
from tracefix.replay.preload_modules import app_preloads


def load_analysis(access, session_id: str, notes: list[str]) -> dict | None:
    analysis = access.get_analysis(session_id)
    if analysis:
        return analysis
    try:
        from tracefix.analysis.pipeline import analyze_session
    except ImportError as exc:
        notes.append(f"no analysis stored and the analysis part is unavailable ({exc}); attribution uses errors only")
        return None
    analysis = analyze_session(access, session_id)
    return analysis


def wait_for_session(access, session_id: str, timeout_s: float = 20.0) -> dict | None:
    """The child's stored session once the collector has it (the child flushed before exiting)."""
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        doc = access.get_session(session_id)
        if doc is not None and doc.get("ended_at"):
            return doc  # its root span arrived: the session is complete (even with no steps)
        if doc is not None and doc.get("steps"):
            if last is not None and len(last.get("steps") or []) == len(doc["steps"]):
                return doc
            last = doc
        if time.monotonic() > deadline:
            return doc
        time.sleep(0.1)


def prefix_violation(report: dict, child_doc: dict | None, doc: dict, t: int) -> str | None:
    """Did any call before step t reach the network or run a tool? (It must not.)"""
    divergence = report.get("divergence")
    limit = divergence["step"] if isinstance(divergence, dict) and divergence.get("step") is not None else t
    limit = min(limit, t)
    counts = report.get("counts") or {}
    if counts and counts.get("llm_cassette", 0) < limit:
        return f"only {counts.get('llm_cassette', 0)} LLM calls came from the cassette before step {limit}"
    recorded_tools = sum(len(s.get("tool_calls") or []) for s in doc.get("steps") or [] if s["index"] < limit)
    if counts and counts.get("tool_cassette", 0) < recorded_tools:
        return (f"{recorded_tools} tool calls before step {limit} were recorded but only "
                f"{counts.get('tool_cassette', 0)} came from the cassette: a tool ran live in the prefix")
    for step in (child_doc or {}).get("steps") or []:
        if step["index"] < limit and step.get("replay_source") not in (None, "cassette"):
            return f"step {step['index']} (before the intervention at {t}) ran {step.get('replay_source')}"
    return None


def _live_tools_allowed(cassette: dict, doc: dict, t: int, allow_live_tools: bool) -> str | None:
    if allow_live_tools or cassettes.restored_at(cassette, t):
        return None
    if not any(s.get("tool_calls") for s in doc.get("steps") or [] if s["index"] >= t):
        return None
    return (f"tools would run live after step {t} on state that no snapshot restores; "
            "track the state with tracefix.track(key, obj) or pass --allow-live-tools")


def requested_hypotheses(request: dict | None) -> list[dict] | None:
    """The hypotheses a person asked for (a job's `replay_request`): the steps to test, with
    their own intervention text when they gave one; None lets attribution choose."""
    if not request:
        return None
    edit = request.get("edit")
    return [{"step": step, **({"intervention": {"text": edit}} if edit else {})} for step in request["steps"]]


def _user_hypotheses(doc: dict, given: list[dict], trials_: list[dict], round_: int) -> list[dict]:
    by_index = {s["index"]: s for s in doc["steps"]}
    out = []
    for g in given:
        step = int(g["step"])
        if step not in by_index:
            raise ReplayError(f"hypothesis step {step} is outside the session (0..{len(doc['steps']) - 1})")
        trial = next((t["index"] for t in trials_ if t["start"] <= step <= t["end"]), None)
        out.append({"id": attribution.hypothesis_id(doc["session_id"], round_, step, "user"), "round": round_,
                    "trial": trial, "step": step, "agent": g.get("agent") or by_index[step].get("agent"),
                    "reason": g.get("reason") or "given by the user", "source": "user",
                    "evidence": g.get("evidence") or {"step": step},
                    "_intervention": g.get("intervention")})
    return out


def _user_intervention(doc: dict, h: dict, given: dict, definitions: list[dict] | None = None) -> dict:
    base = interventions.template(doc, h)
    kind = given.get("kind") or base["kind"]
    text = given.get("text") or base["text"]
    step = next(s for s in doc["steps"] if s["index"] == h["step"])
    # A person's own text is judged by what it asks, not by what the template would have asked.
    expect = (edit_expectation.expectation(text, doc, h.get("agent"), definitions) if given.get("text")
              else base["expect"])
    iv = interventions._finish(doc, h, step, kind, given.get("category") or base["category"], text,
                               {**expect, **(given.get("expect") or {})}, "user", given.get("tool_call_id"))
    return iv


def resolve_llm(llm):
    """None: the TRACEFIX_LLM_* endpoint when configured; False: no LLM; else the given client."""
    if llm is False:
        return None
    if llm is None:
        from tracefix.analysis.llm import ProductLLM

        return ProductLLM.from_env()
    return llm


def resolve_endpoint(access, endpoint: str | None) -> str:
    """Where replay children export their spans: the given endpoint, else the collector the
    access object talks to, else TRACEFIX_OTLP_ENDPOINT."""
    endpoint = endpoint or getattr(access, "server", None) or os.environ.get("TRACEFIX_OTLP_ENDPOINT")
    if not endpoint:
        raise ReplayError("replays need a collector to export to: give its OTLP/HTTP endpoint "
                          "(tracefix replay --server URL, or TRACEFIX_OTLP_ENDPOINT)")
    return endpoint


def _memory_candidates(doc: dict, trial_list: list[dict], memory: RepairMemory, round_: int) -> list[dict]:
    """Round 2+ candidates that come from what earlier rounds learned:
    - for a worker step whose edit was not carried out or did not fix its trial, the
      orchestrator instruction that started that worker's turn;
    - for the trial that ends the session, still unfixed, its final answer: the session
      failed, so answering there may have been premature."""
    def candidate(step: dict, trial, reason: str, evidence: dict) -> dict:
        return {"id": attribution.hypothesis_id(doc["session_id"], round_, step["index"], "memory"), "round": round_,
                "trial": trial, "step": step["index"], "agent": step.get("agent"), "reason": reason,
                "source": "memory", "evidence": evidence}

    out = []
    for tried in memory.tried:
        if tried["verdict"] == "validated":
            continue
        upstream = attribution.upstream_instruction(doc, tried["step"])
        if upstream is not None:
            out.append(candidate(upstream, tried["trial"],
                                 f"the edit at step {tried['step']} ({tried['agent']}) was {tried['verdict']}; "
                                 f"the instruction at step {upstream['index']} that started that turn may be at fault",
                                 {"step": upstream["index"], "downstream_step": tried["step"]}))
    last = doc["steps"][-1]
    final = next((t["index"] for t in trial_list if t["start"] <= last["index"] <= t["end"]), None)
    tried_trials = {t["trial"] for t in memory.tried}
    if final in tried_trials and final not in memory.fixed_trials() and not last.get("tool_calls"):
        out.append(candidate(last, final, "the session ends in this answer although it failed: "
                                          "it may have come too early", {"step": last["index"]}))
    return out


def _stage_label(labels: set[str]) -> str:
    labels = {x for x in labels if x}
    return "+".join(sorted(labels)) if labels else "none"


def diagnose(access, session_id: str, *, allowed_modules: list[str], llm=None, runs: int = 3,
             concurrency: int = 3, preload: bool = True, zygotes=None, rounds: int = 1, guard: bool = False, allow_live_tools: bool = False,
             otlp_endpoint: str | None = None, overrides: dict | None = None, progress=None,
             hypotheses: list[dict] | None = None, per_trial: int = 1,
             timeout_s: float = runner.DEFAULT_TIMEOUT_S, workdir=None, keep: bool = False,
             save: bool = True, allowed_entrypoints: list[str] | tuple[str, ...] = (),
             replay_key: str | bytes | None = None, allow_unsigned: bool = False,
             preload_modules: list[str] | tuple[str, ...] = ()) -> ReplayResult:
    """Test the session's failure hypotheses by replay; return (and store) the replay result.

    The session's recorded entrypoint is imported (in the replay children) only when its
    module is in `allowed_modules` and the app marked it replayable, or it is one of
    `allowed_entrypoints`, and only when the app signed it, its inputs and the session id
    with `replay_key` (default TRACEFIX_REPLAY_KEY; `allow_unsigned` skips that check and
    says so in the notes): EntrypointRefused otherwise, before anything runs (a mark is
    read in the first replay children, which import the module: their refusal ends the
    diagnosis the same way).
    `overrides` replaces recorded entrypoint inputs (e.g. `base_url`), trusted as the
    operator's own; `hypotheses`, when
    given, replaces attribution (`[{"step": k, "intervention": {"text": ..., "kind": ...}?}]`);
    `preload` forks the children from a process that imported the agent's traced libraries
    once (tracefix.replay.zygote; `zygotes`: a worker's warm ones), and the agent's own
    `preload_modules` (within `allowed_modules`) when a trial import finds that safe. `progress(message)` is called as work advances. `llm=None` uses the TRACEFIX_LLM_*
    endpoint when one is configured; `llm=False` forces the deterministic fallbacks.
    The children's files go to a private folder (`workdir`, else a temporary one), removed
    at the end unless `keep`.
    """
    say = progress or (lambda message: None)
    doc = access.get_session(session_id)
    spans: list[dict] = []
    notes: list[str] = []
    if doc is not None and doc.get("entrypoint"):  # first: whatever else is wrong, say that it is refused
        check_entrypoint(doc["entrypoint"], allowed_modules, allowed_entrypoints)
        spans = access.get_spans(session_id)
        key = replay_signing.as_key(replay_key) if replay_key is not None else replay_signing.key_from_env()
        unsigned = check_signature(doc, spans, key, allow_unsigned)
        notes += [unsigned] if unsigned else []
    doc = check_replayable(doc, session_id, allow_live_tools)
    llm = resolve_llm(llm)
    otlp_endpoint = resolve_endpoint(access, otlp_endpoint)
    token = getattr(access, "token", None)  # a collector with --token wants it on OTLP too
    otlp_headers = {"authorization": f"Bearer {token}"} if token else None
    analysis = load_analysis(access, session_id, notes)
    try:
        cassette = cassettes.build(doc, spans)
    except cassettes.CassetteError as exc:
        raise ReplayError(str(exc)) from exc
    definitions = cassettes.tool_definitions(doc, spans)

    trial_list, segmentation_label, note = trials.segment(doc, analysis, llm)
    notes += [note] if note else []
    say(f"{len(trial_list)} trial(s); segmentation by {segmentation_label}")
    memory = RepairMemory()
    tested: list[dict] = []
    labels = {"attribution": set(), "intervention": set(), "judging": set(), "fulfilment": set(), "progress": set()}
    milestone_judge = judge.MilestoneJudge(llm, doc) if llm is not None and doc.get("ground_truth") else None
    rounds_run = 0

    for round_ in range(1, max(1, rounds) + 1):
        chosen = _hypotheses_for_round(round_, doc, trial_list, analysis, llm, memory, hypotheses, per_trial,
                                       labels, notes)
        if not chosen:
            notes.append(f"round {round_}: nothing left to try")
            break
        rounds_run = round_
        jobs = []
        for h in chosen:
            jobs += _intervene(h, doc, cassette, definitions, llm, memory, labels, notes, runs=runs,
                               guard=guard, allow_live_tools=allow_live_tools,
                               job=dict(parent_session_id=session_id, otlp_endpoint=otlp_endpoint,
                                        overrides=dict(overrides or {}), service=doc.get("service"),
                                        otlp_headers=otlp_headers, timeout_s=timeout_s,
                                        allowed_modules=list(allowed_modules),
                                        allowed_entrypoints=list(allowed_entrypoints)))
        say(f"round {round_}: {len(chosen)} hypothesis(es), {len(jobs)} replay(s), {concurrency} at a time")
        with runner.replay_folder(workdir, keep=keep) as folder:
            results = runner.run_all(jobs, concurrency=concurrency, workdir=folder, preload=preload,
                                     zygotes=zygotes, app_modules=app_preloads(preload_modules, allowed_modules),
                                     progress=lambda done, total: say(f"replays {done}/{total}"))
        refused = next((r["report"]["refused"] for r in results if (r["report"] or {}).get("refused")), None)
        if refused:  # the app did not mark the entrypoint: nothing of it ran, nothing is stored
            raise EntrypointRefused(refused)
        # the child's session is judged without them: whoever reads the verdict is told
        notes += [f"replay {r['child_session_id']}: {r['spans_rejected']}" for r in results if r.get("spans_rejected")]
        for h in chosen:
            for r in (r for r in results if r["key"] == h["id"]):
                h["runs"].append(_judge_run(r, h["intervention"], doc, access, llm, milestone_judge, labels))
            if h.get("refused"):
                h["verdict"], h["verdict_reason"] = "inconclusive", f"not replayed: {h.pop('refused')}"
            else:
                h["verdict"], h["verdict_reason"] = verdicts.verdict(h["runs"])
            memory.record(round_, h)
            tested.append(h)
        if trial_list and memory.fixed_trials() >= {t["index"] for t in trial_list if t.get("failed")}:
            break

    result = {
        "session_id": session_id,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "rounds": rounds_run,
        "runs_per_intervention": runs,
        "guard": guard,
        "stages": {"segmentation": segmentation_label,
                   **{k: _stage_label(v) for k, v in labels.items()}},
        "llm": ({"base_url": llm.base_url, "model": llm.model, "requests": llm.requests} if llm is not None else None),
        "trials": trial_list,
        "hypotheses": tested,
        "memory": memory.summary(),
        "notes": notes,
    }
    if save:
        access.save_replay(session_id, result)
    return result


def _hypotheses_for_round(round_: int, doc: dict, trial_list: list[dict], analysis, llm, memory: RepairMemory,
                          given: list[dict] | None, per_trial: int, labels: dict, notes: list[str]) -> list[dict]:
    """Round 1: the user's hypotheses, else attribution; later rounds: what memory says is
    still worth trying (untried steps first, refuted steps and fixed trials never)."""
    if given and round_ == 1:
        labels["attribution"].add("user")
        return _user_hypotheses(doc, given, trial_list, round_)
    candidates, label, attribution_notes = attribution.attribute(
        doc, trial_list, analysis, llm, round_=round_, per_trial=per_trial + round_ - 1)
    labels["attribution"].add(label)
    notes += attribution_notes
    if round_ == 1:
        return candidates
    return memory.plan_round(_memory_candidates(doc, trial_list, memory, round_) + candidates)


def _intervene(h: dict, doc: dict, cassette: dict, definitions: dict, llm, memory: RepairMemory, labels: dict,
               notes: list[str], *, runs: int, guard: bool, allow_live_tools: bool, job: dict) -> list:
    """Write the hypothesis' intervention and the replay jobs that test it (none if refused)."""
    given = h.pop("_intervention", None)
    if given:
        iv, label = _user_intervention(doc, h, given, definitions.get(h["step"])), "user"
    else:
        iv, label, note = interventions.generate(doc, h, llm, definitions=definitions.get(h["step"]),
                                                 memory_notes=memory.notes_for(h["step"]),
                                                 session_definitions=definitions)
        notes += [note] if note else []
    labels["intervention"].add(label)
    h["intervention"], h["runs"] = iv, []
    refusal = _live_tools_allowed(cassette, doc, iv["step"], allow_live_tools)
    if refusal:
        h["refused"] = refusal
        return []
    guard_config = Guard.from_intervention(iv).to_json() if guard else None
    # what the instrumentation applies (contracts §4); the rest stays in the result
    wire = {k: v for k, v in iv.items() if k not in ("before", "expect", "source", "agent")}
    return [runner.ReplayJob(key=h["id"], run_index=i, cassette=cassette, intervention=wire, guard=guard_config, **job)
            for i in range(runs)]


def _judge_run(r: dict, iv: dict, doc: dict, access, llm, milestone_judge, labels: dict) -> dict:
    judging = time.monotonic()
    report = r["report"] or {}
    child_doc = wait_for_session(access, r["child_session_id"]) if not r["error"] or report else None
    error = r["error"]
    if not error:
        error = prefix_violation(report, child_doc, doc, iv["step"])
        if error:
            error = "safety: " + error
    if error and not report.get("outcome") and not report.get("evaluation"):
        success, s_by = None, "unjudged"
        fulfilled, f_by = None, "unavailable"
        prog, p_by = None, "unmeasured"
    else:
        success, s_by = judge.judge_success(report, doc, child_doc, llm)
        if error:
            # The run stopped (crash, timeout, safety) before the agent could show whether it
            # carries the edit out: it neither fulfils nor refuses it, so it cannot refute.
            fulfilled, f_by = None, "unavailable"
        else:
            fulfilled, f_by = judge.judge_fulfilled(iv, doc, child_doc, llm)
        prog, p_by = judge.judge_progress(report, doc, child_doc, milestone_judge)
    labels["judging"].add(s_by)
    labels["fulfilment"].add(f_by)
    labels["progress"].add(p_by)
    return {"child_session_id": r["child_session_id"], "success": success, "score": report.get("score"),
            "fulfilled": fulfilled, "progress": prog,
            "judged_by": {"success": s_by, "fulfilled": f_by, "progress": p_by},
            "counts": report.get("counts") or {}, "divergence": report.get("divergence"),
            "output": report.get("output"), "wall_s": r["wall_s"], "error": error,
            "guard": report.get("guard"),
            # where the child's wall time went (runner.PHASES, ms), and the judging after it
            "phases": {**(r.get("phases") or {}), "judge": round((time.monotonic() - judging) * 1000, 1)},
            "forked": r.get("forked"), "cpu_ms": r.get("cpu_ms"), "spans_rejected": r.get("spans_rejected"),
            # what the child printed when something went wrong (its folder is gone unless kept)
            **({"log": r["log"], "log_tail": r["log_tail"]} if error or report.get("divergence") else {})}
