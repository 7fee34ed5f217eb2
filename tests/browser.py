"""Headless Chromium for tests: a screenshot of a page and the console messages it logged.

Debian's `chromium` (`make chromium` installs it); `CHROMIUM` is None where it is missing."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Chromium logs every console message (errors included) as `...:CONSOLE:<line>] "text", source: ...`.
CONSOLE_LINE = re.compile(r":CONSOLE(?:\(\d+\))?:?\d*\]\s*(.*)")


def screenshot(url: str, png: Path, profile: Path, height: int = 3000) -> str:
    """Load `url` (file:// or http://), write a 1280 x `height` screenshot to `png`; Chromium's log."""
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--hide-scrollbars", f"--window-size=1280,{height}",
         "--enable-logging=stderr", "--v=0", f"--screenshot={png}", url],
        capture_output=True, text=True, timeout=120)
    assert png.exists(), f"chromium wrote no screenshot (rc {result.returncode}):\n{result.stderr[-3000:]}"
    return result.stderr


def console_messages(log: str) -> list[str]:
    return [m.group(1) for m in map(CONSOLE_LINE.search, log.splitlines()) if m]


def drawing(png: Path) -> tuple[int, float]:
    """How much a screenshot shows: its number of colours (at 1/8 size) and the share of
    the page that differs from its most common colour (the background)."""
    from PIL import Image

    image = Image.open(png).convert("RGB")
    small = image.resize((image.width // 8, image.height // 8))
    colors = small.getcolors(maxcolors=1 << 16) or []
    background = max(colors)[0] if colors else 0
    return len(colors), 1 - background / (small.width * small.height)


def watched(page, timeout_ms: int = 20_000):
    """A Playwright page that keeps, in `page.problems`, its console errors and warnings (CSP
    violations are reported there) and its uncaught exceptions, for a test to assert none."""
    page.set_default_timeout(timeout_ms)
    page.problems = []
    page.on("console", lambda m: m.type in ("error", "warning") and page.problems.append(m.text))
    page.on("pageerror", lambda e: page.problems.append(str(e)))
    return page
