"""The demo's last lines offer the web UI's address as a link only while it answers: without
--keep from a terminal the collector stops with the demo (issue 38: a dead link was printed
as `web UI: URL`). The whole demo run checks the printed line too (tests/e2e/test_demo.py)."""
from __future__ import annotations

import re

from tracefix.demo.pipeline import web_ui_line

URL = "http://127.0.0.1:40123"
LIVE_LINK = re.compile(r"^web UI: http://\S+/?(\s|$)")


def test_a_stopped_ui_is_not_offered_as_a_link_and_says_how_to_keep_it():
    line = web_ui_line(URL, serving=False)
    assert not LIVE_LINK.match(line), line
    assert "stopped with the demo" in line and "--keep" in line and URL in line


def test_a_kept_ui_is_the_link_and_says_until_when():
    line = web_ui_line(URL, serving=True)
    assert LIVE_LINK.match(line) and "until Ctrl-C" in line, line
