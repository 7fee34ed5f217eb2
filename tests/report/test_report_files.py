"""`tracefix report` on a real stored and analyzed session: the parts of the report, that
text from the trace never becomes markup, and that junk a store holds in its results costs
neither the report nor a traceback."""
from __future__ import annotations

import base64
import io
import json
import re
import urllib.request

import procs
import pytest
from PIL import Image
from report_session import tracefix

DATA_PNG = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def test_html_report_escapes_text_from_the_trace(reported):
    html = reported.html.read_text(encoding="utf-8")
    assert "<script" not in html.lower()  # the page has no script of its own either
    assert "<img src=x" not in html and "onerror=alert" not in html.replace("onerror=alert(1)&gt;", "")
    assert "&lt;script&gt;alert(&#x27;task&#x27;)&lt;/script&gt;" in html
    assert "&lt;/pre&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    assert "ünïcødé ✓" in html


def test_html_report_is_self_contained(reported):
    html = reported.html.read_text(encoding="utf-8")
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', html), "the report must open offline"
    assert "<link" not in html and "@import" not in html


def test_html_report_has_summary_trace_pictures_and_hypotheses(reported):
    html = reported.html.read_text(encoding="utf-8")
    assert "<b>Summary.</b>" in html and "Most likely root cause" in html
    for step in range(6):  # every message of the log is a numbered, collapsible step
        assert f'id="step-{step}"' in html
    assert html.count("<details class=\"step") == 6
    assert "Failure hypotheses, ranked" in html and 'href="#step-' in html
    assert "No replay has been run" in html  # replay not run: the report says so, nothing invented
    assert "no trained model" in html  # the analysis' own note about its detectors
    images = [Image.open(io.BytesIO(base64.b64decode(data))) for data in DATA_PNG.findall(html)]
    assert len(images) == 2, "graph and score timeline"
    for image in images:
        assert image.format == "PNG" and image.width > 300 and image.height > 150
    assert "… (" in html and "more characters)" in html  # the long message is clipped, and says so


def test_markdown_report_writes_its_images_beside_it_and_escapes_text(reported):
    md = reported.markdown.read_text(encoding="utf-8")
    assert md.startswith("# Root-cause report: Refund order 42")
    assert "<script>" not in md and "<img src=x" not in md
    assert "&lt;img src=x onerror=alert(1)&gt;" in md
    for name in ("graph", "scores"):
        image = reported.markdown.with_name(f"report.{name}.png")
        assert f"]({image.name})" in md
        assert Image.open(image).format == "PNG"
    assert "## The trace" in md and "\n5. **Orchestrator** FINAL ANSWER" in md
    assert "| stage | how |" in md


def test_report_of_an_unknown_session_is_a_clear_error(reported, tmp_path):
    result = tracefix("report", "no-such-session", "--server", reported.server, "--out", str(tmp_path / "x.html"),
                      check=False)
    assert result.returncode != 0
    assert "no session 'no-such-session'" in result.stderr
    assert not (tmp_path / "x.html").exists()


def test_collector_serves_the_same_report(reported):
    url = f"{reported.server}/api/v1/sessions/{reported.session_id}/report"
    with urllib.request.urlopen(url, timeout=60) as r:
        served = r.read().decode("utf-8")
        assert r.headers["Content-Type"].startswith("text/html")
    assert "Root-cause report: Refund order 42 &lt;script&gt;" in served
    assert len(DATA_PNG.findall(served)) == 2


# results as a store may hold them: posted with junk inside (the API checks the outline only),
# or written whole by another writer; the fuzz campaign's findings among them
JUNK_RESULTS = [
    ({"hypotheses": [{"step": "x", "rank": {}}], "scores": [{"step": 1, "recovered_by": {"a": 1}}, 5,
                                                            {"step": 0, "recovered_by": 1e308}]},
     {"hypotheses": [{"runs": ["str"]}, {"runs": {"a": 1}}]}),
    (None, {"trials": [{"index": {}}, {"end": None}], "hypotheses": [{"step": "x", "runs": [{"child_session_id": 5}]}]}),
    ({"hypotheses": ["x", {"step": 1}], "scores": "x", "notes": 5, "frontier": [1]},
     {"trials": ["x"], "hypotheses": "str", "stages": ["llm"], "notes": {"a": 1}}),
]


@pytest.mark.parametrize("analysis,replay", JUNK_RESULTS)
def test_report_cli_on_a_store_holding_junk_results_writes_the_report_without_a_traceback(tmp_path, analysis, replay):
    db = tmp_path / "junk.duckdb"
    serve = procs.start_serve(db, "--diagnose", "off")
    try:
        log = tmp_path / "log.json"
        log.write_text(json.dumps({"task": "read the junk", "history": [{"name": "Planner", "content": "plan"},
                                                                        {"name": "Worker", "content": "done"}]}))
        [sid] = json.loads(tracefix("import", str(log), "--server", serve.match["http"], "--json").stdout)
    finally:
        assert serve.stop() == 0
    import duckdb

    con = duckdb.connect(str(db))
    try:
        for table, result in (("analyses", analysis), ("replays", replay)):
            if result is not None:
                con.execute(f"INSERT INTO {table} VALUES (?, ?, 1)", [sid, json.dumps({"session_id": sid, **result})])
    finally:
        con.close()
    for out in (tmp_path / "junk.html", tmp_path / "md" / "junk.md"):
        done = tracefix("report", sid, "--db", str(db), "--out", str(out), check=False)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
        text = out.read_text(encoding="utf-8")
        assert "read the junk" in text and "could not be rendered" not in text
