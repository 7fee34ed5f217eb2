"""Interventions and replays: for each tested hypothesis its verdict, the edit (before and
after), its replay runs, and each run beside the original session from the edited step on
(side by side and as a unified diff).
"""
from __future__ import annotations

from tracefix.report.content.comparison import RunComparison, compare_runs
from tracefix.report.content.diagnosis import after_label, before_label, tested_in_order, trial_number, verdict_word
from tracefix.report.content.session import final_answer
from tracefix.report.content.values import clip, fields, fmt_score, objects, one_line, yes_no
from tracefix.report.markdown import fence, md
from tracefix.report.page import badge, esc, pre, verdict_badge, yes_no_badge
from tracefix.report.sections.base import Report, Section


def _run_header(cmp: RunComparison) -> str:
    run = cmp.run
    head = [f"Replay {cmp.number}",
            ("✓ success" if run.get("success") else "✗ failure") if run.get("success") is not None else "? outcome",
            f"fulfilled {'yes' if run.get('fulfilled') else 'no' if run.get('fulfilled') is not None else '?'}",
            f"progress {fmt_score(run.get('progress'))}"]
    return " · ".join(head)


def _html_side_by_side(comparisons: list[RunComparison]) -> str:
    if not comparisons:
        return ""
    original = comparisons[0].original
    dropped = set.intersection(*(c.dropped_lines for c in comparisons)) if all(c.child for c in comparisons) else set()
    cols = ['<div class="col"><h4>Original from step t</h4>' + "".join(
        f'<div class="ln{" gone" if i in dropped else ""}"><span class="n">[{k}]</span> {esc(line)}</div>'
        for i, (k, line) in enumerate(original)) + ("" if original else '<div class="ln muted">(no steps)</div>') + "</div>"]
    for cmp in comparisons:
        if cmp.child is None:
            body = (f'<div class="ln muted">child session {esc(cmp.run.get("child_session_id") or "—")} '
                    "is not available</div>")
        else:
            changed = cmp.changed_lines
            body = "".join(f'<div class="ln{" chg" if j in changed else ""}"><span class="n">[{k}]</span> {esc(line)}</div>'
                           for j, (k, line) in enumerate(cmp.replayed)) or '<div class="ln muted">(no steps)</div>'
        cols.append(f'<div class="col"><h4>{esc(_run_header(cmp))}</h4>{body}</div>')
    return (f'<div class="grid" style="grid-template-columns: repeat({len(cols)}, minmax(220px, 1fr))">'
            + "".join(cols) + "</div>"
            '<p class="sub">Green: lines a replay produced that the original did not; red: original lines '
            "that no replay reproduced.</p>")


def _html_runs_table(hypothesis: dict) -> str:
    rows = []
    for number, run in enumerate(objects(hypothesis.get("runs")), start=1):
        counts = fields(run.get("counts"))
        judged = fields(run.get("judged_by"))
        div = run.get("divergence")
        rows.append(
            f"<tr><td>{number}</td><td><code>{esc(run.get('child_session_id') or '—')}</code></td>"
            f"<td>{yes_no_badge(run.get('success'))}</td><td>{esc(fmt_score(run.get('score')))}</td>"
            f"<td>{yes_no_badge(run.get('fulfilled'))}</td><td>{esc(fmt_score(run.get('progress')))}</td>"
            f"<td>{esc(counts.get('llm_cassette', '—'))} / {esc(counts.get('llm_live', '—'))}</td>"
            f"<td>{esc(counts.get('tool_cassette', '—'))} / {esc(counts.get('tool_live', '—'))}</td>"
            f"<td>{esc('at step ' + str(div.get('step')) if isinstance(div, dict) else 'none')}</td>"
            f"<td>{esc(fmt_score(run.get('wall_s'), 1) + ' s' if run.get('wall_s') is not None else '—')}</td></tr>")
        details = [f"final answer: {esc(one_line(final_answer(run.get('output')), 300)) or '—'}"]
        if judged:
            details.append("judged by: " + ", ".join(f"{esc(k)}: {esc(v)}" for k, v in judged.items()))
        if run.get("error"):
            details.append(f'<span class="b-bad">error: {esc(one_line(run["error"], 300))}</span>')
        rows.append(f'<tr><td></td><td colspan="9" class="sub">{"<br>".join(details)}</td></tr>')
    return ("<table><tr><th>run</th><th>child session</th><th>success</th><th>score</th><th>fulfilled</th>"
            "<th>progress</th><th>LLM calls cassette / live</th><th>tools cassette / live</th><th>divergence</th>"
            "<th>wall</th></tr>" + "".join(rows) + "</table>")


