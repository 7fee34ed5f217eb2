"""The tracing pipeline `tracefix.init()` starts: tracer provider, batch export over OTLP,
redaction, replay mode.

The SDK patches are not made here: :func:`start_tracing` instruments the instrumentor it is
given (tracefix.start.init gives it tracefix.instrumentor's), and the instrumentor, run by
`opentelemetry-instrument` with no SDK configured, calls :func:`start_tracing` without one.
So the import runs one way: start -> instrumentor -> configure.

Everything heavy (the SDK, the OTLP exporters) is imported here, when tracing starts, not
when `tracefix` is imported.
"""
from __future__ import annotations

import atexit
import functools
import os
import threading
from typing import Any, Callable, Sequence

from . import runtime
from .attributes import logger

_lock = threading.RLock()
_handle: "TracefixHandle | None" = None
_created_global: Any = None  # the global provider init() created, if any


@functools.cache
def _batch_processor_class() -> type:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    class CountingBatchSpanProcessor(BatchSpanProcessor):
        """The SDK's batch processor, counting the spans it drops on a full queue (the
        collector is slow or down): the app never waits for the exporter."""

        queue_dropped = 0

        def on_end(self, span: Any) -> None:
            try:
                inner = self._batch_processor
                if len(inner._queue) >= inner._max_queue_size:
                    self.queue_dropped += 1
            except AttributeError:  # SDK internals moved: no count, export unaffected
                pass
            super().on_end(span)

    return CountingBatchSpanProcessor


