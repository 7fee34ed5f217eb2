"""Render the root-cause report of one session as self-contained HTML or as Markdown.

One list of sections (:data:`SECTIONS`: header, summary, session, hypotheses,
interventions, pictures, trace, stages) drives both formats; each section has an HTML and
a Markdown writer side by side. ``render_html(doc, analysis, replay, children=None)``
returns one HTML page with inline CSS and base64 PNG images: it opens offline and needs no
JavaScript (``<details>`` does the collapsing). ``render_markdown(...)`` says the same in
Markdown. ``doc`` is the session
document, ``analysis`` and ``replay`` the results of docs/contracts.md §3 and §5 (either
may be None), ``children`` maps a replay run's child session id to its session document
so the runs can be compared with the original. The collector serves these at
``GET /api/v1/sessions/{id}/report``; ``tracefix report`` writes them to a file.

Traces hold arbitrary text (user input, tool output, model output), so every value is
escaped on its way into the page: ``html.escape`` for HTML, and for Markdown, fenced
blocks for long text and escaped inline text elsewhere.
"""
from __future__ import annotations

import base64
import functools
import html
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from tracefix.errors import UnknownSession
from tracefix.report import content as rc
from tracefix.report import plots

log = logging.getLogger("tracefix.report")

MAX_BLOCK = 4000  # characters of one message or tool result shown in the trace

CSS = """
:root { --fg:#1d232b; --muted:#5d6875; --line:#dde2e8; --bg:#f6f8fa; --card:#fff;
  --ok:#1a7f37; --bad:#cf222e; --warn:#9a6700; --info:#0969da; }
* { box-sizing: border-box; }
body { margin:0; font: 14px/1.5 -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color:var(--fg); background:var(--bg); }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 60px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 32px 0 10px;
  border-bottom: 1px solid var(--line); padding-bottom: 4px; } h3 { font-size: 15px; margin: 18px 0 8px; }
.sub { color: var(--muted); font-size: 12px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; margin: 10px 0; }
.summary { border-left: 4px solid var(--info); font-size: 15px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; vertical-align: top; padding: 5px 8px; border-bottom: 1px solid var(--line); }
th { color: var(--muted); font-weight: 600; white-space: nowrap; }
table.facts th { width: 130px; }
pre, code { font: 12px/1.45 "DejaVu Sans Mono", Menlo, Consolas, monospace; }
pre { white-space: pre-wrap; word-break: break-word; background: var(--bg); border: 1px solid var(--line);
  border-radius: 6px; padding: 8px 10px; margin: 6px 0; max-height: 420px; overflow: auto; }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 12px; font-weight: 600;
  border: 1px solid currentColor; white-space: nowrap; margin-right: 4px; }
.b-ok { color: var(--ok); } .b-bad { color: var(--bad); } .b-warn { color: var(--warn); }
.b-info { color: var(--info); } .b-muted { color: var(--muted); }
.v-validated { color:#fff; background: var(--ok); border-color: var(--ok); }
.v-partially_validated { color:#fff; background:#4d9f5e; border-color:#4d9f5e; }
.v-refuted { color:#fff; background: var(--bad); border-color: var(--bad); }
.v-inconclusive { color:#fff; background:#6e7781; border-color:#6e7781; }
.v-error { color:#fff; background:#9a6700; border-color:#9a6700; }
img.plot { max-width: 100%; height: auto; display: block; margin: 6px 0; }
details { margin: 4px 0; } summary { cursor: pointer; }
details.step { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 4px 10px; }
details.step[open] { padding-bottom: 10px; }
details.step.err { border-left: 4px solid var(--bad); }
details.step.got-past { border-left: 4px solid var(--warn); }
details.step.frontier { box-shadow: inset 0 0 0 1px #f0a3a8; }
.stepno { font-weight: 700; display: inline-block; min-width: 62px; }
.agent { font-weight: 600; color: #3d4b5c; }
.act { color: var(--muted); }
.trial { margin: 18px 0 6px; font-weight: 600; }
.gap { margin: 6px 0 6px 12px; color: #666; font-style: italic; }
.trial .badge { font-weight: 600; }
.msg-role { font-size: 12px; color: var(--muted); margin-top: 6px; }
.grid { display: grid; gap: 8px; overflow-x: auto; }
.col { background: var(--card); border: 1px solid var(--line); border-radius: 6px; min-width: 0; }
.col h4 { margin: 0; padding: 6px 8px; font-size: 12.5px; border-bottom: 1px solid var(--line); background: var(--bg); }
.col .ln { font: 11.5px/1.4 "DejaVu Sans Mono", Menlo, monospace; padding: 1px 8px; white-space: pre-wrap;
  word-break: break-word; }
.col .ln .n { color: var(--muted); }
.ln.chg { background: #dafbe1; } .ln.gone { background: #ffebe9; }
.beforeafter { display: grid; grid-template-columns: 1fr 1fr; gap: 8px; }
.beforeafter pre { max-height: 260px; }
.muted { color: var(--muted); }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
"""


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _badge(text, cls: str) -> str:
    return f'<span class="badge {cls}">{_e(text)}</span>'


def _verdict_badge(verdict) -> str:
    return f'<span class="badge v-{_e(verdict or "none")}">{_e(rc.verdict_word(verdict))}</span>'


def _outcome_badge(outcome) -> str:
    cls = {"success": "b-ok", "failure": "b-bad"}.get(outcome or "", "b-muted")
    return _badge(outcome or "outcome unknown", cls)


