"""What a root-cause report says, independent of how it is rendered.

The HTML and Markdown renderers (``tracefix.report.render``) both read from here: the
session facts, the one-paragraph summary, a short line per step, the trials, which
stages used an LLM, and the per-run comparison of a replay with the original session
from the intervention step on. Inputs are the contract shapes of docs/contracts.md: the
session document (§1), the analysis result (§3) and the replay result (§5). Any of the
latter two may be missing (not analyzed or not replayed yet), and any field of a shape
may be absent in a partial result; nothing here raises on that. The results are stored as
their clients posted them (the API checks their outline only), so what is inside is read
through `objects`, `fields` and `whole`: an entry that is no object is skipped, a step that
is no number is no step, and text stays text.
"""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field

from tracefix.collector.document import session_task, unrecorded_tools

VERDICT_WORDS = {
    "validated": "validated",
    "partially_validated": "partially validated",
    "refuted": "refuted",
    "inconclusive": "inconclusive",
    "error": "error (no replay ran through)",
}
# Order in which verdicts make a hypothesis the report's headline.
VERDICT_STRENGTH = {"validated": 0, "partially_validated": 1, "inconclusive": 2, "refuted": 3, "error": 4}
STAGE_NAMES = {
    "segmentation": "trial segmentation",
    "attribution": "failure attribution",
    "intervention": "intervention writing",
    "judging": "judging replays",
    "fulfilment": "judging whether an edit was followed",
    "progress": "judging progress",
}
HOW_WORDS = {"llm": "LLM", "fallback": "deterministic fallback", "template": "deterministic template",
             "evaluator": "the agent's evaluator", "heuristic": "heuristic", "milestones": "milestones",
             "ground_truth": "ground truth", "none": "not needed"}
EVIDENCE_SHOWN = ("detectors", "features", "path", "tool", "error", "symptoms", "hgt_expected")
# how a step the run got past is named where the store holds no error for it (its tool
# answered the failure as text, and the analysis read it from the result)
FAILURE_READ_FROM_RESULT = "failure read from its result"


def objects(value) -> list[dict]:
    """The objects of a stored list: its dict items (none for anything but a list)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def fields(value) -> dict:
    """A stored object's fields (none for anything but an object)."""
    return value if isinstance(value, dict) else {}


def whole(value, default: int | None = None) -> int | None:
    """A stored step number, rank or position as an int: a number or a numeral (a bool is
    neither), else `default`."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return default
    try:
        return int(value)
    except (ValueError, OverflowError):
        return default


def hypotheses(result: dict | None) -> list[dict]:
    """The hypotheses of an analysis or replay result in stored order (the objects among them)."""
    return objects(fields(result).get("hypotheses"))


def listed(value) -> list:
    """A stored list as a list: a lone value is a list of one, null none."""
    return value if isinstance(value, list) else [] if value is None else [value]


def to_json(value, *, indent: int | None = 2) -> str:
    """JSON for display: readable, never raising on odd values."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=indent, ensure_ascii=False, default=str, sort_keys=False)
    except (TypeError, ValueError):
        return repr(value)


def clip(text: str, limit: int) -> str:
    """Cut long text for display and say how much was cut (never silently)."""
    text = text or ""
    if len(text) <= limit:
        return text
    return text[:limit] + f" … ({len(text) - limit} more characters)"


def one_line(text, limit: int = 160) -> str:
    return clip(" ".join(str(text or "").split()), limit)


def brief(text, limit: int = 160) -> str:
    """One line for running prose: cut with an ellipsis (the full text is further down)."""
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


def fmt_duration(ms) -> str:
    if ms is None:
        return "—"
    seconds = float(ms) / 1000.0
    if seconds < 1:
        return f"{float(ms):.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


def fmt_score(value, digits: int = 2) -> str:
    if value is None:
        return "—"
    try:
        return f"{float(value):.{digits}f}"
    except (TypeError, ValueError):
        return str(value)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def yes_no(value) -> str:
    return "—" if value is None else "yes" if value else "no"


STEP_PREFIX = re.compile(r"^\s*step \d+ \([^)]*\):\s*", re.I)


