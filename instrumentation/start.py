"""`tracefix.init()`: start tracing (tracefix.configure) and patch the LLM SDKs
(tracefix.instrumentor) onto it.

Kept apart from both so their imports run one way (start -> instrumentor -> configure): the
instrumentor starts tracing on its own when `opentelemetry-instrument` runs it with no SDK
configured. The instrumentor (it pulls opentelemetry-instrumentation) is imported when
init() runs, not when `tracefix` is imported; the GenAI metrics (tracefix.genai_metrics, the
OpenTelemetry metrics SDK) only when they are switched on.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .configure import TracefixHandle, start_tracing


def init(endpoint: str | None = None, protocol: str | None = None, headers: dict | str | None = None,
         service_name: str | None = None, capture_content: bool | None = None, tracer_provider: Any = None,
         redact: Callable | Sequence[Callable] | None = None, max_payload_bytes: int | None = None,
         span_processor: Any = None, exporter: Any = None, replay_key: str | bytes | None = None,
         metrics: bool | None = None) -> TracefixHandle:
    """Set up tracing and patch the LLM SDKs; see the `tracefix` module docstring."""
    from .genai_metrics import wanted
    from .instrumentor import TracefixInstrumentor

    handle = start_tracing(endpoint=endpoint, protocol=protocol, headers=headers, service_name=service_name,
                           capture_content=capture_content, tracer_provider=tracer_provider, redact=redact,
                           max_payload_bytes=max_payload_bytes, span_processor=span_processor, exporter=exporter,
                           instrumentor=TracefixInstrumentor(), replay_key=replay_key)
    if wanted(metrics):
        start_metrics(handle, endpoint, protocol, headers)
    return handle


def start_metrics(handle: TracefixHandle, endpoint: str | None, protocol: str | None,
                  headers: dict | str | None) -> None:
    """Record the GenAI client metrics of every LLM call the handle traces, exported where
    its spans go (once per handle: init() may be called again)."""
    from .configure import _parse_headers
    from .genai_metrics import GenAIMetricsProcessor, metric_exporter

    if any(isinstance(p, GenAIMetricsProcessor) for p in handle.processors):
        return
    processor = GenAIMetricsProcessor(metric_exporter(endpoint, protocol, _parse_headers(headers)),
                                      getattr(handle.provider, "resource", None))
    handle.provider.add_span_processor(processor)
    handle.processors.append(processor)  # flushed and shut down with the spans
