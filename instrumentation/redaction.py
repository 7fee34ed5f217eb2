"""Secrets never leave the process: span attributes are redacted before export, and so
are span and event names and status descriptions (an exception's message ends up there).

The rules (which keys and which pieces of text are credentials) live in
`tracefix.secret_rules`, shared with the collector, which applies them again to spans from
other instrumentations. Users chain their own functions ``fn(key, value) -> value``
(``init(redact=...)``); they run after the built-ins on every attribute of spans and span events.

Redaction happens on the export side (an exporter wrapper behind the batch processor, or
a processor wrapper for processors handed to ``init``), off the application's hot path.
Last, with a replay key, a session's root span gets its signed replay record
(`tracefix.replay_signing`), computed over the attributes as they leave the process.
"""
from __future__ import annotations

import itertools
import threading
from typing import Any, Callable, Iterable, Sequence

from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Status

from .attributes import logger
from .secret_rules import REDACTED, is_secret_key, may_hold_secret, redact_text, redact_value

__all__ = ["REDACTED", "redact_text", "RedactionChain", "RedactingSpanExporter", "RedactingSpanProcessor",
           "wrap_processors"]

Redactor = Callable[[str, Any], Any]


class RedactionChain:
    """Built-in rules, then each user function in order; then `signer` (a
    `tracefix.replay_signing.Signer`) adds its attributes to what is left."""

    def __init__(self, user: Redactor | Sequence[Redactor] | None = None,
                 signer: Callable[[Any], dict | None] | None = None):
        self.signer = signer
        if user is None:
            self.user: list[Redactor] = []
        elif callable(user):
            self.user = [user]
        else:
            self.user = list(user)
        self._failed: set[int] = set()

    def value(self, key: str, value: Any) -> Any:
        value = redact_value(key, value)
        for fn in self.user:
            try:
                value = fn(key, value)
            except Exception:
                if id(fn) not in self._failed:
                    self._failed.add(id(fn))
                    logger.warning("tracefix: redaction function %r failed; value dropped", fn, exc_info=True)
                return REDACTED  # a failing redactor must not let the value through
        return value

    def attributes(self, attributes: Any) -> tuple[Any, bool]:
        """(the attributes redacted, whether anything changed); unchanged, `attributes` itself."""
        if not attributes:
            return None, False
        if not self.user and not _may_redact(attributes):  # most spans: nothing a rule could change
            return attributes, False
        out, changed = {}, False
        for key, value in attributes.items():
            new = self.value(key, value)
            changed = changed or new is not value and new != value
            out[key] = new
        return out, changed

    def spans(self, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
        """`[self.span(s) for s in spans]`, with the spans no rule could change found in a few
        scans of their joined text: a Hyperscan scan lets go of the GIL, and taking it back from
        a busy app thread can wait a switch interval or, behind an app thread that lets go of
        the GIL itself (the openai client reads os.urandom every call), far longer; a scan per
        span exported ~200 spans a second and the queue dropped the rest. A batch with a hint
        in it (one URL is one: "://") is halved until the hinted spans are found, so one such
        span costs ~2 log2(batch) scans, not one a span (bench/export_starvation.py)."""
        if self.user or self.signer is not None:
            return [self.span(s) for s in spans]
        texts = [None if span.events else _plain_texts(attribute_dict(span), span.name, span.status.description)
                 for span in spans]
        out = list(spans)
        scannable = [i for i, found in enumerate(texts) if found is not None]
        for i in sorted(set(range(len(spans))).difference(scannable).union(_hinted(texts, scannable))):
            out[i] = self.span(spans[i])
        return out

    def span(self, span: ReadableSpan) -> ReadableSpan:
        """`span`, or a redacted (and signed) copy when anything changed."""
        attributes = attribute_dict(span)
        if not self.user and self.signer is None and not span.events \
                and not _may_redact(attributes, span.name, span.status.description):
            return span  # most spans: no rule could change a thing, found in one scan of all their text
        attributes, changed = self.attributes(attributes)
        signed = self.signer(attributes if attributes is not None else {}) if self.signer is not None else None
        if signed:
            attributes, changed = {**(attributes or {}), **signed}, True
        events = []
        for event in span.events:
            event_attributes, event_changed = self.attributes(event.attributes)
            event_name = redact_text(event.name)
            if event_changed or event_name != event.name:
                changed = True
                event = Event(event_name, event_attributes if event_changed else event.attributes, event.timestamp)
            events.append(event)
        name = redact_text(span.name)
        status = span.status
        description = redact_text(status.description) if status.description else status.description
        if description != status.description:
            status = Status(status.status_code, description)
        if not changed and name == span.name and status is span.status:
            return span
        return ReadableSpan(name=name, context=span.context, parent=span.parent, resource=span.resource,
                            attributes=attributes, events=events, links=span.links, kind=span.kind,
                            status=status, start_time=span.start_time, end_time=span.end_time,
                            instrumentation_scope=span.instrumentation_scope)


def attribute_dict(span: ReadableSpan) -> Any:
    """A span's attributes, read as the dict the SDK keeps them in (its BoundedAttributes'
    `_dict`): iterating the read-only view `span.attributes` calls Python code per key, twice
    what the rest of a span's scan costs. Read only, never changed; the view where the SDK
    keeps them otherwise."""
    inner = getattr(getattr(span, "_attributes", None), "_dict", None)
    return inner if type(inner) is dict else span.attributes


# attribute names is_secret_key said no to: the same few dozen names come on every span
_PLAIN_KEYS: set[str] = set()


_SPAN_BY_SPAN = 8  # a hinted run of spans this short is redacted span by span (one scan each)


def _hinted(texts: Sequence[list[str] | None], indexes: list[int]) -> list[int]:
    """Of `indexes` (spans whose `texts` are known), those whose text may hold a secret, or
    sit in a run of at most _SPAN_BY_SPAN with such a span: the run's joined text (a
    character no hint holds between pieces) scanned once, halved while a hint is in it."""
    joined = "\x00".join(itertools.chain.from_iterable(texts[i] or () for i in indexes))
    if not indexes or not may_hold_secret(joined):
        return []
    if len(indexes) <= _SPAN_BY_SPAN:
        return indexes
    half = len(indexes) // 2
    return _hinted(texts, indexes[:half]) + _hinted(texts, indexes[half:])


def _may_redact(attributes: Any, *more: str | None) -> bool:
    """Whether a built-in rule could change any of `attributes` (or the texts `more`: a
    span's name, its status): a credential's key, or a rule's hint in any text, all of the
    texts scanned in one pass (joined by a character no hint holds); a shape other than text
    and numbers is left to the value-by-value path."""
    texts = _plain_texts(attributes, *more)
    return texts is None or may_hold_secret("\x00".join(texts))


def _plain_texts(attributes: Any, *more: str | None) -> list[str] | None:
    """The texts of `attributes` and `more` a hint could be in; None when a key is a
    credential's or a value has a shape other than text and numbers (`_may_redact`: yes)."""
    if not _PLAIN_KEYS.issuperset(attributes):
        for key in attributes:
            if is_secret_key(key):
                return None
            if len(_PLAIN_KEYS) < 4096:  # keys with ids in them must not grow it forever
                _PLAIN_KEYS.add(key)
    texts = [text for text in more if text]
    for value in attributes.values():
        kind = type(value)
        if kind is str:
            texts.append(value)
        elif kind is tuple or kind is list:
            for item in value:
                if type(item) is str:
                    texts.append(item)
                elif isinstance(item, (str, list, tuple, dict)):
                    return None
        elif isinstance(value, (str, dict)):
            return None
    return texts


class RedactingSpanExporter(SpanExporter):
    """Redacts, then exports; counts spans it could not deliver and says so."""

    def __init__(self, inner: SpanExporter, chain: RedactionChain):
        self.inner = inner
        self.chain = chain
        self.exported = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._warned = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            redacted = self.chain.spans(spans)
        except Exception:
            logger.warning("tracefix: redaction failed; %d spans dropped rather than exported unredacted",
                           len(spans), exc_info=True)
            self._count(0, len(spans))
            return SpanExportResult.FAILURE
        try:
            result = self.inner.export(redacted)
        except Exception:
            logger.warning("tracefix: span export raised", exc_info=True)
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self._count(len(spans), 0)
        else:
            self._count(0, len(spans))
        return result

    def _count(self, exported: int, dropped: int) -> None:
        with self._lock:
            self.exported += exported
            self.dropped += dropped
            warn = dropped and not self._warned
            if warn:
                self._warned = True
        if warn:
            logger.warning("tracefix: the collector did not accept %d spans (dropped; more drops are counted "
                           "in handle.stats() and reported at shutdown)", dropped)

    def shutdown(self) -> None:
        if self.dropped:
            logger.warning("tracefix: %d spans were dropped in total (exported %d)", self.dropped, self.exported)
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        flush = getattr(self.inner, "force_flush", None)
        return flush(timeout_millis) if flush else True


class RedactingSpanProcessor(SpanProcessor):
    """Hands a redacted copy of each ended span to a processor given to init()."""

    def __init__(self, inner: SpanProcessor, chain: RedactionChain):
        self.inner = inner
        self.chain = chain

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.inner.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        try:
            span = self.chain.span(span)
        except Exception:
            logger.warning("tracefix: redaction failed; span dropped", exc_info=True)
            return
        self.inner.on_end(span)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def wrap_processors(processors: Iterable[SpanProcessor], chain: RedactionChain) -> list[SpanProcessor]:
    return [RedactingSpanProcessor(p, chain) for p in processors]