def sentence(text) -> str:
    """A reason quoted after our own "step k (agent) —": without its own "Step k (agent):"
    prefix and without a full stop that ours would double."""
    return brief(STEP_PREFIX.sub("", str(text or "")), 220).rstrip(" .")


def verdict_word(verdict) -> str:
    if not verdict:
        return "not tested"
    return VERDICT_WORDS.get(verdict, verdict) if isinstance(verdict, str) else str(verdict)


# --- the session ---------------------------------------------------------------------------

def task_text(doc: dict) -> str:
    task = session_task(doc)
    return re.sub(r"^\s*task:\s*", "", task, flags=re.I) if task else "(no task recorded)"


def outcome_text(doc: dict) -> str:
    outcome = doc.get("outcome") or "unknown"
    score = doc.get("score")
    return outcome if score is None else f"{outcome} (score {fmt_score(score)})"


def final_answer(output) -> str:
    if isinstance(output, dict) and "final_answer" in output:
        return str(output["final_answer"])
    if output is None:
        return ""
    return to_json(output, indent=None)


def facts(doc: dict) -> list[tuple[str, str]]:
    """The session at a glance, as (label, value) rows."""
    tokens = doc.get("tokens") or {}
    rows = [
        ("Session", str(doc.get("session_id") or "?")),
        ("Task", task_text(doc)),
        ("Outcome", outcome_text(doc)),
        ("Final answer", final_answer(doc.get("output")) or "—"),
        ("Service", str(doc.get("service") or "—")),
        ("Entrypoint", str(doc.get("entrypoint") or "—")),
        ("Agents", ", ".join(map(str, doc.get("agents") or [])) or "—"),
        ("Models", ", ".join(map(str, doc.get("models") or [])) or "—"),
        ("Tokens", f"{tokens.get('input', 0) or 0:,} in / {tokens.get('output', 0) or 0:,} out"),
        ("Time", f"{fmt_duration(doc.get('duration_ms'))}, {plural(len(doc.get('steps') or []), 'step')}"
                 + (f", started {doc['started_at']}" if doc.get("started_at") else "")),
    ]
    if doc.get("parent_session_id"):
        rows.append(("Replay of", str(doc["parent_session_id"])))
    rows.append(("Replay", replay_readiness(doc)))
    return rows


def replay_readiness(doc: dict) -> str:
    """Whether a replay can re-run this session from its recording, in a sentence."""
    if not doc.get("replayable"):
        return "not replayable (no entrypoint recorded, or an incomplete recording)"
    live = unrecorded_tools(doc.get("steps") or [])
    if live:
        return (f"with live tools only: {', '.join(live)} ran without @tracefix.tool, so a replay runs them "
                "again for real (tracefix replay --allow-live-tools)")
    return "replayable from the recording"


def feedback_lines(doc: dict) -> list[str]:
    out = []
    for fb in doc.get("feedback") or []:
        score = fb.get("score")
        thumb = "thumbs-down" if score is not None and float(score) < 0 else "thumbs-up" if score is not None and float(score) > 0 else "neutral"
        comment = f": “{fb['comment']}”" if fb.get("comment") else ""
        when = f" ({fb['created_at']})" if fb.get("created_at") else ""
        out.append(f"{thumb} (score {fmt_score(score, 1)}){comment}{when}")
    return out


def milestones(doc: dict) -> list[tuple[str, bool]]:
    evaluation = fields(doc.get("evaluation"))
    return [(str(m.get("name")), bool(m.get("achieved"))) for m in objects(evaluation.get("milestones"))]


# --- steps -----------------------------------------------------------------------------------

def step_action(step: dict) -> str:
    """What the step did, in one line: its tool calls, or the start of its text."""
    calls = step.get("tool_calls") or []
    if calls:
        parts = []
        for call in calls:
            args = call.get("arguments")
            parts.append(f"{call.get('name')}({brief(to_json(args, indent=None), 80) if args not in (None, {}) else ''})")
        return "calls " + ", ".join(parts)
    out = step.get("output_message") or {}
    text = out.get("content") if isinstance(out, dict) else None
    if text:
        return brief(text, 140)
    if step.get("kind") == "message":
        msgs = step.get("input_messages") or []
        if msgs:
            return brief(msgs[-1].get("content"), 140)
    return "(no output)"


