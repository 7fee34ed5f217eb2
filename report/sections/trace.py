"""The trace: the session's steps in order, grouped by the replay's trials, each with its
marks (error, got past, frontier, hypothesis, verdict), scores, new input, output, tool
calls and state changes. A long session shows the steps `content.steps.trace_positions`
picks, with a line for each run of steps left out.
"""
from __future__ import annotations

from tracefix.report.content.diagnosis import frontier_by_step, ranked_causes, recovered_by, score_by_step, tested_step
from tracefix.report.content.steps import (
    FAILURE_READ_FROM_RESULT, new_input_messages, step_action, step_errors, trace_gap, trace_note,
    trace_positions, trials)
from tracefix.report.content.values import (
    fields, fmt_duration, fmt_score, hypotheses, objects, one_line, plural, to_json)
from tracefix.report.markdown import md
from tracefix.report.page import badge, esc, pre, verdict_badge
from tracefix.report.sections.base import Report, Section


def _html_message(msg: dict) -> str:
    if not isinstance(msg, dict):
        return pre(to_json(msg))
    who = msg.get("role") or "?"
    if msg.get("name"):
        who += f" ({msg['name']})"
    if msg.get("tool_call_id"):
        who += f" for {msg['tool_call_id']}"
    body = msg.get("content")
    if isinstance(body, list):  # content parts
        body = "\n".join(p.get("text", to_json(p)) if isinstance(p, dict) else str(p) for p in body)
    out = f'<div class="msg-role">{esc(who)}</div>'
    if body not in (None, ""):
        out += pre(body)
    for call in objects(msg.get("tool_calls")):
        fn = fields(call.get("function"))
        out += pre(f"→ {fn.get('name') or call.get('name')}({fn.get('arguments') or to_json(call.get('arguments'), indent=None)})", 2000)
    return out


def _failure_mark(errors) -> str:
    """How a step the run got past is named: by its error, or, where the store has none (its
    tool answered the failure as text), by the analysis's reading."""
    return "error" if errors else FAILURE_READ_FROM_RESULT


def _html_step(steps, i, scores, frontier, hyp_rank, interventions) -> str:
    step = steps[i]
    k = int(step.get("index", i))
    score = scores.get(k) or {}
    errors = step_errors(step)
    got_past = recovered_by(score)
    badges = []
    if got_past is not None:  # shown, but not as where the run went wrong
        badges.append(badge(f"{_failure_mark(errors)}, got past at step {got_past}", "b-warn"))
    elif errors:
        badges.append(badge("error", "b-bad"))
    if k in frontier:
        badges.append(badge("frontier: " + ", ".join(frontier[k]), "b-warn"))
    if k in hyp_rank:
        badges.append(badge(f"hypothesis #{hyp_rank[k]}", "b-bad"))
    for verdict in interventions.get(k, []):
        badges.append(verdict_badge(verdict))
    if step.get("replay_source"):
        badges.append(badge(step["replay_source"], "b-info"))
    cls = ("step" + (" got-past" if got_past is not None else " err" if errors else "")
           + (" frontier" if k in frontier else ""))
    meta = [f"kind {step.get('kind') or '?'}"]
    if score.get("phase"):
        meta.append(f"phase {score['phase']}")
    for det in ("isolation_forest", "hgt"):
        if score.get(det) is not None:
            meta.append(f"{det} {fmt_score(score[det])}")
    if step.get("model"):
        meta.append(f"model {step['model']}")
    if step.get("duration_ms") is not None:
        meta.append(fmt_duration(step["duration_ms"]))
    if step.get("input_tokens") is not None:
        meta.append(f"{step.get('input_tokens')}/{step.get('output_tokens')} tokens")

    body = [f'<div class="sub">{esc(" · ".join(meta))}</div>']
    new_msgs, hidden = new_input_messages(steps, i)
    if new_msgs:
        label = "Input" + (f" (new since this agent's previous call; {hidden} earlier messages not repeated)" if hidden else "")
        body.append(f"<details{' open' if len(new_msgs) <= 2 else ''}><summary>{esc(label)}</summary>"
                    + "".join(_html_message(m) for m in new_msgs) + "</details>")
    elif hidden:
        body.append(f'<div class="sub">Input: nothing new since this agent\'s previous call ({hidden} messages).</div>')
    out = step.get("output_message")
    if out:
        body.append("<div><b>Output</b></div>" + _html_message(out))
    for call in step.get("tool_calls") or []:
        result = (f'<div class="b-bad">✗ {esc(call["error"])}</div>' if call.get("error")
                  else pre(to_json(call.get("result")), 2500))
        body.append(f"<div><b>Tool</b> <code>{esc(call.get('name'))}</code> "
                    f'<span class="sub">{esc(call.get("id") or "")} {esc(fmt_duration(call.get("duration_ms")))}</span></div>'
                    + pre(to_json(call.get("arguments")), 1500) + "<div class=\"msg-role\">result</div>" + result)
    if step.get("error"):
        body.append(f'<div class="b-bad"><b>Error:</b> {esc(step["error"])}</div>')
    snaps = step.get("snapshots") or {}
    if snaps:
        body.append(f"<details><summary>State changed at this step: {esc(', '.join(map(str, snaps)))}</summary>"
                    + pre(to_json(snaps), 3000) + "</details>")
    summary = (f'<span class="stepno">Step {esc(k)}</span> <span class="agent">{esc(step.get("agent") or "?")}</span> '
               f'<span class="act">{esc(step_action(step))}</span> ' + " ".join(badges))
    return (f'<details class="{cls}" id="step-{esc(k)}"{" open" if k in hyp_rank and hyp_rank[k] == 1 else ""}>'
            f"<summary>{summary}</summary>{''.join(body)}</details>")


