"""Helpers shared by the instrumentation tests (a plain module: conftest names collide across areas)."""
from __future__ import annotations


def by_name(exporter, prefix: str) -> list:
    """Finished spans whose name starts with `prefix`, in end order."""
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]