def step_errors(step: dict) -> list[str]:
    errors = [str(step["error"])] if step.get("error") else []
    errors += [f"{c.get('name')}: {c['error']}" for c in step.get("tool_calls") or [] if c.get("error")]
    return errors


def new_input_messages(steps: list[dict], i: int) -> tuple[list[dict], int]:
    """The input messages of step i that the previous call of the same agent did not
    already send, and how many earlier ones are hidden. An agent resends its growing
    history every call; repeating it at every step buries what changed."""
    msgs = steps[i].get("input_messages") or []
    agent = steps[i].get("agent")
    for j in range(i - 1, -1, -1):
        if steps[j].get("agent") != agent:
            continue
        prev = list(steps[j].get("input_messages") or [])
        out = steps[j].get("output_message")
        for candidate in (prev + [out] if out else prev, prev):
            if candidate and len(candidate) <= len(msgs) and msgs[:len(candidate)] == candidate:
                return msgs[len(candidate):], len(candidate)
        break
    return msgs, 0


def transcript_lines(steps: list[dict], start: int) -> list[tuple[int, str]]:
    """A compact transcript from step ``start`` on: (step index, line). Lines carry no step
    number, so a replay that inserts one step does not make every later line differ."""
    lines: list[tuple[int, str]] = []
    for step in steps:
        index = int(step.get("index", 0))
        if index < start:
            continue
        agent = step.get("agent") or "?"
        out = step.get("output_message") or {}
        text = out.get("content") if isinstance(out, dict) else None
        if step.get("kind") == "message" and not text:
            text = ((step.get("input_messages") or [{}])[-1] or {}).get("content")
        if text:
            lines.append((index, f"{agent}: {brief(text, 220)}"))
        for call in step.get("tool_calls") or []:
            lines.append((index, f"{agent} → {call.get('name')}({brief(to_json(call.get('arguments'), indent=None), 140)})"))
            if call.get("error"):
                lines.append((index, f"    ✗ {brief(call['error'], 180)}"))
            else:
                lines.append((index, f"    = {brief(to_json(call.get('result'), indent=None), 180)}"))
        if step.get("error"):
            lines.append((index, f"    ✗ {brief(step['error'], 180)}"))
        if not text and not step.get("tool_calls") and not step.get("error"):
            lines.append((index, f"{agent}: (no output)"))
    return lines


@dataclass
class Trial:
    index: int
    start: int
    end: int
    failed: bool | None
    plan_step: int | None = None


def trials(doc: dict, replay: dict | None) -> list[Trial]:
    """The replay's plan–execution trials, or one trial spanning the session."""
    steps = doc.get("steps") or []
    last = max((int(s.get("index", 0)) for s in steps), default=0)
    found = [Trial(whole(t.get("index"), i), whole(t.get("start"), 0), whole(t.get("end"), last),
                   t.get("failed") if isinstance(t.get("failed"), bool) else None, whole(t.get("plan_step")))
             for i, t in enumerate(objects(fields(replay).get("trials")))]
    return sorted(found, key=lambda t: t.start) or [Trial(0, 0, last, None)]


# --- which steps the trace shows ----------------------------------------------------------------

TRACE_STEPS_SHOWN = 300  # a longer session's trace shows the steps around its marks, and its two ends
TRACE_CONTEXT = 2  # steps shown either side of a marked one


def trace_positions(steps: list[dict], analysis: dict | None, replay: dict | None,
                    limit: int = TRACE_STEPS_SHOWN, context: int = TRACE_CONTEXT) -> list[int]:
    """The positions (into `steps`) the trace shows, in order: every step of a session of at
    most `limit` steps. A longer session shows about `limit`: each marked step with `context`
    steps either side, marks taken in the order a reader needs them (the hypotheses by rank,
    the steps a replay tested, the detectors' frontier, then the steps with an error, earliest
    first), its last steps, and its first steps with what is left; so a report of a session of
    any length stays readable and its size bounded."""
    n = len(steps)
    if n <= limit:
        return list(range(n))
    position: dict[int, int] = {}
    for i, step in enumerate(steps):
        position.setdefault(whole(step.get("index"), i), i)
    ranked = sorted((whole(h.get("rank"), 1 << 30), k) for h in hypotheses(analysis)
                    if (k := whole(h.get("step"))) is not None)
    marks = ([k for _, k in ranked] + [k for h in hypotheses(replay) if (k := tested_step(h)) is not None]
             + sorted(frontier_by_step(analysis))
             + [whole(step.get("index"), i) for i, step in enumerate(steps) if step_errors(step)])
    chosen = set(range(context + 1)) | set(range(n - context - 1, n))
    for k in marks:
        if len(chosen) >= limit:
            break
        if (i := position.get(k)) is not None:
            chosen.update(range(max(0, i - context), min(n, i + context + 1)))
    for i in range(n):  # what the marks leave of the budget goes to how the session began
        if len(chosen) >= limit:
            break
        chosen.add(i)
    return sorted(chosen)


