"""The escaped pieces of a Markdown report: inline text and fenced blocks.

Traces hold arbitrary text, so inline values are HTML-escaped (Markdown passes raw HTML
through) with their Markdown punctuation backslash-escaped, and long text goes into a
fenced block its own backticks cannot close.
"""
from __future__ import annotations

import html
import re

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")  # what can open markup mid-line


def md(value) -> str:
    """Inline Markdown text: HTML-escaped (Markdown passes raw HTML through) and with
    Markdown punctuation backslash-escaped, on one line."""
    text = " ".join(str("" if value is None else value).split())
    return _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))


def fence(text, lang: str = "") -> str:
    """A fenced block that the text cannot close: the fence is longer than any backtick run."""
    text = str(text)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    marker = "`" * max(3, longest + 1)
    return f"{marker}{lang}\n{text}\n{marker}"