def _html_trace(r: Report) -> str:
    doc, analysis, replay = r.doc, r.analysis, r.replay
    steps = doc.get("steps") or []
    if not steps:
        return '<h2>The trace</h2><p class="muted">The session has no steps.</p>'
    scores = score_by_step(analysis)
    frontier = frontier_by_step(analysis)
    # "hypothesis #n" as the ranked table numbers them (the report's one order)
    hyp_rank = {c.step: position for position, c in enumerate(ranked_causes(analysis, replay), start=1)}
    interventions: dict[int, list] = {}
    for h in hypotheses(replay):
        step = tested_step(h)
        if step is not None:
            interventions.setdefault(step, []).append(h.get("verdict"))
    shown = trace_positions(steps, analysis, replay)
    note = trace_note(steps, shown)
    parts = ["<h2>The trace</h2>",
             f'<p class="sub">{plural(len(steps), "step")}; click a step to open it.'
             + (" Trials are the plan–execution rounds the replay segmented the session into." if replay else "")
             + "</p>" + (f'<p class="sub" id="trace-note">{esc(note)}</p>' if note else "")]
    trial_list = trials(doc, replay)
    by_trial: dict[int, list[int]] = {t.index: [] for t in trial_list}
    for i in shown:
        k = int(steps[i].get("index", i))
        owner = next((t for t in reversed(trial_list) if t.start <= k), trial_list[0])
        by_trial[owner.index].append(i)
    previous = None
    for t in trial_list:
        if not by_trial[t.index]:
            continue
        if len(trial_list) > 1 or replay:
            status = (badge("failed", "b-bad") if t.failed else badge("succeeded", "b-ok") if t.failed is False else "")
            parts.append(f'<div class="trial">Trial {t.index + 1}: steps {t.start}–{t.end} {status}</div>')
        for i in by_trial[t.index]:
            if gap := trace_gap(steps, previous, i):
                parts.append(f'<div class="gap">… {esc(gap)}</div>')
            parts.append(_html_step(steps, i, scores, frontier, hyp_rank, interventions))
            previous = i
    if gap := trace_gap(steps, previous, len(steps)):
        parts.append(f'<div class="gap">… {esc(gap)}</div>')
    return "".join(parts)


def _md_trace(r: Report) -> list[str]:
    doc, analysis, replay = r.doc, r.analysis, r.replay
    out = ["", "## The trace", ""]
    scores_by = score_by_step(analysis)
    frontier = frontier_by_step(analysis)
    steps = doc.get("steps") or []
    trial_list = trials(doc, replay)
    shown = trace_positions(steps, analysis, replay)
    if note := trace_note(steps, shown):
        out += [f"*{md(note)}*", ""]
    current = previous = None
    for i in shown:
        step = steps[i]
        if gap := trace_gap(steps, previous, i):
            out += ["", f"*… {md(gap)}*", ""]
        previous = i
        k = int(step.get("index", i))
        owner = next((t for t in reversed(trial_list) if t.start <= k), trial_list[0])
        if (len(trial_list) > 1 or replay) and owner is not current:
            current = owner
            status = " (failed)" if owner.failed else " (succeeded)" if owner.failed is False else ""
            out += ["", f"### Trial {owner.index + 1}: steps {owner.start}–{owner.end}{status}", ""]
        marks = []
        sc = scores_by.get(k) or {}
        errors, got_past = step_errors(step), recovered_by(sc)
        if got_past is not None:
            marks.append(f"{_failure_mark(errors)}, got past at step {got_past}")
        elif errors:
            marks.append("error")
        if k in frontier:
            marks.append("frontier: " + ", ".join(frontier[k]))
        scores_txt = ", ".join(f"{d} {fmt_score(sc[d])}" for d in ("isolation_forest", "hgt") if sc.get(d) is not None)
        out.append(f"{k}. **{md(step.get('agent') or '?')}** {md(step_action(step))}"
                   + (f" — *{md('; '.join(marks))}*" if marks else "") + (f" ({md(scores_txt)})" if scores_txt else ""))
        for call in step.get("tool_calls") or []:
            shown = f"error {call['error']}" if call.get("error") else to_json(call.get("result"), indent=None)
            out.append(f"   - {md(call.get('name'))} → {md(one_line(shown, 300))}")
        if step.get("error"):
            out.append(f"   - error: {md(one_line(step['error'], 300))}")
    if gap := trace_gap(steps, previous, len(steps)):
        out += ["", f"*… {md(gap)}*"]
    return out


TRACE = Section("trace", _html_trace, _md_trace)