class TracefixHandle:
    """What init() returns: flush and shut down what init() set up."""

    def __init__(self, provider: Any, processors: list, exporters: list, owns_provider: bool, instrumentor: Any):
        self.provider = provider
        self.processors = processors
        self.exporters = exporters
        self.owns_provider = owns_provider
        self.instrumentor = instrumentor
        self.closed = False

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Push every finished span out now (bounded by `timeout_millis`)."""
        ok = True
        for processor in self.processors:
            ok = processor.force_flush(timeout_millis) and ok
        return ok

    def stats(self) -> dict:
        """Spans delivered, and dropped: refused by the collector (or unreachable) and
        dropped on a full export queue (`queue_dropped`, included in `dropped`)."""
        queue_dropped = sum(getattr(p, "queue_dropped", 0) for p in self.processors)
        return {"exported": sum(getattr(e, "exported", 0) for e in self.exporters),
                "dropped": sum(getattr(e, "dropped", 0) for e in self.exporters) + queue_dropped,
                "queue_dropped": queue_dropped}

    def shutdown(self, timeout_millis: int | None = None, *, on_this_thread: bool = False) -> None:
        """Restore the patched SDK methods, flush and stop exporting; init() may be called again.

        Bounded: after `timeout_millis` (default TRACEFIX_EXIT_TIMEOUT seconds, 5) the
        caller moves on and unsent spans are dropped, so a down collector cannot hang exit.
        `on_this_thread`: flushed by the caller, without the thread that bounds it, for
        processors that cannot block (a forked replay child's file writer, replay.child_tracing:
        a thread started, woken and joined costs it 1-5 ms on a busy machine).
        """
        global _handle
        with _lock:
            if self.closed:
                return
            self.closed = True
            if _handle is self:
                _handle = None
        try:
            if self.instrumentor is not None and self.instrumentor.is_instrumented_by_opentelemetry:
                self.instrumentor.uninstrument()
        except Exception:
            logger.warning("tracefix: could not restore the SDK methods", exc_info=True)
        runtime.set_tracer(None)
        runtime.replay = None  # its report is written at session end (or by its own exit hook)
        if timeout_millis is None:
            timeout_millis = int(float(os.environ.get("TRACEFIX_EXIT_TIMEOUT", "5")) * 1000)
        if on_this_thread:
            self._stop_processors(timeout_millis)
            return
        worker = threading.Thread(target=self._stop_processors, args=(timeout_millis,),
                                  name="tracefix-shutdown", daemon=True)
        worker.start()
        worker.join(timeout_millis / 1000 + 0.5)
        if worker.is_alive():
            logger.warning("tracefix: span export did not finish within %.1fs; unsent spans are dropped",
                           timeout_millis / 1000)

    def _stop_processors(self, timeout_millis: int) -> None:
        self.force_flush(timeout_millis)
        queue_dropped = sum(getattr(p, "queue_dropped", 0) for p in self.processors)
        if queue_dropped:
            logger.warning("tracefix: %d spans were dropped because the export queue was full", queue_dropped)
        for processor in self.processors:
            try:
                processor.shutdown()
            except Exception:
                logger.warning("tracefix: span processor shutdown failed", exc_info=True)

    def _at_exit(self) -> None:
        self.shutdown()


def _parse_headers(headers: dict | str | None) -> dict | None:
    """A header dict, or "k=v,k2=v2" text parsed as OTEL_EXPORTER_OTLP_HEADERS is (values
    percent-decoded: `Authorization=Bearer%20x`)."""
    if headers is None or isinstance(headers, dict):
        return headers
    from opentelemetry.util.re import parse_env_headers

    return parse_env_headers(headers, liberal=True)


def otlp_exporter(endpoint: str | None, protocol: str | None, headers: dict | str | None) -> Any:
    """The OTLP span exporter for `protocol` ("http/protobuf" or "grpc"). Unset arguments
    fall back to the standard OTEL_EXPORTER_OTLP_* variables (read by the exporter)."""
    protocol = (protocol or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf")
    parsed_headers = _parse_headers(headers)
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        kwargs: dict[str, Any] = {"headers": parsed_headers}
        if endpoint:
            kwargs["endpoint"] = endpoint
            kwargs["insecure"] = endpoint.startswith("http://") or "://" not in endpoint
        return GrpcExporter(**kwargs)
    if protocol not in ("http/protobuf", "http"):
        raise ValueError(f"tracefix.init: protocol must be 'http/protobuf' or 'grpc', got {protocol!r}")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    if endpoint and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"  # a base URL, as for OTEL_EXPORTER_OTLP_ENDPOINT
    return HttpExporter(endpoint=endpoint, headers=parsed_headers)


def _resolve_provider(tracer_provider: Any, service_name: str | None, private: bool) -> tuple[Any, bool]:
    """(provider, created_by_us). Uses the given provider, else the app's SDK provider, else
    a new one (made global when nothing else is)."""
    global _created_global
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    if tracer_provider is not None:
        return tracer_provider, False
    current = trace.get_tracer_provider()
    if not private and isinstance(current, TracerProvider) and current is not _created_global:
        return current, False
    name = service_name or os.environ.get("OTEL_SERVICE_NAME") or os.environ.get("TRACEFIX_SERVICE_NAME")
    resource = Resource.create({"service.name": name} if name else {})
    # our own bounded atexit flush replaces the SDK's unbounded one (a down collector would hold exit)
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    if not private and type(current).__name__ == "ProxyTracerProvider":
        trace.set_tracer_provider(provider)
        _created_global = provider
    return provider, True


def start_tracing(endpoint: str | None = None, protocol: str | None = None, headers: dict | str | None = None,
                  service_name: str | None = None, capture_content: bool | None = None, tracer_provider: Any = None,
                  redact: Callable | Sequence[Callable] | None = None, max_payload_bytes: int | None = None,
                  span_processor: Any = None, exporter: Any = None, instrumentor: Any = None,
                  replay_key: str | bytes | None = None) -> TracefixHandle:
    """Set up tracing (the arguments of `tracefix.init`) and instrument `instrumentor` (the
    SDK patches, an OpenTelemetry BaseInstrumentor) onto its provider; None: tracing only."""
    global _handle
    with _lock:
        if _handle is not None and not _handle.closed:
            given = {name for name, value in (("endpoint", endpoint), ("protocol", protocol), ("headers", headers),
                                              ("service_name", service_name), ("tracer_provider", tracer_provider),
                                              ("span_processor", span_processor), ("exporter", exporter))
                     if value is not None}
            if given:  # silently dropping a caller's exporter would lose their spans without a trace
                logger.warning("tracefix.init() is already active; %s ignored. Call shutdown() on the first "
                               "handle to reconfigure.", ", ".join(sorted(given)))
            return _handle
        from .version import __version__
        from .redaction import RedactingSpanExporter, RedactingSpanProcessor, RedactionChain
        from .replay_mode import install_from_env
        from .replay_signing import signer
        from .session_processor import SessionAttributesProcessor

        BatchSpanProcessor = _batch_processor_class()
        runtime.settings = runtime.Settings.from_env(capture_content, max_payload_bytes)
        chain = RedactionChain(redact, signer=signer(replay_key))  # replay_key None: TRACEFIX_REPLAY_KEY
        explicit_sink = span_processor is not None or exporter is not None
        provider, owns = _resolve_provider(tracer_provider, service_name, private=explicit_sink)
        processors: list = []
        exporters: list = []
        if span_processor is not None:
            processors.append(RedactingSpanProcessor(span_processor, chain))
        if exporter is not None:
            wrapped = RedactingSpanExporter(exporter, chain)
            exporters.append(wrapped)
            processors.append(BatchSpanProcessor(wrapped))
        if not explicit_sink and (owns or endpoint):
            wrapped = RedactingSpanExporter(otlp_exporter(endpoint, protocol, headers), chain)
            exporters.append(wrapped)
            processors.append(BatchSpanProcessor(wrapped))
        if not owns:
            redact_existing_processors(provider, chain)
        provider.add_span_processor(SessionAttributesProcessor())
        for processor in processors:
            provider.add_span_processor(processor)
        runtime.set_tracer(provider.get_tracer("tracefix", __version__))
        install_from_env()
        if instrumentor is not None and not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=provider, skip_dep_check=True)
        handle = TracefixHandle(provider, processors, exporters, owns, instrumentor)
        atexit.register(handle._at_exit)
        _handle = handle
        return handle


def redact_existing_processors(provider: Any, chain: Any) -> None:
    """Put redaction in front of the processors an app configured on its own provider, so
    secrets do not leave through its exporters either (SDK internals: guarded)."""
    from .redaction import RedactingSpanProcessor

    try:
        multi = provider._active_span_processor
        with multi._lock:
            multi._span_processors = tuple(
                p if isinstance(p, RedactingSpanProcessor) else RedactingSpanProcessor(p, chain)
                for p in multi._span_processors)
    except Exception:
        logger.warning("tracefix: could not add redaction to the app's own span processors; spans they export "
                       "are not redacted", exc_info=True)


def current_handle() -> TracefixHandle | None:
    return _handle
