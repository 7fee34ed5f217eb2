"""An LLM call's span attributes handed to the SDK span as they are, where checking them again
could change nothing anyone sees.

The SDK cleans every attribute it is given (`BoundedAttributes`: a type check per value, a
tuple made of each list, under a lock): about half of what a span with an LLM call's twenty
attributes costs it, paid by every instrumentation. tracefix's are already clean (text,
int, float, bool and lists of text, never None: `spans.bounded`), so cleaning them again
gives the same values. They go into the span's attribute dict directly when

- the tracer's sampler is one of the SDK's own (they hand attributes through unread: the
  span starts without them, and they are added before start_span returns to tracefix),
- every span processor ignores a span at its start (the SDK's batch and simple processors,
  tracefix's own, a redacting wrapper around one of them): none could see the difference,
- no attribute value length limit is set (`OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT` would cut
  text) and the span's attribute count limit has room,
- every value is of those exact types.

Otherwise (an app's own sampler or processor on a provider handed to init, a limit, another
type) the SDK's public calls run, as before. The span's dict is SDK internals, read the same
way by the exporter's redaction (`redaction.attribute_dict`); where it moved, the public path.
"""
from __future__ import annotations

from typing import Any

_PLAIN = (str, int, float, bool)
# (tracer, its processors tuple, verdict): the SDK replaces the tuple when a processor is
# added, so a processor added later is seen; one tuple, swapped whole, for threads
_verdict: list[tuple[Any, Any, bool]] = [(None, None, False)]


def start_span(tracer: Any, name: str, kind: Any, attributes: dict[str, Any]) -> Any:
    """`tracer.start_span(name, kind=kind, attributes=attributes)`, the same span."""
    if not _trusted(tracer) or not _plain(attributes):
        return tracer.start_span(name, kind=kind, attributes=attributes)
    span = tracer.start_span(name, kind=kind)
    if span.is_recording() and not _put(span, attributes):
        span.set_attributes(attributes)
    return span


def set_attributes(span: Any, attributes: dict[str, Any]) -> None:
    """`span.set_attributes(attributes)` on a span tracefix started (no processor sees
    attributes set after the start, so only the limits and the types matter)."""
    if not _plain(attributes) or not _put(span, attributes):
        span.set_attributes(attributes)


def _plain(attributes: dict[str, Any]) -> bool:
    for value in attributes.values():
        kind = type(value)
        if kind not in _PLAIN and not (kind is list and all(type(item) is str for item in value)):
            return False
    return True


def _put(span: Any, attributes: dict[str, Any]) -> bool:
    """Adds `attributes` to the span's dict as the SDK would store them; False (nothing
    done) where the SDK's own path is needed."""
    try:
        bounded, lock = span._attributes, span._lock
        stored = bounded._dict
        if type(stored) is not dict or bounded.max_value_len is not None or bounded._immutable:
            return False
        if bounded.maxlen is not None and len(stored) + len(attributes) > bounded.maxlen:
            return False
    except AttributeError:
        return False
    with lock:
        if span._end_time is not None:
            return False  # ended: the SDK's path warns and drops, as for anyone
        for key, value in attributes.items():
            if key in stored:
                del stored[key]  # the SDK moves a key set again to the end
            stored[key] = tuple(value) if type(value) is list else value
    return True


def _trusted(tracer: Any) -> bool:
    try:
        processors = tracer.span_processor._span_processors
        sampler = tracer.sampler
    except AttributeError:
        return False
    known = _verdict[0]
    if known[0] is tracer and known[1] is processors:
        return known[2]
    verdict = _reads_nothing(sampler) and all(_ignores_start(p) for p in processors)
    _verdict[0] = (tracer, processors, verdict)
    return verdict


def _reads_nothing(sampler: Any) -> bool:
    from opentelemetry.sdk.trace import sampling

    if type(sampler) in (sampling.StaticSampler, sampling.TraceIdRatioBased, type(sampling.ALWAYS_ON),
                         type(sampling.ALWAYS_OFF)):
        return True
    if type(sampler) in (sampling.ParentBased, sampling.ParentBasedTraceIdRatio, type(sampling.DEFAULT_ON),
                         type(sampling.DEFAULT_OFF)):
        delegates = ("_root", "_remote_parent_sampled", "_remote_parent_not_sampled", "_local_parent_sampled",
                     "_local_parent_not_sampled")
        return all(_reads_nothing(getattr(sampler, name, None)) for name in delegates)
    return False


def _ignores_start(processor: Any) -> bool:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    from .configure import _batch_processor_class
    from .redaction import RedactingSpanProcessor
    from .session_processor import SessionAttributesProcessor

    if type(processor) is RedactingSpanProcessor:
        return _ignores_start(processor.inner)
    return type(processor) in (BatchSpanProcessor, SimpleSpanProcessor, _batch_processor_class(),
                               SessionAttributesProcessor)