def _yes_no(value) -> str:
    if value is None:
        return '<span class="muted">—</span>'
    return _badge("yes", "b-ok") if value else _badge("no", "b-bad")


def _pre(text, limit: int = MAX_BLOCK) -> str:
    return f"<pre>{_e(rc.clip(str(text), limit))}</pre>"


def _img(png: bytes | None, alt: str) -> str:
    if not png:
        return f'<p class="muted">{_e(alt)}: nothing to draw.</p>'
    data = base64.b64encode(png).decode("ascii")
    return f'<img class="plot" alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def _images(analysis: dict | None, replay: dict | None) -> tuple[bytes | None, bytes | None]:
    """The graph and the score timeline; a picture that cannot be drawn is left out (and
    logged) rather than costing the reader the rest of the report."""
    if not analysis:
        return None, None
    hyps = rc.hypotheses(analysis)
    top = rc.whole(hyps[0].get("step")) if hyps else None
    tested = rc.replay_hypotheses(replay)
    confirmed = [h for h in tested if h.get("verdict") in ("validated", "partially_validated")]
    highlight = rc.whole(confirmed[0].get("step")) if confirmed else top
    label = "verified root cause" if confirmed else "top hypothesis"
    hyp_steps = [step for h in hyps[:3] if (step := rc.whole(h.get("step"))) is not None]
    trials = [{"start": t.start} for t in rc.trials({"steps": []}, replay)] if replay else None
    pictures = []
    for draw in (lambda: plots.graph_png(analysis, highlight=highlight, highlight_label=label),
                 lambda: plots.scores_png(analysis, trials=trials, hypothesis_steps=hyp_steps)):
        try:
            pictures.append(draw())
        except Exception:  # odd values from a partial analysis must not cost the whole report
            log.exception("could not draw a report picture for session %s", analysis.get("session_id"))
            pictures.append(None)
    return pictures[0], pictures[1]


# --- HTML sections ----------------------------------------------------------------------------

def _html_header(r: "Report") -> str:
    doc = r.doc
    task = rc.one_line(rc.task_text(doc), 160)
    return (f"<h1>Root-cause report: {_e(task)}</h1>"
            f'<div class="sub">session <code>{_e(doc.get("session_id"))}</code> · '
            f'{_outcome_badge(doc.get("outcome"))} · generated by tracefix</div>')


def _html_summary(r: "Report") -> str:
    return f'<div class="card summary"><b>Summary.</b> {_e(rc.summary(r.doc, r.analysis, r.replay))}</div>'


def _html_facts(r: "Report") -> str:
    doc = r.doc
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(rc.clip(v, 1200))}</td></tr>" for k, v in rc.facts(doc))
    fb = rc.feedback_lines(doc)
    rows += "<tr><th>User feedback</th><td>" + ("<br>".join(_e(x) for x in fb) or '<span class="muted">none</span>') + "</td></tr>"
    ms = rc.milestones(doc)
    if ms:
        rows += "<tr><th>Milestones</th><td>" + " ".join(
            _badge(("✓ " if ok else "✗ ") + name, "b-ok" if ok else "b-bad") for name, ok in ms) + "</td></tr>"
    return f'<h2>The session</h2><div class="card"><table class="facts">{rows}</table></div>'


def _html_stages(r: "Report") -> str:
    analysis, replay = r.analysis, r.replay
    rows = "".join(f"<tr><th>{_e(stage)}</th><td>{_e(how)}</td></tr>" for stage, how in rc.stage_rows(analysis, replay))
    notes = "".join(f"<li>{_e(n)}</li>" for n in rc.notes(analysis, replay))
    notes_html = f'<ul class="muted">{notes}</ul>' if notes else ""
    return (f'<h2>How this diagnosis was made</h2><div class="card"><table class="facts">{rows}</table>'
            f"{notes_html}</div>")


def _html_pictures(r: "Report") -> str:
    analysis = r.analysis
    if not analysis:
        return ('<h2>Critical transition graph and anomaly scores</h2><p class="muted">The session has not been '
                "analyzed yet (run <code>tracefix analyze</code>).</p>")
    graph_png, scores_png = r.pictures
    version = analysis.get("model_version")
    return ("<h2>Critical transition graph</h2>"
            '<p class="sub">Steps left to right in one lane per agent; arcs are dependencies (shared artifacts, '
            "repeated errors, repeated calls); steps ringed in red form the anomalous frontier.</p>"
            + _img(graph_png, "critical transition graph")
            + "<h2>Per-step anomaly scores</h2>"
            + (f'<p class="sub">model version {_e(version)}</p>' if version else "")
            + _img(scores_png, "per-step anomaly scores of both detectors"))


def _evidence_html(evidence: dict) -> str:
    """The evidence packet, short: the fields a person reads first, the rest folded away."""
    if not rc.fields(evidence):
        return '<span class="muted">—</span>'
    items = [f"{_e(label)}: {value}" for label, value in rc.evidence_items(evidence, escape=_e)]
    rest = rc.evidence_rest(evidence)
    if rest:
        items.append(f"<details><summary>full evidence packet</summary>{_pre(rc.to_json(rest), 3000)}</details>")
    return "<br>".join(items)


