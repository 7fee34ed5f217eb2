"""The exporter scans a batch's text for secret hints once, not span by span (each Hyperscan
scan lets go of the GIL, and a busy app thread can hold it back a switch interval), and
redacts exactly as span by span."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracefix import redaction
from tracefix.redaction import RedactingSpanExporter, RedactionChain

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0" * 2
texts = st.one_of(st.text(max_size=12), st.just(f"key {SECRET} end"), st.just("api_key"), st.just("Bearer x"))
attributes = st.dictionaries(st.one_of(st.text(min_size=1, max_size=8), st.just("api_key"), st.just("password")),
                             st.one_of(texts, st.integers(), st.lists(texts, max_size=2)), max_size=4)


def ended(provider: TracerProvider, name: str, attrs: dict):
    span = provider.get_tracer("t").start_span(name, attributes=attrs)
    span.end()
    return span


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(texts, attributes), min_size=1, max_size=5))
def test_a_batch_is_redacted_as_span_by_span(batch):
    provider = TracerProvider()
    spans = [ended(provider, name or "s", attrs) for name, attrs in batch]
    chain = RedactionChain()
    together, one_by_one = chain.spans(spans), [chain.span(s) for s in spans]
    assert [(s.name, dict(s.attributes or {})) for s in together] == \
           [(s.name, dict(s.attributes or {})) for s in one_by_one]


def test_a_batch_with_no_hint_is_scanned_once(monkeypatch):
    scans: list[int] = []
    real = redaction.may_hold_secret

    def counted(text: str) -> bool:
        scans.append(len(text))
        return real(text)

    monkeypatch.setattr(redaction, "may_hold_secret", counted)
    provider = TracerProvider()
    spans = [ended(provider, f"chat m{i}", {"gen_ai.input.messages": f"look up customer {i}", "n": i})
             for i in range(512)]
    memory = InMemorySpanExporter()
    assert RedactingSpanExporter(memory, RedactionChain()).export(spans) is SpanExportResult.SUCCESS
    assert len(scans) == 1 and len(memory.get_finished_spans()) == 512
    # one span with a secret: the batch goes span by span, that one span redacted, the others as they were
    scans.clear()
    memory.clear()
    spans[7] = ended(provider, "chat m7", {"gen_ai.input.messages": f"my key is {SECRET}"})
    RedactingSpanExporter(memory, RedactionChain()).export(spans)
    out = memory.get_finished_spans()
    assert SECRET not in out[7].attributes["gen_ai.input.messages"]
    assert [s for i, s in enumerate(out) if i != 7] == [s for i, s in enumerate(spans) if i != 7]
