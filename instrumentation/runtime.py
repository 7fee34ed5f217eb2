"""Process-wide instrumentation settings: which tracer, capture on/off, payload limit, replay.

`init()` fills this in; the SDK wrappers and the public API read it. Kept in one small
module so every part sees the same values without importing the exporter machinery.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_PAYLOAD_BYTES = 512 * 1024


def env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


@dataclass
class Settings:
    capture_content: bool = True
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES

    @classmethod
    def from_env(cls, capture_content: bool | None = None, max_payload_bytes: int | None = None) -> "Settings":
        if capture_content is None:
            # OpenTelemetry's own GenAI switch is honoured too: either one set to false turns capture off
            capture_content = (env_flag("TRACEFIX_CAPTURE_CONTENT", True)
                               and env_flag("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", True))
        if max_payload_bytes is None:
            max_payload_bytes = int(os.environ.get("TRACEFIX_MAX_PAYLOAD_BYTES", DEFAULT_MAX_PAYLOAD_BYTES))
        return cls(capture_content=capture_content, max_payload_bytes=max_payload_bytes)


settings = Settings.from_env()
_tracer: Any = None
replay: Any = None  # the ReplayController while TRACEFIX_REPLAY is active


def set_tracer(tracer: Any) -> None:
    global _tracer
    _tracer = tracer


def tracer() -> Any:
    """The tracer tracefix writes with: init()'s provider, else the global one."""
    if _tracer is not None:
        return _tracer
    from opentelemetry import trace

    return trace.get_tracer("tracefix")