def _html_hypotheses(r: "Report") -> str:
    analysis, replay = r.analysis, r.replay
    hyps = rc.hypotheses(analysis)
    if not hyps:
        return '<h2>Failure hypotheses</h2><p class="muted">No hypotheses (the session was not analyzed).</p>'
    verdicts: dict[int | None, list[dict]] = {}
    for h in rc.hypotheses(replay):
        verdicts.setdefault(rc.whole(h.get("step")), []).append(h)
    rows = []
    for h in hyps:
        tested = " ".join(f'<a href="#hyp-{_e(t.get("id"))}">{_verdict_badge(t.get("verdict"))}</a>'
                          for t in verdicts.get(rc.whole(h.get("step")), [])) or '<span class="muted">not replayed</span>'
        rows.append(
            f"<tr><td>{_e(h.get('rank'))}</td><td style=\"white-space:nowrap\"><a href=\"#step-{_e(h.get('step'))}\">step {_e(h.get('step'))}</a></td>"
            f"<td>{_e(h.get('agent'))}</td><td>{_e(rc.fmt_score(h.get('score')))}</td><td>{_e(h.get('source'))}</td>"
            f"<td>{_e(h.get('rationale'))}<div class=\"sub\">{_evidence_html(h.get('evidence'))}</div></td>"
            f"<td>{tested}</td></tr>")
    return ("<h2>Failure hypotheses, ranked</h2><div class=\"card\"><table><tr><th>#</th><th>step</th><th>agent</th>"
            "<th>score</th><th>source</th><th>rationale and evidence</th><th>replay</th></tr>"
            + "".join(rows) + "</table></div>")


def _run_header(cmp: rc.RunComparison) -> str:
    run = cmp.run
    head = [f"Replay {cmp.number}",
            ("✓ success" if run.get("success") else "✗ failure") if run.get("success") is not None else "? outcome",
            f"fulfilled {'yes' if run.get('fulfilled') else 'no' if run.get('fulfilled') is not None else '?'}",
            f"progress {rc.fmt_score(run.get('progress'))}"]
    return " · ".join(head)


def _html_side_by_side(comparisons: list[rc.RunComparison]) -> str:
    if not comparisons:
        return ""
    original = comparisons[0].original
    dropped = set.intersection(*(c.dropped_lines for c in comparisons)) if all(c.child for c in comparisons) else set()
    cols = ['<div class="col"><h4>Original from step t</h4>' + "".join(
        f'<div class="ln{" gone" if i in dropped else ""}"><span class="n">[{k}]</span> {_e(line)}</div>'
        for i, (k, line) in enumerate(original)) + ("" if original else '<div class="ln muted">(no steps)</div>') + "</div>"]
    for cmp in comparisons:
        if cmp.child is None:
            body = (f'<div class="ln muted">child session {_e(cmp.run.get("child_session_id") or "—")} '
                    "is not available</div>")
        else:
            changed = cmp.changed_lines
            body = "".join(f'<div class="ln{" chg" if j in changed else ""}"><span class="n">[{k}]</span> {_e(line)}</div>'
                           for j, (k, line) in enumerate(cmp.replayed)) or '<div class="ln muted">(no steps)</div>'
        cols.append(f'<div class="col"><h4>{_e(_run_header(cmp))}</h4>{body}</div>')
    return (f'<div class="grid" style="grid-template-columns: repeat({len(cols)}, minmax(220px, 1fr))">'
            + "".join(cols) + "</div>"
            '<p class="sub">Green: lines a replay produced that the original did not; red: original lines '
            "that no replay reproduced.</p>")


def _html_runs_table(hypothesis: dict) -> str:
    rows = []
    for number, run in enumerate(rc.objects(hypothesis.get("runs")), start=1):
        counts = rc.fields(run.get("counts"))
        judged = rc.fields(run.get("judged_by"))
        div = run.get("divergence")
        rows.append(
            f"<tr><td>{number}</td><td><code>{_e(run.get('child_session_id') or '—')}</code></td>"
            f"<td>{_yes_no(run.get('success'))}</td><td>{_e(rc.fmt_score(run.get('score')))}</td>"
            f"<td>{_yes_no(run.get('fulfilled'))}</td><td>{_e(rc.fmt_score(run.get('progress')))}</td>"
            f"<td>{_e(counts.get('llm_cassette', '—'))} / {_e(counts.get('llm_live', '—'))}</td>"
            f"<td>{_e(counts.get('tool_cassette', '—'))} / {_e(counts.get('tool_live', '—'))}</td>"
            f"<td>{_e('at step ' + str(div.get('step')) if isinstance(div, dict) else 'none')}</td>"
            f"<td>{_e(rc.fmt_score(run.get('wall_s'), 1) + ' s' if run.get('wall_s') is not None else '—')}</td></tr>")
        details = [f"final answer: {_e(rc.one_line(rc.final_answer(run.get('output')), 300)) or '—'}"]
        if judged:
            details.append("judged by: " + ", ".join(f"{_e(k)}: {_e(v)}" for k, v in judged.items()))
        if run.get("error"):
            details.append(f'<span class="b-bad">error: {_e(rc.one_line(run["error"], 300))}</span>')
        rows.append(f'<tr><td></td><td colspan="9" class="sub">{"<br>".join(details)}</td></tr>')
    return ("<table><tr><th>run</th><th>child session</th><th>success</th><th>score</th><th>fulfilled</th>"
            "<th>progress</th><th>LLM calls cassette / live</th><th>tools cassette / live</th><th>divergence</th>"
            "<th>wall</th></tr>" + "".join(rows) + "</table>")


