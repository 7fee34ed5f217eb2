"""One HTML page linking several reports (the demo's index of its sessions' reports)."""
from __future__ import annotations

from datetime import datetime, timezone

from tracefix.report.content.values import brief
from tracefix.report.page import esc, page, verdict_badge


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
    head = "".join(f"<th>{esc(c)}</th>" for c in ["session", "task", *extra_cols, "top hypothesis", "best verdict",
                                                  "best tested fix"])
    rows = []
    for entry in entries:
        extra = entry.get("extra") or {}
        sid = str(entry.get("session_id") or "")
        problems = "".join(f'<div class="b-bad">{esc(p)}</div>' for p in entry.get("problems") or [])
        rows.append(
            f"<tr><td><a href=\"{esc(entry.get('href'))}\" title=\"{esc(sid)}\"><code>{esc(sid[:12])}</code></a></td>"
            f"<td>{esc(brief(entry.get('task'), 140))}</td>"
            + "".join(f"<td>{esc(extra.get(c, '—'))}</td>" for c in extra_cols)
            + f"<td style=\"white-space:nowrap\">{esc('step ' + str(entry['top_step']) if entry.get('top_step') is not None else '—')}</td>"
            f"<td>{verdict_badge(entry['verdict']) if entry.get('verdict') else '<span class=muted>—</span>'}</td>"
            f"<td>{esc(brief(entry.get('fix'), 110))}{problems}</td></tr>")
    body = (f"<h1>{esc(title)}</h1>" + (f'<p class="sub">{esc(intro)}</p>' if intro else "")
            + (f'<div class="card"><table><tr>{head}</tr>{"".join(rows)}</table></div>' if rows
               else '<div class="card muted">No reports: no session needed a diagnosis.</div>')
            + f"<footer>Generated {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} by tracefix.</footer>")
    return page(title, body)
