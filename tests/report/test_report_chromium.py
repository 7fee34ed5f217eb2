"""The HTML report rendered by a real browser: Debian's headless Chromium takes a
screenshot; the page must draw something substantial and log no console error."""
from __future__ import annotations

import pytest
from browser import CHROMIUM, console_messages, drawing, screenshot
from PIL import Image

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (`make chromium` installs it "
                                                          "with apt-get); the browser rendering test needs it")


def test_html_report_renders_in_headless_chromium_without_console_errors(reported, tmp_path):
    png = tmp_path / "report.png"
    log = screenshot(reported.html.as_uri(), png, tmp_path / "profile")
    console = console_messages(log)
    assert console == [], f"console messages: {console}"

    assert Image.open(png).size == (1280, 3000)
    colors, drawn = drawing(png)
    assert colors > 200, "a report with text, badges and two plots has many colours"
    assert drawn > 0.15, f"only {drawn:.0%} of the page differs from its background"


def test_console_error_detection_catches_a_broken_page(tmp_path):
    """The check above can fail: a page with a script error is caught by the same parser."""
    page = tmp_path / "broken.html"
    page.write_text("<html><body><p>x</p><script>undefinedFunction()</script></body></html>")
    log = screenshot(page.as_uri(), tmp_path / "broken.png", tmp_path / "profile", height=400)
    console = console_messages(log)
    assert any("undefinedFunction" in c for c in console), log[-2000:]