def _html_interventions(r: "Report") -> str:
    doc, replay, children = r.doc, r.replay, r.children
    tested = rc.replay_hypotheses(replay)
    if not replay:
        return ('<h2>Interventions and replays</h2><p class="muted">No replay has been run for this session '
                "(<code>tracefix replay</code>), so no hypothesis is verified.</p>")
    if not tested:
        return '<h2>Interventions and replays</h2><p class="muted">The replay produced no intervention.</p>'
    cards = []
    for h in tested:
        iv = rc.fields(h.get("intervention"))
        comparisons = rc.compare_runs(doc, h, children)
        diffs = "".join(
            f"<details><summary>Unified diff: original vs replay {c.number}</summary>"
            f"<pre>{_e(chr(10).join(c.unified_diff()) or '(no difference from step t on)')}</pre></details>"
            if not c.same_as else f'<p class="sub">Replay {c.number}: the same transcript as replay {c.same_as}.</p>'
            for c in comparisons if c.child is not None)
        cards.append(
            f'<div class="card" id="hyp-{_e(h.get("id"))}"><h3>{_verdict_badge(h.get("verdict"))} '
            f'Step {_e(h.get("step"))} · {_e(h.get("agent") or "?")} '
            f'<span class="sub">hypothesis {_e(h.get("id"))}, round {_e(h.get("round"))}, trial {_e(h.get("trial"))}, '
            f'source {_e(h.get("source"))}</span></h3>'
            f"<p>{_e(h.get('reason'))}</p>"
            f"<p><b>Verdict:</b> {_e(rc.verdict_word(h.get('verdict')))} — {_e(h.get('verdict_reason'))}</p>"
            f"<p><b>Intervention</b> {_badge(iv.get('kind') or '?', 'b-info')}{_badge(iv.get('category') or '?', 'b-muted')}"
            f" at step {_e(iv.get('step'))}"
            + (f", tool call <code>{_e(iv['tool_call_id'])}</code>" if iv.get("tool_call_id") else "")
            + (f' <span class="sub">written by {_e(iv["source"])}</span>' if iv.get("source") else "")
            + "</p><div class=\"beforeafter\"><div><div class=\"msg-role\">" + _e(rc.before_label(iv)) + "</div>"
            + _pre(iv.get("before") if iv.get("before") not in (None, "") else "(nothing recorded)", 3000)
            + "</div><div><div class=\"msg-role\">" + _e(rc.after_label(iv)) + "</div>" + _pre(iv.get("text") or "", 3000)
            + "</div></div><h3>Replays</h3>" + _html_runs_table(h)
            + "<h3>Side by side from step t</h3>" + _html_side_by_side(comparisons) + diffs + "</div>")
    return "<h2>Interventions and replays</h2>" + "".join(cards)


def _html_message(msg: dict) -> str:
    if not isinstance(msg, dict):
        return _pre(rc.to_json(msg))
    who = msg.get("role") or "?"
    if msg.get("name"):
        who += f" ({msg['name']})"
    if msg.get("tool_call_id"):
        who += f" for {msg['tool_call_id']}"
    body = msg.get("content")
    if isinstance(body, list):  # content parts
        body = "\n".join(p.get("text", rc.to_json(p)) if isinstance(p, dict) else str(p) for p in body)
    out = f'<div class="msg-role">{_e(who)}</div>'
    if body not in (None, ""):
        out += _pre(body)
    for call in rc.objects(msg.get("tool_calls")):
        fn = rc.fields(call.get("function"))
        out += _pre(f"→ {fn.get('name') or call.get('name')}({fn.get('arguments') or rc.to_json(call.get('arguments'), indent=None)})", 2000)
    return out


def _failure_mark(errors) -> str:
    """How a step the run got past is named: by its error, or, where the store has none (its
    tool answered the failure as text), by the analysis's reading."""
    return "error" if errors else rc.FAILURE_READ_FROM_RESULT


