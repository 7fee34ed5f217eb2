"""Gives spans from other instrumentations (HTTP clients, frameworks) the session's id,
step and agent, so everything recorded during a session can be found by session."""
from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import SpanProcessor

from .context import current_agent, current_session
from .spans import common_attributes


class SessionAttributesProcessor(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        scope = getattr(span, "instrumentation_scope", None)
        if scope is not None and scope.name == "tracefix":
            return  # our own spans set these themselves, with the right step
        state = current_session()
        if state is None:
            return
        try:
            span.set_attributes(common_attributes(state, current_agent()))
        except Exception:
            pass

    def on_end(self, span: Any) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
