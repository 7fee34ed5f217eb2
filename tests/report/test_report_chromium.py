"""The HTML report rendered by a real browser: Debian's headless Chromium takes a
screenshot; the page must draw something substantial and log no console error."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from PIL import Image

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Chromium logs every console message (errors included) as `...:CONSOLE:<line>] "text", source: ...`.
CONSOLE_LINE = re.compile(r":CONSOLE(?:\(\d+\))?:?\d*\]\s*(.*)")

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (`make chromium` installs it "
                                                          "with apt-get); the browser rendering test needs it")


def screenshot(page, png, profile, height=3000) -> str:
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--hide-scrollbars", f"--window-size=1280,{height}",
         "--enable-logging=stderr", "--v=0", f"--screenshot={png}", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert png.exists(), f"chromium wrote no screenshot (rc {result.returncode}):\n{result.stderr[-3000:]}"
    return result.stderr


def test_html_report_renders_in_headless_chromium_without_console_errors(reported, tmp_path):
    png = tmp_path / "report.png"
    log = screenshot(reported.html, png, tmp_path / "profile")
    console = [m.group(1) for m in map(CONSOLE_LINE.search, log.splitlines()) if m]
    assert console == [], f"console messages: {console}"

    image = Image.open(png).convert("RGB")
    assert image.size == (1280, 3000)
    small = image.resize((160, 375))
    colors = small.getcolors(maxcolors=1 << 16) or []
    background = max(colors)[0] if colors else 0
    drawn = 1 - background / (160 * 375)
    assert len(colors) > 200, "a report with text, badges and two plots has many colours"
    assert drawn > 0.15, f"only {drawn:.0%} of the page differs from its background"


def test_console_error_detection_catches_a_broken_page(tmp_path):
    """The check above can fail: a page with a script error is caught by the same parser."""
    page = tmp_path / "broken.html"
    page.write_text("<html><body><p>x</p><script>undefinedFunction()</script></body></html>")
    log = screenshot(page, tmp_path / "broken.png", tmp_path / "profile", height=400)
    console = [m.group(1) for m in map(CONSOLE_LINE.search, log.splitlines()) if m]
    assert any("undefinedFunction" in c for c in console), log[-2000:]