def trace_note(steps: list[dict], shown: list[int]) -> str | None:
    """What the trace leaves out, said once above it; None when it shows every step."""
    if len(shown) == len(steps):
        return None
    return (f"The session has {len(steps):,} steps: this trace shows {len(shown):,} of them, around its hypotheses, "
            "the steps a replay tested, the detectors' frontier and its errors, and its first and last steps. "
            "The UI's session page and GET /api/v1/sessions/{id} have every step.")


def trace_gap(steps: list[dict], after: int | None, before: int) -> str | None:
    """The line standing for the steps left out between two shown positions (`after` None:
    from the start); None when nothing is left out there."""
    first = 0 if after is None else after + 1
    if before <= first:
        return None
    low, high = whole(steps[first].get("index"), first), whole(steps[before - 1].get("index"), before - 1)
    return f"{plural(before - first, 'step')} not shown (steps {low}–{high})"


# --- diagnosis -------------------------------------------------------------------------------

def score_by_step(analysis: dict | None) -> dict[int, dict]:
    return {step: s for s in objects(fields(analysis).get("scores")) if (step := whole(s.get("step"))) is not None}


def recovered_by(score: dict | None) -> int | None:
    """For an error step the run got past (its calls made again worked, or failed otherwise
    for good), the step that made them again: the analysis's `recovered_by`."""
    return whole(fields(score).get("recovered_by"))


def got_past_by_step(analysis: dict | None) -> dict[int, int]:
    """Every error step the run got past, with the step that made its calls again."""
    return {step: by for step, s in score_by_step(analysis).items() if (by := recovered_by(s)) is not None}


def frontier_by_step(analysis: dict | None) -> dict[int, list[str]]:
    from tracefix.report.plots import frontier_of

    out: dict[int, list[str]] = {}
    for detector in fields(fields(analysis).get("frontier")):
        for s in frontier_of(analysis, detector):
            out.setdefault(s, []).append(detector)
    return out


def replay_hypotheses(replay: dict | None) -> list[dict]:
    """Tested hypotheses, strongest verdict first (then by success count)."""
    hyps = hypotheses(replay)

    def key(h):
        verdict = h.get("verdict")
        return (VERDICT_STRENGTH.get(verdict, 9) if isinstance(verdict, str) else 9,
                -sum(1 for r in objects(h.get("runs")) if r.get("success")),
                whole(h.get("round"), 0), whole(h.get("step"), 0))
    return sorted(hyps, key=key)


def tested_step(hypothesis: dict) -> int | None:
    """The step a tested hypothesis's intervention edits: the intervention's own, else the
    hypothesis's."""
    iv = fields(hypothesis.get("intervention"))
    return whole(iv.get("step"), whole(hypothesis.get("step")))


