"""The ranked failure hypotheses, each with its evidence and the verdicts of the replays that
tested it, in the report's one order (content.diagnosis.ranked_causes): its first row is the
summary's root cause and the graph's star.
"""
from __future__ import annotations

from tracefix.report.content.diagnosis import (PERSON_RULE, RANKING_RULE, evidence_items, evidence_rest,
                                                person_marked, ranked_causes, verdict_word)
from tracefix.report.content.values import fields, fmt_score, to_json
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


def _person_rule(r: Report) -> list[str]:
    """Why the first step is first when a person marked it (empty otherwise)."""
    steps = person_marked(r.analysis)
    return [PERSON_RULE.format(steps=" and ".join(map(str, steps)))] if steps else []


def _html_hypotheses(r: Report) -> str:
    causes = ranked_causes(r.analysis, r.replay)
    if not causes:
        return '<h2>Failure hypotheses, ranked</h2><p class="muted">No hypotheses (the session was not analyzed).</p>'
    rows = []
    for position, c in enumerate(causes, start=1):
        h = c.analysed
        tested = " ".join(f'<a href="#hyp-{esc(t.get("id"))}">{verdict_badge(t.get("verdict"))}</a>'
                          for t in c.tested) or '<span class="muted">not replayed</span>'
        source = h.get("source") if h else f"replay ({', '.join(sorted({str(t.get('source')) for t in c.tested}))})"
        rows.append(
            f"<tr><td>{position}</td><td style=\"white-space:nowrap\"><a href=\"#step-{c.step}\">step {c.step}</a></td>"
            f"<td>{esc(c.agent)}</td><td>{esc(fmt_score(h.get('score')))}</td><td>{esc(source)}</td>"
            f"<td>{esc(c.why)}<div class=\"sub\">{_evidence_html(h.get('evidence'))}</div></td>"
            f"<td>{tested}</td></tr>")
    return (f'<h2>Failure hypotheses, ranked</h2><p class="sub">{esc(RANKING_RULE.capitalize())}.</p>'
            + "".join(f'<p class="marked-first"><b>{esc(rule)}.</b></p>' for rule in _person_rule(r))
            + '<div class="card"><table><tr><th>#</th><th>step</th><th>agent</th>'
            "<th>score</th><th>source</th><th>rationale and evidence</th><th>replay</th></tr>"
            + "".join(rows) + "</table></div>")


def _md_hypotheses(r: Report) -> list[str]:
    out = ["", "## Failure hypotheses, ranked", ""]
    causes = ranked_causes(r.analysis, r.replay)
    if causes:
        out += [f"{md(RANKING_RULE.capitalize())}.", ""]
        out += [line for rule in _person_rule(r) for line in (f"**{md(rule)}.**", "")]
        out += ["| # | step | agent | score | source | rationale | evidence | replay |", "|---|---|---|---|---|---|---|---|"]
        for position, c in enumerate(causes, start=1):
            h = c.analysed
            evidence = "; ".join(f"{label}: {value}" for label, value in evidence_items(h.get("evidence")))
            source = h.get("source") if h else "replay"
            verdicts = ", ".join(verdict_word(t.get("verdict")) for t in c.tested) or "not replayed"
            out.append(f"| {position} | {c.step} | {md(c.agent)} | {md(fmt_score(h.get('score')))} | {md(source)} | "
                       f"{md(c.why)} | {md(evidence)} | {md(verdicts)} |")
    else:
        out.append("No hypotheses (the session was not analyzed).")
    return out


HYPOTHESES = Section("hypotheses", _html_hypotheses, _md_hypotheses)
