"""A real report to look at: a message log with hostile text, imported into a running
`tracefix serve`, analyzed, and written by `tracefix report` (HTML and Markdown)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import procs
import pytest
from report_session import HOSTILE_LOG, tracefix


@dataclass
class Reported:
    server: str
    session_id: str
    html: Path
    markdown: Path
    folder: Path


@pytest.fixture(scope="session")
def reported(tmp_path_factory) -> Reported:
    folder = tmp_path_factory.mktemp("report")
    serve = procs.start_serve(folder / "store.duckdb", "--diagnose", "off")
    try:
        url = serve.match["http"]
        log = folder / "hostile.json"
        log.write_text(json.dumps(HOSTILE_LOG))
        [session_id] = json.loads(tracefix("import", str(log), "--server", url, "--json").stdout)
        tracefix("analyze", session_id, "--server", url)
        html, markdown = folder / "report.html", folder / "out" / "report.md"
        tracefix("report", session_id, "--server", url, "--out", str(html))
        tracefix("report", session_id, "--server", url, "--out", str(markdown))
        yield Reported(url, session_id, html, markdown, folder)
    finally:
        serve.stop()