def evidence_items(evidence: dict, escape=str) -> list[tuple[str, str]]:
    """The evidence fields a person reads first, as (label, text) pairs; ``escape`` is
    applied to every piece of recorded text (the HTML renderer passes html.escape)."""
    evidence = fields(evidence)
    items = []
    if evidence.get("detectors"):
        items.append(("detectors", ", ".join(escape(d) for d in listed(evidence["detectors"]))))
    feats = evidence.get("features") or {}
    if isinstance(feats, dict) and feats:
        items.append(("features", ", ".join(f"{escape(k)}={escape(fmt_score(v))}" for k, v in list(feats.items())[:8])))
    if evidence.get("path"):
        items.append(("dependency path", " → ".join(escape(s) for s in listed(evidence["path"]))))
    if evidence.get("tool"):
        items.append(("tool", escape(evidence["tool"])))
    if evidence.get("error"):
        items.append(("error", escape(one_line(evidence["error"], 240))))
    symptoms = objects(evidence.get("symptoms"))
    if symptoms:
        items.append(("symptoms", "; ".join(escape(f"step {s.get('step')}: {s.get('reason') or s.get('kind')}")
                                            for s in symptoms[:4])))
    expected = fields(evidence.get("hgt_expected"))
    surprises = [f"{attr} {v.get('actual')} (expected {v.get('expected')}, p={fmt_score(v.get('p_actual'))})"
                 for attr, v in expected.items() if isinstance(v, dict) and v.get("expected") != v.get("actual")]
    if surprises:
        items.append(("HGT surprise", escape("; ".join(surprises))))
    return items


def evidence_rest(evidence: dict) -> dict:
    return {k: v for k, v in fields(evidence).items() if k not in EVIDENCE_SHOWN and v not in (None, "", [], {})}


def before_label(iv: dict) -> str:
    return {"replace_output": "before: the original output at step t",
            "add_message": "before: the last input message at step t (the edit is added after it)",
            "replace_tool_result": "before: the original tool result"}.get(iv.get("kind"), "before (original)")


def after_label(iv: dict) -> str:
    return {"replace_output": "after: the output put in its place",
            "add_message": "after: the message added to the input of step t",
            "replace_tool_result": "after: the tool result put in its place"}.get(iv.get("kind"), "after (the edit)")


def notes(analysis: dict | None, replay: dict | None) -> list[str]:
    """The notes of both results, as text."""
    return [str(n) for result in (analysis, replay) for n in listed(fields(result).get("notes"))]


def how_word(how) -> str:
    return " + ".join(HOW_WORDS.get(part, part) for part in str(how).split("+"))


def stage_rows(analysis: dict | None, replay: dict | None) -> list[tuple[str, str]]:
    """(stage, how it ran) for every stage of the diagnosis."""
    rows = []
    if analysis:
        detectors = ", ".join(map(str, listed(analysis.get("detectors")))) or "none"
        rows.append(("anomaly scoring", f"detectors ({detectors}); no LLM"))
        rows.append(("hypothesis ranking", "LLM analyst" if analysis.get("llm_used") else "deterministic fallback (detector ranking)"))
    else:
        rows.append(("analysis", "not run"))
    stages = fields(fields(replay).get("stages"))
    if replay:
        for key, how in stages.items():
            label = STAGE_NAMES.get(key, key.replace("_", " "))
            rows.append((label, how_word(how)))
        tested = hypotheses(replay)
        rows.append(("replay", f"{plural(len(tested), 'intervention')}, "
                               + plural(sum(len(objects(h.get('runs'))) for h in tested), 'run')))
    else:
        rows.append(("replay", "not run"))
    return rows


