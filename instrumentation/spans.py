"""Attributes every tracefix span shares, and recording snapshots as span events."""
from __future__ import annotations

from typing import Any

from . import runtime, semconv as sc
from .attributes import canonical_json, set_attributes, truncate, warn_once
from .context import SessionState


def common_attributes(state: SessionState | None, agent: str | None, step: int | None = None) -> dict[str, Any]:
    """Session id (twice: ours and GenAI's conversation id), step and agent of a span."""
    attrs: dict[str, Any] = {}
    if state is not None:
        attrs[sc.SESSION_ID] = state.session_id
        attrs[sc.GEN_AI_CONVERSATION_ID] = state.session_id
        attrs[sc.STEP] = state.current_step if step is None else step
    if agent:
        attrs[sc.GEN_AI_AGENT_NAME] = agent
    return attrs


def truncation_marker(state: SessionState | None):
    """The on_truncate callback: a cut payload makes the session not replayable, said once."""
    def on_truncate(key: str) -> None:
        warn_once(f"truncate:{key}", "tracefix: attribute %s exceeded max_payload_bytes=%d and was truncated; "
                  "the session is marked not replayable", key, runtime.settings.max_payload_bytes)
        if state is not None:
            state.replayable = False
    return on_truncate


def set_span_attributes(span: Any, attrs: dict[str, Any], state: SessionState | None) -> None:
    set_attributes(span, attrs, max_bytes=runtime.settings.max_payload_bytes, on_truncate=truncation_marker(state))


def bounded(attrs: dict[str, Any], state: SessionState | None) -> dict[str, Any]:
    """`attrs` ready for a span as they are, each text over TRACEFIX_MAX_PAYLOAD_BYTES cut as
    `set_span_attributes` cuts it: for the LLM call's path, whose values are never None and
    only text, numbers and lists of text, so the common case is one look at each value."""
    limit = runtime.settings.max_payload_bytes
    if limit and any(type(value) is str and len(value) * 4 > limit for value in attrs.values()):
        on_truncate = truncation_marker(state)
        for key, value in list(attrs.items()):
            if type(value) is str:
                text, cut = truncate(value, limit)
                if cut:
                    attrs[key], attrs[sc.TRUNCATED] = text, True
                    on_truncate(key)
    return attrs


def add_snapshot_event(span: Any, key: str, state_value: Any, digest: str, step: int | None,
                       session: SessionState | None, name: str = sc.SNAPSHOT_EVENT) -> None:
    """A `tracefix.snapshot` event; its own tracefix.step says which step boundary it belongs to."""
    attrs: dict[str, Any] = {sc.SNAPSHOT_KEY: key, sc.SNAPSHOT_HASH: digest}
    if step is not None:
        attrs[sc.STEP] = step
    if runtime.settings.capture_content:
        text = canonical_json(state_value)
        limit = runtime.settings.max_payload_bytes
        if limit and len(text.encode("utf-8")) > limit:
            # a cut snapshot cannot be restored: keep the hash, drop the state, say so
            truncation_marker(session)(sc.SNAPSHOT_STATE)
            attrs[sc.TRUNCATED] = True
        else:
            attrs[sc.SNAPSHOT_STATE] = text
    span.add_event(name, attributes=attrs)
