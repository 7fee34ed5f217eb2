"""The report's two pictures: the critical transition graph and the per-step anomaly scores
(drawn by `tracefix.report.plots`, once per report: `Report.pictures`).
"""
from __future__ import annotations

import base64

from tracefix.report.content.diagnosis import cause_label, ranked_causes
from tracefix.report.markdown import md
from tracefix.report.page import esc, img
from tracefix.report.sections.base import Report, Section


def star_note(r: Report) -> str:
    """Which step the graph stars, and that it is the summary's and the ranked table's first."""
    causes = ranked_causes(r.analysis, r.replay)
    if not causes:
        return ""
    return f"The star marks step {causes[0].step}, the {cause_label(causes[0])} (first in the ranked table)."


def _html_pictures(r: Report) -> str:
    analysis = r.analysis
    if not analysis:
        return ('<h2>Critical transition graph and anomaly scores</h2><p class="muted">The session has not been '
                "analyzed yet (run <code>tracefix analyze</code>).</p>")
    graph_png, scores_png = r.pictures
    version = analysis.get("model_version")
    return ("<h2>Critical transition graph</h2>"
            '<p class="sub">Steps left to right in one lane per agent; arcs are dependencies (shared artifacts, '
            f"repeated errors, repeated calls); steps ringed in red form the anomalous frontier. {esc(star_note(r))}</p>"
            + img(graph_png, "critical transition graph")
            + "<h2>Per-step anomaly scores</h2>"
            + (f'<p class="sub">model version {esc(version)}</p>' if version else "")
            + img(scores_png, "per-step anomaly scores of both detectors"))


def _md_pictures(r: Report) -> list[str]:
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
            out += [f"![critical transition graph]({graph})", ""] + ([md(star_note(r)), ""] if star_note(r) else [])
        if scores:
            out += [f"![per-step anomaly scores]({scores})", ""]
    else:
        out.append("The session has not been analyzed yet.")
    return out


PICTURES = Section("pictures", _html_pictures, _md_pictures)
