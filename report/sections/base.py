"""What every section of a report is given (`Report`: the session, its results, the child
sessions of its replays and, once drawn, its pictures) and what a section is (`Section`:
its name and its HTML and Markdown writers).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

from tracefix.report.plots import report_pictures


@dataclass
class Report:
    """What one report is drawn from (docs/contracts.md §1, §3, §5)."""

    doc: dict
    analysis: dict | None = None
    replay: dict | None = None
    children: dict[str, dict] = field(default_factory=dict)
    image_paths: dict[str, str] | None = None  # Markdown: picture files the caller wrote

    @functools.cached_property
    def pictures(self) -> tuple[bytes | None, bytes | None]:
        """(graph, scores) PNGs, drawn once for the whole report."""
        return report_pictures(self.analysis, self.replay)


@dataclass(frozen=True)
class Section:
    """One part of the report: its name (said when it fails) and its writer in each format."""

    name: str
    html: Callable[[Report], str]
    markdown: Callable[[Report], list[str]] | None  # None: the HTML page alone has it
