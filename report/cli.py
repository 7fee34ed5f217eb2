"""`tracefix report SESSION`: write a session's root-cause report to a file.

Reads the session, its analysis, its replay result and the replays' child sessions through
the store access layer (``--server`` / ``--db``, or TRACEFIX_SERVER / TRACEFIX_DB /
TRACEFIX_TOKEN), and writes one self-contained HTML file or a Markdown file (whose two
images are written beside it as PNG files).
"""
from __future__ import annotations

from pathlib import Path

import click

from tracefix.collector.cli_options import store_options


def write_report(store, session_id: str, out: str | Path, fmt: str = "html") -> Path:
    """Render and write one report, as the collector's report route renders it (stored
    results it cannot read left out, with a note); returns its path. Raises KeyError for an
    unknown session."""
    from tracefix.report import render as report
    from tracefix.report.stored import render_stored

    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)

    def markdown(doc, analysis, replay, children) -> str:
        image_paths = {}
        for name, png in report.report_images(analysis, replay).items():
            image = path.with_name(f"{path.stem}.{name}.png")
            image.write_bytes(png)
            image_paths[name] = image.name  # relative: the folder can be moved as a whole
        return report.render_markdown(doc, analysis, replay, children, image_paths=image_paths)

    text = render_stored(store, session_id, fmt, markdown if fmt == "md" else report.render_html)
    path.write_text(text, encoding="utf-8")
    return path


@click.command()
@click.argument("session_id")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="File to write (default report-SESSION.html or .md).")
@click.option("--format", "fmt", type=click.Choice(["html", "md"]), default=None,
              help="html (self-contained, default) or md (Markdown, images beside it); "
                   "inferred from --out's suffix when not given.")
@store_options
def report(session_id, out, fmt, server, db, token):
    """Write the root-cause report of SESSION (HTML or Markdown).

    The report holds the task, outcome and feedback, the trace as numbered steps, the
    critical transition graph, both detectors' per-step scores, the ranked hypotheses, and
    for each tested intervention its edit, its replays beside the original and its verdict.
    """
    from tracefix.collector.access import connect

    if fmt is None:
        fmt = "md" if out and Path(out).suffix.lower() in (".md", ".markdown") else "html"
    out = out or f"report-{session_id}.{fmt}"
    try:
        store = connect(server=server, db=db, token=token, create=False)
    except Exception as exc:
        raise click.ClickException(f"cannot open the store ({exc})") from exc
    try:
        path = write_report(store, session_id, out, fmt)
    except KeyError:
        raise click.ClickException(f"no session {session_id!r} in the store (list them with `tracefix sessions`)") from None
    except OSError as exc:
        raise click.ClickException(f"cannot write the report: {exc}") from None
    except Exception as exc:  # a renderer's bug is said in one line, as the report route says it
        raise click.ClickException(f"the report renderer failed: {type(exc).__name__}: {exc}") from None
    finally:
        store.close()
    click.echo(f"wrote {path} ({path.stat().st_size // 1024} KB)")
