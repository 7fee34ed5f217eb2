"""What `tracefix serve` runs of the parts above the collector, handed to it from outside.

The collector sits low in the dependency order (docs/architecture.md): it never imports the
analysis or the report. The process that wires the parts (the composition root,
`tracefix.cli` for `tracefix serve`) gives the collector a :class:`ServePipeline` instead:
one loader per upper part. A loader imports its part when first needed and returns the
callable, or raises ImportError when that part is not installed; a diagnosis then fails
with that error, the report route answers 404, `/` serves no web UI, and the collector
keeps serving.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol


class Diagnose(Protocol):
    def __call__(self, access: Any, session_id: str, mode: str, job_id: str) -> list[str]:
        """Diagnose one session through the store access layer (`mode`: "analysis" or "full");
        returns what was done, one line each."""


class RenderReport(Protocol):
    def __call__(self, store: Any, session_id: str, fmt: str) -> str:
        """The report of a stored session as HTML or Markdown (`fmt`: "html" | "md");
        KeyError for an unknown session."""


class WithWebUI(Protocol):
    def __call__(self, api_app: Any, collector: Any) -> Any:
        """The ASGI app that serves the web UI's paths and hands every other path to `api_app`."""


@dataclass(frozen=True)
class ServePipeline:
    diagnosis: Callable[[], Diagnose] | None = None
    report: Callable[[], RenderReport] | None = None
    web_ui: Callable[[], WithWebUI] | None = None  # tracefix.ui.with_ui: the pages at `/`