def _html_step(steps, i, scores, frontier, hyp_rank, interventions) -> str:
    step = steps[i]
    k = int(step.get("index", i))
    score = scores.get(k) or {}
    errors = rc.step_errors(step)
    got_past = rc.recovered_by(score)
    badges = []
    if got_past is not None:  # shown, but not as where the run went wrong
        badges.append(_badge(f"{_failure_mark(errors)}, got past at step {got_past}", "b-warn"))
    elif errors:
        badges.append(_badge("error", "b-bad"))
    if k in frontier:
        badges.append(_badge("frontier: " + ", ".join(frontier[k]), "b-warn"))
    if k in hyp_rank:
        badges.append(_badge(f"hypothesis #{hyp_rank[k]}", "b-bad"))
    for verdict in interventions.get(k, []):
        badges.append(_verdict_badge(verdict))
    if step.get("replay_source"):
        badges.append(_badge(step["replay_source"], "b-info"))
    cls = ("step" + (" got-past" if got_past is not None else " err" if errors else "")
           + (" frontier" if k in frontier else ""))
    meta = [f"kind {step.get('kind') or '?'}"]
    if score.get("phase"):
        meta.append(f"phase {score['phase']}")
    for det in ("isolation_forest", "hgt"):
        if score.get(det) is not None:
            meta.append(f"{det} {rc.fmt_score(score[det])}")
    if step.get("model"):
        meta.append(f"model {step['model']}")
    if step.get("duration_ms") is not None:
        meta.append(rc.fmt_duration(step["duration_ms"]))
    if step.get("input_tokens") is not None:
        meta.append(f"{step.get('input_tokens')}/{step.get('output_tokens')} tokens")

    body = [f'<div class="sub">{_e(" · ".join(meta))}</div>']
    new_msgs, hidden = rc.new_input_messages(steps, i)
    if new_msgs:
        label = "Input" + (f" (new since this agent's previous call; {hidden} earlier messages not repeated)" if hidden else "")
        body.append(f"<details{' open' if len(new_msgs) <= 2 else ''}><summary>{_e(label)}</summary>"
                    + "".join(_html_message(m) for m in new_msgs) + "</details>")
    elif hidden:
        body.append(f'<div class="sub">Input: nothing new since this agent\'s previous call ({hidden} messages).</div>')
    out = step.get("output_message")
    if out:
        body.append("<div><b>Output</b></div>" + _html_message(out))
    for call in step.get("tool_calls") or []:
        result = (f'<div class="b-bad">✗ {_e(call["error"])}</div>' if call.get("error")
                  else _pre(rc.to_json(call.get("result")), 2500))
        body.append(f"<div><b>Tool</b> <code>{_e(call.get('name'))}</code> "
                    f'<span class="sub">{_e(call.get("id") or "")} {_e(rc.fmt_duration(call.get("duration_ms")))}</span></div>'
                    + _pre(rc.to_json(call.get("arguments")), 1500) + "<div class=\"msg-role\">result</div>" + result)
    if step.get("error"):
        body.append(f'<div class="b-bad"><b>Error:</b> {_e(step["error"])}</div>')
    snaps = step.get("snapshots") or {}
    if snaps:
        body.append(f"<details><summary>State changed at this step: {_e(', '.join(map(str, snaps)))}</summary>"
                    + _pre(rc.to_json(snaps), 3000) + "</details>")
    summary = (f'<span class="stepno">Step {_e(k)}</span> <span class="agent">{_e(step.get("agent") or "?")}</span> '
               f'<span class="act">{_e(rc.step_action(step))}</span> ' + " ".join(badges))
    return (f'<details class="{cls}" id="step-{_e(k)}"{" open" if k in hyp_rank and hyp_rank[k] == 1 else ""}>'
            f"<summary>{summary}</summary>{''.join(body)}</details>")


def _html_trace(r: "Report") -> str:
    doc, analysis, replay = r.doc, r.analysis, r.replay
    steps = doc.get("steps") or []
    if not steps:
        return '<h2>The trace</h2><p class="muted">The session has no steps.</p>'
    scores = rc.score_by_step(analysis)
    frontier = rc.frontier_by_step(analysis)
    hyp_rank: dict[int, int] = {}
    for h in rc.hypotheses(analysis):
        step = rc.whole(h.get("step"))
        if step is not None:
            hyp_rank.setdefault(step, rc.whole(h.get("rank")) or len(hyp_rank) + 1)
    interventions: dict[int, list] = {}
    for h in rc.hypotheses(replay):
        step = rc.tested_step(h)
        if step is not None:
            interventions.setdefault(step, []).append(h.get("verdict"))
    shown = rc.trace_positions(steps, analysis, replay)
    note = rc.trace_note(steps, shown)
    parts = ["<h2>The trace</h2>",
             f'<p class="sub">{rc.plural(len(steps), "step")}; click a step to open it.'
             + (" Trials are the plan–execution rounds the replay segmented the session into." if replay else "")
             + "</p>" + (f'<p class="sub" id="trace-note">{_e(note)}</p>' if note else "")]
    trial_list = rc.trials(doc, replay)
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
            status = (_badge("failed", "b-bad") if t.failed else _badge("succeeded", "b-ok") if t.failed is False else "")
            parts.append(f'<div class="trial">Trial {t.index + 1}: steps {t.start}–{t.end} {status}</div>')
        for i in by_trial[t.index]:
            if gap := rc.trace_gap(steps, previous, i):
                parts.append(f'<div class="gap">… {_e(gap)}</div>')
            parts.append(_html_step(steps, i, scores, frontier, hyp_rank, interventions))
            previous = i
    if gap := rc.trace_gap(steps, previous, len(steps)):
        parts.append(f'<div class="gap">… {_e(gap)}</div>')
    return "".join(parts)


def _html_footer(r: "Report") -> str:
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"<footer>Generated {generated} by tracefix. Self-contained: no network needed to view.</footer>"