def summary(doc: dict, analysis: dict | None, replay: dict | None) -> str:
    """One paragraph: what most likely went wrong, what fix was verified, what was refuted."""
    parts = []
    task = brief(task_text(doc), 140)
    complaint = next((fb.get("comment") for fb in doc.get("feedback") or [] if fb.get("comment")), None)
    head = f"The session “{task}” ended with outcome {doc.get('outcome') or 'unknown'}"
    if complaint:
        head += f"; the user reported “{brief(complaint, 140)}”"
    parts.append(head + ".")

    tested = replay_hypotheses(replay)
    confirmed = [h for h in tested if h.get("verdict") in ("validated", "partially_validated")]
    refuted = [h for h in tested if h.get("verdict") == "refuted"]
    inconclusive = [h for h in tested if h.get("verdict") == "inconclusive"]
    errored = [h for h in tested if h.get("verdict") == "error"]
    ranked = hypotheses(analysis)

    if confirmed:
        best = confirmed[0]
        iv = fields(best.get("intervention"))
        parts.append(
            f"Most likely root cause: step {best.get('step')} ({best.get('agent') or 'unknown agent'})"
            + (f" — {sentence(best.get('reason'))}" if best.get("reason") else "") + ".")
        parts.append(
            f"Fix {verdict_word(best.get('verdict'))} by replay: {iv.get('category') or iv.get('kind') or 'an edit'} "
            f"at step {iv.get('step', best.get('step'))}, “{brief(iv.get('text'), 160)}” "
            f"({best.get('verdict_reason') or 'see runs'}).")
    elif ranked:
        top = ranked[0]
        parts.append(
            f"Most likely root cause (not verified by replay): step {top.get('step')} "
            f"({top.get('agent') or 'unknown agent'})"
            + (f" — {sentence(top.get('rationale'))}" if top.get("rationale") else "") + ".")
        if not tested:
            parts.append("No intervention was replayed, so no fix is verified.")
        else:
            parts.append("No replayed intervention fixed the session.")
    else:
        parts.append("No failure hypothesis is available yet (the session was not analyzed).")
    if refuted:
        parts.append("Refuted: " + "; ".join(f"step {h.get('step')} ({h.get('agent') or '?'})" for h in refuted) + ".")
    if inconclusive:
        parts.append("Inconclusive: " + "; ".join(f"step {h.get('step')} ({h.get('agent') or '?'})"
                                                  for h in inconclusive) + ".")
    if errored:
        parts.append("Not tested, every replay failed to run: "
                     + "; ".join(f"step {h.get('step')} ({brief(h.get('verdict_reason'), 160)})" for h in errored) + ".")
    fallback = [STAGE_NAMES.get(k, k) for k, v in fields(fields(replay).get("stages")).items()
                if "fallback" in str(v).split("+")]
    if analysis and not analysis.get("llm_used"):
        fallback.insert(0, "hypothesis ranking")
    if fallback:
        parts.append("Deterministic fallbacks (no LLM) were used for " + ", ".join(fallback) + ".")
    return " ".join(parts)


# --- replays against the original -------------------------------------------------------------

@dataclass
class RunComparison:
    """One replay run beside the original session from the intervention step on."""
    number: int
    run: dict
    child: dict | None
    original: list[tuple[int, str]]
    replayed: list[tuple[int, str]]
    # difflib opcodes over the two line lists ("equal", "replace", "delete", "insert").
    opcodes: list[tuple[str, int, int, int, int]] = field(default_factory=list)

    @property
    def changed_lines(self) -> set[int]:
        """Indexes into ``replayed`` that differ from the original."""
        return {j for tag, _, _, j1, j2 in self.opcodes if tag != "equal" for j in range(j1, j2)}

    @property
    def dropped_lines(self) -> set[int]:
        """Indexes into ``original`` that the replay did not reproduce."""
        return {i for tag, i1, i2, _, _ in self.opcodes if tag != "equal" for i in range(i1, i2)}

    same_as: int | None = None  # the number of an earlier run with the very same transcript

    def unified_diff(self) -> list[str]:
        return list(difflib.unified_diff(
            [line for _, line in self.original], [line for _, line in self.replayed],
            fromfile="original", tofile=f"replay {self.number}", lineterm="", n=2))


def compare_runs(doc: dict, hypothesis: dict, children: dict | None) -> list[RunComparison]:
    t = tested_step(hypothesis) or 0
    original = transcript_lines(doc.get("steps") or [], t)
    out = []
    for number, run in enumerate(objects(hypothesis.get("runs")), start=1):
        child_id = run.get("child_session_id")
        child = (children or {}).get(child_id) if isinstance(child_id, str) else None
        replayed = transcript_lines((child or {}).get("steps") or [], t) if child else []
        matcher = difflib.SequenceMatcher(None, [l for _, l in original], [l for _, l in replayed], autojunk=False)
        cmp = RunComparison(number, run, child, original, replayed, matcher.get_opcodes())
        if child is not None:
            cmp.same_as = next((c.number for c in out if c.child is not None and c.replayed == replayed), None)
        out.append(cmp)
    return out


def child_session_ids(replay: dict | None) -> list[str]:
    """Every child session a replay result refers to (for fetching their documents): the
    ids that are text."""
    return [r["child_session_id"] for h in hypotheses(replay)
            for r in objects(h.get("runs")) if isinstance(r.get("child_session_id"), str) and r["child_session_id"]]
