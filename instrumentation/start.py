"""`tracefix.init()`: start tracing (tracefix.configure) and patch the LLM SDKs
(tracefix.instrumentor) onto it.

Kept apart from both so their imports run one way (start -> instrumentor -> configure): the
instrumentor starts tracing on its own when `opentelemetry-instrument` runs it with no SDK
configured. The instrumentor (it pulls opentelemetry-instrumentation) is imported when
init() runs, not when `tracefix` is imported.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .configure import TracefixHandle, start_tracing


def init(endpoint: str | None = None, protocol: str | None = None, headers: dict | str | None = None,
         service_name: str | None = None, capture_content: bool | None = None, tracer_provider: Any = None,
         redact: Callable | Sequence[Callable] | None = None, max_payload_bytes: int | None = None,
         span_processor: Any = None, exporter: Any = None, replay_key: str | bytes | None = None) -> TracefixHandle:
    """Set up tracing and patch the LLM SDKs; see the `tracefix` module docstring."""
    from .instrumentor import TracefixInstrumentor

    return start_tracing(endpoint=endpoint, protocol=protocol, headers=headers, service_name=service_name,
                         capture_content=capture_content, tracer_provider=tracer_provider, redact=redact,
                         max_payload_bytes=max_payload_bytes, span_processor=span_processor, exporter=exporter,
                         instrumentor=TracefixInstrumentor(), replay_key=replay_key)
