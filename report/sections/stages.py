"""The report's last sections: how the diagnosis was made (each stage, whether an LLM or a
deterministic fallback ran it, the results' notes), and the HTML page's footer.
"""
from __future__ import annotations

from datetime import datetime, timezone

from tracefix.report.content.summary import notes, stage_rows
from tracefix.report.markdown import md
from tracefix.report.page import esc
from tracefix.report.sections.base import Report, Section


def _html_stages(r: Report) -> str:
    analysis, replay = r.analysis, r.replay
    rows = "".join(f"<tr><th>{esc(stage)}</th><td>{esc(how)}</td></tr>" for stage, how in stage_rows(analysis, replay))
    note_items = "".join(f"<li>{esc(n)}</li>" for n in notes(analysis, replay))
    notes_html = f'<ul class="muted">{note_items}</ul>' if note_items else ""
    return (f'<h2>How this diagnosis was made</h2><div class="card"><table class="facts">{rows}</table>'
            f"{notes_html}</div>")


def _html_footer(r: Report) -> str:
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"<footer>Generated {generated} by tracefix. Self-contained: no network needed to view.</footer>"


def _md_stages(r: Report) -> list[str]:
    out = ["", "## How this diagnosis was made", "", "| stage | how |", "|---|---|"]
    out += [f"| {md(stage)} | {md(how)} |" for stage, how in stage_rows(r.analysis, r.replay)]
    for note in notes(r.analysis, r.replay):
        out.append(f"- {md(note)}")
    return out


STAGES = Section("stages", _html_stages, _md_stages)
FOOTER = Section("footer", _html_footer, None)