def _page(title: str, body: str) -> str:
    """The HTML page shell: one self-contained page, CSS inline."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body><main>{body}</main></body></html>\n")


# --- Markdown -------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")  # what can open markup mid-line


def _md(value) -> str:
    """Inline Markdown text: HTML-escaped (Markdown passes raw HTML through) and with
    Markdown punctuation backslash-escaped, on one line."""
    text = " ".join(str("" if value is None else value).split())
    return _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))


def _fence(text, lang: str = "") -> str:
    """A fenced block that the text cannot close: the fence is longer than any backtick run."""
    text = str(text)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def _md_header(r: "Report") -> list[str]:
    doc = r.doc
    return [f"# Root-cause report: {_md(rc.one_line(rc.task_text(doc), 160))}", "",
            f"Session `{str(doc.get('session_id') or '?').replace('`', '')}` · outcome "
            f"**{_md(doc.get('outcome') or 'unknown')}** · generated by tracefix", ""]


def _md_summary(r: "Report") -> list[str]:
    return [f"> **Summary.** {_md(rc.summary(r.doc, r.analysis, r.replay))}", ""]


def _md_facts(r: "Report") -> list[str]:
    doc = r.doc
    out = ["## The session", "", "| | |", "|---|---|"]
    out += [f"| {_md(k)} | {_md(rc.clip(v, 600))} |" for k, v in rc.facts(doc)]
    out.append(f"| User feedback | {_md('; '.join(rc.feedback_lines(doc)) or 'none')} |")
    ms = rc.milestones(doc)
    if ms:
        out.append("| Milestones | " + ", ".join(("✓ " if ok else "✗ ") + _md(n) for n, ok in ms) + " |")
    return out


def _md_hypotheses(r: "Report") -> list[str]:
    out = ["", "## Failure hypotheses, ranked", ""]
    hyps = rc.hypotheses(r.analysis)
    verdicts: dict = {}
    for h in rc.hypotheses(r.replay):
        verdicts.setdefault(rc.whole(h.get("step")), []).append(rc.verdict_word(h.get("verdict")))
    if hyps:
        out += ["| # | step | agent | score | source | rationale | evidence | replay |", "|---|---|---|---|---|---|---|---|"]
        for h in hyps:
            evidence = "; ".join(f"{label}: {value}" for label, value in rc.evidence_items(h.get("evidence")))
            out.append(f"| {_md(h.get('rank'))} | {_md(h.get('step'))} | {_md(h.get('agent'))} | "
                       f"{_md(rc.fmt_score(h.get('score')))} | {_md(h.get('source'))} | {_md(h.get('rationale'))} | "
                       f"{_md(evidence)} | {_md(', '.join(verdicts.get(rc.whole(h.get('step')), [])) or 'not replayed')} |")
    else:
        out.append("No hypotheses (the session was not analyzed).")
    return out


def _md_interventions(r: "Report") -> list[str]:
    doc, replay, children = r.doc, r.replay, r.children
    out = ["", "## Interventions and replays", ""]
    tested = rc.replay_hypotheses(replay)
    if not replay:
        out.append("No replay has been run for this session, so no hypothesis is verified.")
    elif not tested:
        out.append("The replay produced no intervention.")
    for h in tested:
        iv = rc.fields(h.get("intervention"))
        out += [f"### {_md(rc.verdict_word(h.get('verdict')).upper())}: step {_md(h.get('step'))} · {_md(h.get('agent') or '?')}", "",
                f"{_md(h.get('reason'))}", "",
                f"Verdict: **{_md(rc.verdict_word(h.get('verdict')))}** — {_md(h.get('verdict_reason'))}", "",
                f"Intervention: {_md(iv.get('kind'))} ({_md(iv.get('category'))}) at step {_md(iv.get('step'))}", "",
                f"{_md(rc.before_label(iv))}:", "", _fence(rc.clip(str(iv.get('before') or '(nothing recorded)'), 3000)), "",
                f"{_md(rc.after_label(iv))}:", "", _fence(rc.clip(str(iv.get('text') or ''), 3000)), "",
                "| run | child session | success | fulfilled | progress | LLM cassette/live | divergence | final answer |",
                "|---|---|---|---|---|---|---|---|"]
        for number, run in enumerate(rc.objects(h.get("runs")), start=1):
            counts = rc.fields(run.get("counts"))
            div = run.get("divergence")
            out.append(f"| {number} | {_md(run.get('child_session_id'))} | {_md(rc.yes_no(run.get('success')))} | "
                       f"{_md(rc.yes_no(run.get('fulfilled')))} | {_md(rc.fmt_score(run.get('progress')))} | "
                       f"{_md(counts.get('llm_cassette', '—'))}/{_md(counts.get('llm_live', '—'))} | "
                       f"{_md('step ' + str(div.get('step')) if isinstance(div, dict) else 'none')} | "
                       f"{_md(rc.one_line(rc.final_answer(run.get('output')), 160)) or '—'} |")
        failures = [(number, run) for number, run in enumerate(rc.objects(h.get("runs")), start=1) if run.get("error")]
        if failures:
            out.append("")
        for number, run in failures:
            out.append(f"- replay {number} failed: {_md(rc.one_line(run['error'], 300))}")
        for cmp in rc.compare_runs(doc, h, children):
            out += ["", f"Replay {cmp.number} against the original from step {_md(iv.get('step', h.get('step')))} on:", ""]
            if cmp.child is None:
                out.append(f"(child session {_md(cmp.run.get('child_session_id'))} is not available)")
            elif cmp.same_as:
                out.append(f"(the same transcript as replay {cmp.same_as})")
            else:
                out.append(_fence("\n".join(cmp.unified_diff()) or "(no difference from step t on)", "diff"))
        out.append("")
    return out


def _md_pictures(r: "Report") -> list[str]:
    out = ["", "## Critical transition graph and anomaly scores", ""]
    if r.analysis:
        paths = r.image_paths or {}
        if paths:
            graph = paths.get("graph")
            scores = paths.get("scores")
        else:
            graph_png, scores_png = r.pictures
            graph = graph_png and "data:image/png;base64," + base64.b64encode(graph_png).decode("ascii")
            scores = scores_png and "data:image/png;base64," + base64.b64encode(scores_png).decode("ascii")
        if graph:
            out += [f"![critical transition graph]({graph})", ""]
        if scores:
            out += [f"![per-step anomaly scores]({scores})", ""]
    else:
        out.append("The session has not been analyzed yet.")
    return out


def _md_trace(r: "Report") -> list[str]:
    doc, analysis, replay = r.doc, r.analysis, r.replay
    out = ["", "## The trace", ""]
    scores_by = rc.score_by_step(analysis)
    frontier = rc.frontier_by_step(analysis)
    steps = doc.get("steps") or []
    trial_list = rc.trials(doc, replay)
    shown = rc.trace_positions(steps, analysis, replay)
    if note := rc.trace_note(steps, shown):
        out += [f"*{_md(note)}*", ""]
    current = previous = None
    for i in shown:
        step = steps[i]
        if gap := rc.trace_gap(steps, previous, i):
            out += ["", f"*… {_md(gap)}*", ""]
        previous = i
        k = int(step.get("index", i))
        owner = next((t for t in reversed(trial_list) if t.start <= k), trial_list[0])
        if (len(trial_list) > 1 or replay) and owner is not current:
            current = owner
            status = " (failed)" if owner.failed else " (succeeded)" if owner.failed is False else ""
            out += ["", f"### Trial {owner.index + 1}: steps {owner.start}–{owner.end}{status}", ""]
        marks = []
        sc = scores_by.get(k) or {}
        errors, got_past = rc.step_errors(step), rc.recovered_by(sc)
        if got_past is not None:
            marks.append(f"{_failure_mark(errors)}, got past at step {got_past}")
        elif errors:
            marks.append("error")
        if k in frontier:
            marks.append("frontier: " + ", ".join(frontier[k]))
        scores_txt = ", ".join(f"{d} {rc.fmt_score(sc[d])}" for d in ("isolation_forest", "hgt") if sc.get(d) is not None)
        out.append(f"{k}. **{_md(step.get('agent') or '?')}** {_md(rc.step_action(step))}"
                   + (f" — *{_md('; '.join(marks))}*" if marks else "") + (f" ({_md(scores_txt)})" if scores_txt else ""))
        for call in step.get("tool_calls") or []:
            shown = f"error {call['error']}" if call.get("error") else rc.to_json(call.get("result"), indent=None)
            out.append(f"   - {_md(call.get('name'))} → {_md(rc.one_line(shown, 300))}")
        if step.get("error"):
            out.append(f"   - error: {_md(rc.one_line(step['error'], 300))}")
    if gap := rc.trace_gap(steps, previous, len(steps)):
        out += ["", f"*… {_md(gap)}*"]
    return out


def _md_stages(r: "Report") -> list[str]:
    out = ["", "## How this diagnosis was made", "", "| stage | how |", "|---|---|"]
    out += [f"| {_md(stage)} | {_md(how)} |" for stage, how in rc.stage_rows(r.analysis, r.replay)]
    for note in rc.notes(r.analysis, r.replay):
        out.append(f"- {_md(note)}")
    return out


# --- the report: one list of sections, written as HTML or Markdown --------------------------------

@dataclass
class Report:
    """What one report is drawn from (docs/contracts.md §1, §3, §5)."""

    doc: dict
    analysis: dict | None = None
    replay: dict | None = None
    children: dict[str, dict] = field(default_factory=dict)
    image_paths: dict[str, str] | None = None  # Markdown: picture files the caller wrote

    @functools.cached_property
    def pictures(self) -> tuple[bytes | None, bytes | None]:
        """(graph, scores) PNGs, drawn once for the whole report."""
        return _images(self.analysis, self.replay)


@dataclass(frozen=True)
class Section:
    name: str
    html: Callable[[Report], str]
    markdown: Callable[[Report], list[str]] | None  # None: the HTML page alone has it


# the report's parts in page order; both formats walk this list
SECTIONS = (
    Section("header", _html_header, _md_header),
    Section("summary", _html_summary, _md_summary),
    Section("session", _html_facts, _md_facts),
    Section("hypotheses", _html_hypotheses, _md_hypotheses),
    Section("interventions", _html_interventions, _md_interventions),
    Section("pictures", _html_pictures, _md_pictures),
    Section("trace", _html_trace, _md_trace),
    Section("stages", _html_stages, _md_stages),
    Section("footer", _html_footer, None),
)


def render_html(doc: dict, analysis: dict | None = None, replay: dict | None = None,
                children: dict[str, dict] | None = None) -> str:
    """The whole report as one self-contained HTML page. A section that fails on malformed
    input says so in its place and the rest of the report still renders."""
    report = Report(doc, analysis, replay, children or {})
    report.pictures  # drawn before the sections, which show them
    parts = []
    for section in SECTIONS:
        try:
            parts.append(section.html(report))
        except Exception as exc:
            log.exception("the %s section of a report could not be rendered", section.name)
            parts.append(f'<div class="card b-bad">The {_e(section.name)} part of this report could not be rendered '
                         f"({_e(type(exc).__name__)}: {_e(rc.brief(exc, 300))}).</div>")
    return _page(f"tracefix report: {rc.one_line(rc.task_text(doc), 80)}", "".join(parts))


def render_markdown(doc: dict, analysis: dict | None = None, replay: dict | None = None,
                    children: dict[str, dict] | None = None, *, image_paths: dict[str, str] | None = None) -> str:
    """The report in Markdown, the same sections as the HTML page. Images are inline data URIs
    unless ``image_paths`` maps ``graph`` / ``scores`` to files the caller wrote (see
    ``report_images``)."""
    report = Report(doc, analysis, replay, children or {}, image_paths)
    # unlike the page, a failing section fails the whole text: render_stored_report then
    # writes the session alone with a note, which reads better in a flat file than gaps
    out: list[str] = []
    for section in SECTIONS:
        if section.markdown is not None:
            out += section.markdown(report)
    return "\n".join(out) + "\n"


def report_images(analysis: dict | None, replay: dict | None = None) -> dict[str, bytes]:
    """The report's PNGs by name (``graph``, ``scores``), for writing beside a Markdown file."""
    graph_png, scores_png = _images(analysis, replay)
    return {name: png for name, png in (("graph", graph_png), ("scores", scores_png)) if png}


