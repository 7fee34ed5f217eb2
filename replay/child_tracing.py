"""`tracefix.init()` in a replay child that hands its spans to the runner (replay.span_handoff),
without a thread.

A forked child lives about 100 ms. What `tracefix.init()` sets up for a long-lived app costs
it threads it starts, wakes and joins on a machine whose cores its siblings are using: the
OpenTelemetry SDK's resource detection runs its detectors on a thread pool, the batch span
processor's worker exports from its own thread, and its shutdown joins it. Here instead:

- the resource (detectors, environment) is made once, by the zygote before it forks
  (`prepare`: its pool's threads are joined before the zygote says it is ready), and a child
  only sets what differs per process: the service instance id the SDK itself renews after a
  fork, and the service name of the session it replays;
- a span processor writes the ended spans to the child's file on the thread that ends them,
  a request body (the OTLP/HTTP one the exporter would have sent) per 512 spans or per second,
  and the rest at flush: redaction and signing stay in front of it (tracefix.init() wraps
  the processor it is given in them).

The provider is the global one, as `tracefix.init()` makes the provider it creates, so what
the agent traces through the OpenTelemetry API lands in the same file; an app that set up its
own provider before keeps it, and the file processor joins it.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from pathlib import Path
from typing import Any

from tracefix.replay import span_handoff

MAX_SPANS = 512  # the batch span processor's batch size
MAX_AGE_S = 1.0  # a child killed at its timeout loses at most this much of its last spans


@functools.cache
def base_resource() -> Any:
    """The resource a provider created in this environment gets (`Resource.create({})`),
    made once: in the zygote, before it forks (a child's environment differs from the
    zygote's only by TRACEFIX_REPLAY, which no detector reads)."""
    from opentelemetry.sdk.resources import Resource

    return Resource.create({})


def prepare() -> None:
    """What the zygote makes before it forks, so its children need no thread for it."""
    base_resource()


def child_resource(service: str | None) -> Any:
    """`Resource.create({"service.name": name})` as tracefix.init() would make it in this
    process (the name: `service`, else OTEL_SERVICE_NAME, else TRACEFIX_SERVICE_NAME)."""
    from opentelemetry.sdk.resources import Resource

    resource = base_resource()
    try:  # renewed per process, as the SDK does for a provider that lives through a fork
        from opentelemetry.sdk.resources import ServiceInstanceIdResourceDetector
    except ImportError:  # an SDK without it sets no instance id
        pass
    else:
        resource = resource.merge(ServiceInstanceIdResourceDetector().detect())
    name = service or os.environ.get("OTEL_SERVICE_NAME") or os.environ.get("TRACEFIX_SERVICE_NAME")
    return resource.merge(Resource({"service.name": name})) if name else resource


def file_processor(path: str | Path) -> Any:
    """A span processor appending the spans that end to `path` (span_handoff's records) on the
    thread that ends them: kept until `MAX_SPANS` have ended or the oldest kept is `MAX_AGE_S`
    old, then written as one request body; the rest at force_flush or shutdown."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import SpanProcessor

    class SpanFileProcessor(SpanProcessor):
        def __init__(self) -> None:
            self.fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self.kept: list = []
            self.oldest = 0.0
            self.lock = threading.Lock()  # the agent's threads may end spans at once

        def on_end(self, span: Any) -> None:
            with self.lock:
                if not self.kept:
                    self.oldest = time.monotonic()
                self.kept.append(span)
                if len(self.kept) >= MAX_SPANS or time.monotonic() - self.oldest >= MAX_AGE_S:
                    self._write()

        def _write(self) -> None:
            spans, self.kept = self.kept, []
            if spans and self.fd is not None:
                span_handoff.append(self.fd, encode_spans(spans).SerializeToString())

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            with self.lock:
                self._write()
            return True

        def shutdown(self) -> None:
            with self.lock:
                self._write()
                if self.fd is not None:
                    os.close(self.fd)
                    self.fd = None

    return SpanFileProcessor()


def init(spans_file: str | Path, service: str | None, **init_kwargs: Any) -> Any:
    """tracefix.init(**init_kwargs) for a replay child whose spans go to `spans_file`."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    import tracefix

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # nobody set one up: ours is the global one
        provider = TracerProvider(resource=child_resource(service), shutdown_on_exit=False)
        trace.set_tracer_provider(provider)
    return tracefix.init(tracer_provider=provider, span_processor=file_processor(spans_file), **init_kwargs)
