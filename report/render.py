"""Render the root-cause report of one session as self-contained HTML or as Markdown.

One list of sections (:data:`SECTIONS`: header, summary, session, hypotheses,
interventions, pictures, trace, stages; one module each in ``tracefix.report.sections``)
drives both formats; each section has an HTML and a Markdown writer side by side.
``render_html(doc, analysis, replay, children=None)`` returns one HTML page with inline CSS
and base64 PNG images: it opens offline and needs no JavaScript (``<details>`` does the
collapsing). ``render_markdown(...)`` says the same in Markdown. ``doc`` is the session
document, ``analysis`` and ``replay`` the results of docs/contracts.md §3 and §5 (either
may be None), ``children`` maps a replay run's child session id to its session document
so the runs can be compared with the original. The collector serves these at
``GET /api/v1/sessions/{id}/report`` and ``tracefix report`` writes them to a file, both
through ``tracefix.report.stored``.

Traces hold arbitrary text (user input, tool output, model output), so every value is
escaped on its way into the page: ``html.escape`` for HTML (``tracefix.report.page``), and
for Markdown, fenced blocks for long text and escaped inline text elsewhere
(``tracefix.report.markdown``).
"""
from __future__ import annotations

import logging

from tracefix.report.content.session import task_text
from tracefix.report.content.values import brief, one_line
from tracefix.report.page import esc, page
from tracefix.report.plots import report_pictures
from tracefix.report.sections import hypotheses, interventions, overview, pictures, stages, trace
from tracefix.report.sections.base import Report

log = logging.getLogger("tracefix.report")

# the report's parts in page order; both formats walk this list
SECTIONS = (
    overview.HEADER, overview.SUMMARY, overview.SESSION, hypotheses.HYPOTHESES,
    interventions.INTERVENTIONS, pictures.PICTURES, trace.TRACE, stages.STAGES, stages.FOOTER,
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
            parts.append(f'<div class="card b-bad">The {esc(section.name)} part of this report could not be rendered '
                         f"({esc(type(exc).__name__)}: {esc(brief(exc, 300))}).</div>")
    return page(f"tracefix report: {one_line(task_text(doc), 80)}", "".join(parts))


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
    graph_png, scores_png = report_pictures(analysis, replay)
    return {name: png for name, png in (("graph", graph_png), ("scores", scores_png)) if png}