# --- an index of several reports ----------------------------------------------------------------

def render_index(entries: list[dict], *, title: str = "tracefix: root-cause reports",
                 intro: str | None = None) -> str:
    """One page linking several reports. Each entry: ``href``, ``session_id``, ``task``,
    and optionally ``top_step``, ``verdict``, ``fix`` (the best tested fix, one line),
    ``problems`` (a list), and ``extra`` columns as a dict (label -> value)."""
    extra_cols: list[str] = []
    for entry in entries:
        for col in entry.get("extra") or {}:
            if col not in extra_cols:
                extra_cols.append(col)
    head = "".join(f"<th>{_e(c)}</th>" for c in ["session", "task", *extra_cols, "top hypothesis", "best verdict",
                                                  "best tested fix"])
    rows = []
    for entry in entries:
        extra = entry.get("extra") or {}
        sid = str(entry.get("session_id") or "")
        problems = "".join(f'<div class="b-bad">{_e(p)}</div>' for p in entry.get("problems") or [])
        rows.append(
            f"<tr><td><a href=\"{_e(entry.get('href'))}\" title=\"{_e(sid)}\"><code>{_e(sid[:12])}</code></a></td>"
            f"<td>{_e(rc.brief(entry.get('task'), 140))}</td>"
            + "".join(f"<td>{_e(extra.get(c, '—'))}</td>" for c in extra_cols)
            + f"<td style=\"white-space:nowrap\">{_e('step ' + str(entry['top_step']) if entry.get('top_step') is not None else '—')}</td>"
            f"<td>{_verdict_badge(entry['verdict']) if entry.get('verdict') else '<span class=muted>—</span>'}</td>"
            f"<td>{_e(rc.brief(entry.get('fix'), 110))}{problems}</td></tr>")
    body = (f"<h1>{_e(title)}</h1>" + (f'<p class="sub">{_e(intro)}</p>' if intro else "")
            + (f'<div class="card"><table><tr>{head}</tr>{"".join(rows)}</table></div>' if rows
               else '<div class="card muted">No reports: no session needed a diagnosis.</div>')
            + f"<footer>Generated {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} by tracefix.</footer>")
    return _page(title, body)


