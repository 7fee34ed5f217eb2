"""The GenAI client metrics, recorded for every LLM call tracefix traces: off unless
``tracefix.init(metrics=True)`` or ``TRACEFIX_METRICS=1``.

``gen_ai.client.operation.duration`` (seconds) and ``gen_ai.client.token.usage`` (tokens, one
point per ``gen_ai.token.type``, input and output) as the GenAI semantic conventions define
them (their attributes and advisory bucket boundaries), through the OpenTelemetry metrics SDK
and an OTLP metric exporter to the same collector as the spans. This module, and with it the
metrics SDK, is imported only when the switch is on: ``import tracefix`` stays light.

The hook is a span processor: an LLM call finishes when its span ends (``llm.LLMCall``
ends it once the response, the stream's last chunk or the error is recorded), and the ended
span holds what the metrics need (model, provider, server, usage, error type, its start and
end). Only tracefix's own LLM spans count; a call a replay served from its recording does
not (no model was called).
"""
from __future__ import annotations

import os
from typing import Any

from opentelemetry.sdk.trace import SpanProcessor  # loaded by init() already (tracefix.configure)

from . import runtime
from . import semconv as sc

METRICS_ENV = "TRACEFIX_METRICS"
DURATION = "gen_ai.client.operation.duration"
TOKEN_USAGE = "gen_ai.client.token.usage"
TOKEN_TYPE = "gen_ai.token.type"
# the conventions' advisory boundaries (gen-ai-metrics.md)
DURATION_BOUNDS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
TOKEN_BOUNDS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]
# what a point carries of its call's span (the conventions' attributes of both metrics)
CALL_ATTRIBUTES = (sc.GEN_AI_OPERATION_NAME, sc.GEN_AI_PROVIDER_NAME, sc.GEN_AI_REQUEST_MODEL,
                   sc.GEN_AI_RESPONSE_MODEL, sc.SERVER_ADDRESS, sc.SERVER_PORT, sc.ERROR_TYPE)
LLM_OPERATIONS = frozenset(("chat", "text_completion", "generate_content", "embeddings"))
TRACEFIX_SCOPE = "tracefix"


def wanted(metrics: bool | None) -> bool:
    """The switch: init's argument, else TRACEFIX_METRICS (default off)."""
    return runtime.env_flag(METRICS_ENV, False) if metrics is None else bool(metrics)


def metric_exporter(endpoint: str | None, protocol: str | None, headers: dict | None) -> Any:
    """An OTLP metric exporter to where the spans go (`configure.otlp_exporter`'s arguments);
    unset ones fall back to the OTEL_EXPORTER_OTLP_* variables, as the exporter reads them.
    Delta temporality: each point counts the calls since the one before, so a reader adds
    points up (cumulative points would repeat every count at each export)."""
    from opentelemetry.sdk.metrics import Histogram
    from opentelemetry.sdk.metrics.export import AggregationTemporality

    delta: dict[str, Any] = {"preferred_temporality": {Histogram: AggregationTemporality.DELTA}}
    protocol = (protocol or os.environ.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")
                or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf")
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcExporter

        kwargs: dict[str, Any] = {"headers": headers, **delta}
        if endpoint:
            kwargs.update(endpoint=endpoint, insecure=endpoint.startswith("http://") or "://" not in endpoint)
        return GrpcExporter(**kwargs)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpExporter

    if endpoint:  # a base URL, or the traces' own URL: the metrics' path beside it
        base = endpoint.rstrip("/")
        base = base[:-len("/v1/traces")] if base.endswith("/v1/traces") else base
        endpoint = base + "/v1/metrics"
    return HttpExporter(endpoint=endpoint, headers=headers, **delta)


class GenAIMetricsProcessor(SpanProcessor):
    """A span processor recording the two GenAI client metrics when a tracefix LLM span
    ends; its force_flush and shutdown are its meter provider's (the handle calls them with
    the span processors')."""

    def __init__(self, exporter: Any, resource: Any = None, export_interval_s: float = 60.0):
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

        from .version import __version__

        reader = PeriodicExportingMetricReader(exporter, export_interval_millis=export_interval_s * 1000)
        views = [View(instrument_name=DURATION, aggregation=ExplicitBucketHistogramAggregation(DURATION_BOUNDS)),
                 View(instrument_name=TOKEN_USAGE, aggregation=ExplicitBucketHistogramAggregation(TOKEN_BOUNDS))]
        self._shut = False
        extra = {"resource": resource} if resource is not None else {}
        self.meter_provider = MeterProvider(metric_readers=[reader], views=views, shutdown_on_exit=False, **extra)
        meter = self.meter_provider.get_meter("tracefix", __version__)
        self.duration = meter.create_histogram(DURATION, unit="s", description="GenAI operation duration")
        self.tokens = meter.create_histogram(TOKEN_USAGE, unit="{token}", description="Number of input and output "
                                                                                      "tokens used")

    def on_end(self, span: Any) -> None:
        scope = getattr(span, "instrumentation_scope", None)
        attrs = span.attributes or {}
        if (getattr(scope, "name", None) != TRACEFIX_SCOPE or attrs.get(sc.GEN_AI_OPERATION_NAME) not in LLM_OPERATIONS
                or attrs.get(sc.REPLAY_SOURCE) in ("cassette", "intervention")):
            return
        try:
            point = {k: attrs[k] for k in CALL_ATTRIBUTES if attrs.get(k) is not None}
            if span.start_time is not None and span.end_time is not None:
                self.duration.record((span.end_time - span.start_time) / 1e9, point)
            for kind, key in (("input", sc.GEN_AI_USAGE_INPUT_TOKENS), ("output", sc.GEN_AI_USAGE_OUTPUT_TOKENS)):
                if isinstance(attrs.get(key), int):
                    self.tokens.record(attrs[key], {**point, TOKEN_TYPE: kind})
        except Exception:  # metrics never break the app's call (it has returned already)
            from .attributes import warn_once

            warn_once("genai-metrics", "tracefix: could not record the GenAI metrics of a call", exc_info=True)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.meter_provider.force_flush(timeout_millis)

    def shutdown(self) -> None:
        if not self._shut:  # the handle and the tracer provider both shut it down
            self._shut = True
            self.meter_provider.shutdown()