def _html_interventions(r: Report) -> str:
    doc, replay, children = r.doc, r.replay, r.children
    tested = tested_in_order(r.analysis, replay)
    if not replay:
        return ('<h2>Interventions and replays</h2><p class="muted">No replay has been run for this session '
                "(<code>tracefix replay</code>), so no hypothesis is verified.</p>")
    if not tested:
        return '<h2>Interventions and replays</h2><p class="muted">The replay produced no intervention.</p>'
    cards = []
    for h in tested:
        iv = fields(h.get("intervention"))
        comparisons = compare_runs(doc, h, children)
        diffs = "".join(
            f"<details><summary>Unified diff: original vs replay {c.number}</summary>"
            f"<pre>{esc(chr(10).join(c.unified_diff()) or '(no difference from step t on)')}</pre></details>"
            if not c.same_as else f'<p class="sub">Replay {c.number}: the same transcript as replay {c.same_as}.</p>'
            for c in comparisons if c.child is not None)
        cards.append(
            f'<div class="card" id="hyp-{esc(h.get("id"))}"><h3>{verdict_badge(h.get("verdict"))} '
            f'Step {esc(h.get("step"))} · {esc(h.get("agent") or "?")} '
            f'<span class="sub">hypothesis {esc(h.get("id"))}, round {esc(h.get("round"))}, trial {esc(trial_number(h))}, '
            f'source {esc(h.get("source"))}</span></h3>'
            f"<p>{esc(h.get('reason'))}</p>"
            f"<p><b>Verdict:</b> {esc(verdict_word(h.get('verdict')))} — {esc(h.get('verdict_reason'))}</p>"
            f"<p><b>Intervention</b> {badge(iv.get('kind') or '?', 'b-info')}{badge(iv.get('category') or '?', 'b-muted')}"
            f" at step {esc(iv.get('step'))}"
            + (f", tool call <code>{esc(iv['tool_call_id'])}</code>" if iv.get("tool_call_id") else "")
            + (f' <span class="sub">written by {esc(iv["source"])}</span>' if iv.get("source") else "")
            + "</p><div class=\"beforeafter\"><div><div class=\"msg-role\">" + esc(before_label(iv)) + "</div>"
            + pre(iv.get("before") if iv.get("before") not in (None, "") else "(nothing recorded)", 3000)
            + "</div><div><div class=\"msg-role\">" + esc(after_label(iv)) + "</div>" + pre(iv.get("text") or "", 3000)
            + "</div></div><h3>Replays</h3>" + _html_runs_table(h)
            + "<h3>Side by side from step t</h3>" + _html_side_by_side(comparisons) + diffs + "</div>")
    return "<h2>Interventions and replays</h2>" + "".join(cards)


def _md_interventions(r: Report) -> list[str]:
    doc, replay, children = r.doc, r.replay, r.children
    out = ["", "## Interventions and replays", ""]
    tested = tested_in_order(r.analysis, replay)
    if not replay:
        out.append("No replay has been run for this session, so no hypothesis is verified.")
    elif not tested:
        out.append("The replay produced no intervention.")
    for h in tested:
        iv = fields(h.get("intervention"))
        out += [f"### {md(verdict_word(h.get('verdict')).upper())}: step {md(h.get('step'))} · {md(h.get('agent') or '?')}", "",
                f"{md(h.get('reason'))}", "",
                f"Verdict: **{md(verdict_word(h.get('verdict')))}** — {md(h.get('verdict_reason'))}", "",
                f"Intervention: {md(iv.get('kind'))} ({md(iv.get('category'))}) at step {md(iv.get('step'))}", "",
                f"{md(before_label(iv))}:", "", fence(clip(str(iv.get('before') or '(nothing recorded)'), 3000)), "",
                f"{md(after_label(iv))}:", "", fence(clip(str(iv.get('text') or ''), 3000)), "",
                "| run | child session | success | fulfilled | progress | LLM cassette/live | divergence | final answer |",
                "|---|---|---|---|---|---|---|---|"]
        for number, run in enumerate(objects(h.get("runs")), start=1):
            counts = fields(run.get("counts"))
            div = run.get("divergence")
            out.append(f"| {number} | {md(run.get('child_session_id'))} | {md(yes_no(run.get('success')))} | "
                       f"{md(yes_no(run.get('fulfilled')))} | {md(fmt_score(run.get('progress')))} | "
                       f"{md(counts.get('llm_cassette', '—'))}/{md(counts.get('llm_live', '—'))} | "
                       f"{md('step ' + str(div.get('step')) if isinstance(div, dict) else 'none')} | "
                       f"{md(one_line(final_answer(run.get('output')), 160)) or '—'} |")
        failures = [(number, run) for number, run in enumerate(objects(h.get("runs")), start=1) if run.get("error")]
        if failures:
            out.append("")
        for number, run in failures:
            out.append(f"- replay {number} failed: {md(one_line(run['error'], 300))}")
        for cmp in compare_runs(doc, h, children):
            out += ["", f"Replay {cmp.number} against the original from step {md(iv.get('step', h.get('step')))} on:", ""]
            if cmp.child is None:
                out.append(f"(child session {md(cmp.run.get('child_session_id'))} is not available)")
            elif cmp.same_as:
                out.append(f"(the same transcript as replay {cmp.same_as})")
            else:
                out.append(fence("\n".join(cmp.unified_diff()) or "(no difference from step t on)", "diff"))
        out.append("")
    return out


INTERVENTIONS = Section("interventions", _html_interventions, _md_interventions)