# --- reading a report's inputs from the store ------------------------------------------------------

def load_report_inputs(store, session_id: str) -> tuple[dict, dict | None, dict | None, dict[str, dict]]:
    """(session document, analysis, replay, child documents by id) from anything with the
    store access methods (docs/contracts.md §2: the access layer or the Store itself).
    Raises UnknownSession (a KeyError); a missing child is left out (the report says so)."""
    doc = store.get_session(session_id)
    if doc is None:
        raise UnknownSession(session_id)
    analysis = store.get_analysis(session_id)
    replay = store.get_replay(session_id)
    children = {}
    for child_id in dict.fromkeys(rc.child_session_ids(replay)):
        child = store.get_session(child_id)
        if child is not None:
            children[child_id] = child
    return doc, analysis, replay, children


def render_stored_report(store, session_id: str, fmt: str = "html") -> str:
    """The report of a stored session, its replays' child sessions beside it (what the
    collector's report route serves). Raises UnknownSession for an unknown session."""
    return render_stored(store, session_id, fmt, render_markdown if fmt == "md" else render_html)


def replay_refusal(store, session_id: str) -> str | None:
    """Why the session's latest replay job was refused (a session the app did not sign, an
    entrypoint it did not mark, ...), when it was: the report has no replay result to show."""
    jobs = store.list_jobs(session_id=session_id, kind="replay")
    last = jobs[-1] if jobs else None
    if last is None or last.get("state") != "refused":
        return None
    return f"Not replayed: the replay job was refused: {last.get('error') or 'no reason recorded'}"


def _with_notice(text: str, fmt: str, notice: str) -> str:
    if fmt == "md":
        return f"> **Note.** {notice}\n\n{text}"
    return text.replace("<main>", f'<main><p class="sub"><strong>Note.</strong> {html.escape(notice)}</p>', 1)


def render_stored(store, session_id: str, fmt: str, render: Callable[..., str]) -> str:
    """`render(doc, analysis, replay, children)` of a stored session (`fmt`: the format it
    writes, html or md). Analysis and replay results are stored as their clients posted
    them; one the renderer cannot read must not make the session's report unreachable, so
    the report is then drawn without them and says so at its top. Without a replay result,
    a refused replay job says why at the top. Raises UnknownSession."""
    try:
        inputs = load_report_inputs(store, session_id)
        text = render(*inputs)
    except Exception as exc:
        doc = store.get_session(session_id)
        if doc is None:
            raise UnknownSession(session_id) from None
        if store.get_analysis(session_id) is None and store.get_replay(session_id) is None:
            raise  # the session alone fails: the renderer's bug, not the stored results
        log.warning("report of session %s: its stored analysis/replay cannot be rendered: %s", session_id, exc)
        notice = (f"The stored analysis or replay result of this session could not be rendered "
                  f"({type(exc).__name__}: {exc}); this report shows the session without them.")
        return _with_notice(render(doc, None, None, {}), fmt, notice)
    refusal = replay_refusal(store, session_id) if inputs[2] is None else None
    return _with_notice(text, fmt, refusal) if refusal else text
