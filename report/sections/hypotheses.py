"""The ranked failure hypotheses of the analysis, each with its evidence and the verdicts of
the replays that tested it.
"""
from __future__ import annotations

from tracefix.report.content.diagnosis import evidence_items, evidence_rest, verdict_word
from tracefix.report.content.values import fields, fmt_score, hypotheses, to_json, whole
from tracefix.report.markdown import md
from tracefix.report.page import esc, pre, verdict_badge
from tracefix.report.sections.base import Report, Section


def _evidence_html(evidence: dict) -> str:
    """The evidence packet, short: the fields a person reads first, the rest folded away."""
    if not fields(evidence):
        return '<span class="muted">—</span>'
    items = [f"{esc(label)}: {value}" for label, value in evidence_items(evidence, escape=esc)]
    rest = evidence_rest(evidence)
    if rest:
        items.append(f"<details><summary>full evidence packet</summary>{pre(to_json(rest), 3000)}</details>")
    return "<br>".join(items)


def _html_hypotheses(r: Report) -> str:
    analysis, replay = r.analysis, r.replay
    hyps = hypotheses(analysis)
    if not hyps:
        return '<h2>Failure hypotheses</h2><p class="muted">No hypotheses (the session was not analyzed).</p>'
    verdicts: dict[int | None, list[dict]] = {}
    for h in hypotheses(replay):
        verdicts.setdefault(whole(h.get("step")), []).append(h)
    rows = []
    for h in hyps:
        tested = " ".join(f'<a href="#hyp-{esc(t.get("id"))}">{verdict_badge(t.get("verdict"))}</a>'
                          for t in verdicts.get(whole(h.get("step")), [])) or '<span class="muted">not replayed</span>'
        rows.append(
            f"<tr><td>{esc(h.get('rank'))}</td><td style=\"white-space:nowrap\"><a href=\"#step-{esc(h.get('step'))}\">step {esc(h.get('step'))}</a></td>"
            f"<td>{esc(h.get('agent'))}</td><td>{esc(fmt_score(h.get('score')))}</td><td>{esc(h.get('source'))}</td>"
            f"<td>{esc(h.get('rationale'))}<div class=\"sub\">{_evidence_html(h.get('evidence'))}</div></td>"
            f"<td>{tested}</td></tr>")
    return ("<h2>Failure hypotheses, ranked</h2><div class=\"card\"><table><tr><th>#</th><th>step</th><th>agent</th>"
            "<th>score</th><th>source</th><th>rationale and evidence</th><th>replay</th></tr>"
            + "".join(rows) + "</table></div>")


def _md_hypotheses(r: Report) -> list[str]:
    out = ["", "## Failure hypotheses, ranked", ""]
    hyps = hypotheses(r.analysis)
    verdicts: dict = {}
    for h in hypotheses(r.replay):
        verdicts.setdefault(whole(h.get("step")), []).append(verdict_word(h.get("verdict")))
    if hyps:
        out += ["| # | step | agent | score | source | rationale | evidence | replay |", "|---|---|---|---|---|---|---|---|"]
        for h in hyps:
            evidence = "; ".join(f"{label}: {value}" for label, value in evidence_items(h.get("evidence")))
            out.append(f"| {md(h.get('rank'))} | {md(h.get('step'))} | {md(h.get('agent'))} | "
                       f"{md(fmt_score(h.get('score')))} | {md(h.get('source'))} | {md(h.get('rationale'))} | "
                       f"{md(evidence)} | {md(', '.join(verdicts.get(whole(h.get('step')), [])) or 'not replayed')} |")
    else:
        out.append("No hypotheses (the session was not analyzed).")
    return out


HYPOTHESES = Section("hypotheses", _html_hypotheses, _md_hypotheses)
