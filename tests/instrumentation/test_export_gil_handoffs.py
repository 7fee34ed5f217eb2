"""A batch tracefix exports lets go of the GIL about as often as the plain SDK's OTLP exporter
does with the same batch. Each let-go is a wait to take the GIL back, and behind an app thread
that lets go of it itself every call (the openai client reads os.urandom) that wait can last
seconds, so a scan per span made the export queue drop most spans (bench/export_starvation.py).
A batch holding one hint of a secret (a URL's "://") is halved until that span is found."""
from __future__ import annotations

import random
import sys

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracefix import redaction
from tracefix.redaction import RedactingSpanExporter, RedactionChain

SECRET = "sk-proj-" + "Zq9Xw8Vu7Ts6Rp5On4Ml" * 2
# C functions that let go of the GIL on this path: the hint scanners and the socket's calls
RELEASING = {"Database.scan", "AhoCorasick.find_matches_as_indexes", "socket.sendall", "socket.send",
             "socket.recv_into", "socket.recv", "socket.connect", "poll", "poll.poll", "select"}


def batch(hinted: dict[int, str], size: int = 512) -> list:
    provider = TracerProvider()
    out = []
    for i in range(size):
        text = hinted.get(i, f"customer CUST-{i:04d} has checking and savings accounts")
        span = provider.get_tracer("t").start_span(f"chat bank-{i % 3}", attributes={
            "gen_ai.input.messages": text, "gen_ai.usage.input_tokens": i, "gen_ai.tool.names": ("a", "b")})
        span.end()
        out.append(span)
    return out


def releasing_calls(export, spans) -> int:
    calls = [0]

    def profile(frame, event, arg):
        if event == "c_call" and (getattr(arg, "__qualname__", None) or getattr(arg, "__name__", "")) in RELEASING:
            calls[0] += 1
    sys.setprofile(profile)
    try:
        assert export(spans) is SpanExportResult.SUCCESS
    finally:
        sys.setprofile(None)
    return calls[0]


def test_one_url_in_a_batch_does_not_make_it_scan_span_by_span(otlp_receiver):
    spans = batch({300: "see https://bank.example/faq for the fees"})
    plain = OTLPSpanExporter(endpoint=otlp_receiver.endpoint + "/v1/traces")
    ours = RedactingSpanExporter(OTLPSpanExporter(endpoint=otlp_receiver.endpoint + "/v1/traces"), RedactionChain())
    releasing_calls(plain.export, spans[:1])  # both connect before they are counted
    releasing_calls(ours.export, spans[:1])
    floor, tracefix = releasing_calls(plain.export, spans), releasing_calls(ours.export, spans)
    # before: 1 + 512 scans; now 1 + 2 per halving + 8 span by span (<= 21), the sockets' calls alike
    assert tracefix <= floor + 24, (tracefix, floor)


def test_a_halved_batch_redacts_as_span_by_span(monkeypatch):
    scans = [0]
    real = redaction.may_hold_secret

    def counted(text: str) -> bool:
        scans[0] += 1
        return real(text)
    monkeypatch.setattr(redaction, "may_hold_secret", counted)
    pick = random.Random(7)
    for hinted_count in (1, 2, 3, 40):
        where = pick.sample(range(512), hinted_count)
        kinds = [f"my key is {SECRET} ok", "docs at https://bank.example/x", "Asia region", f"Bearer {SECRET}"]
        spans = batch({i: pick.choice(kinds) for i in where})
        chain = RedactionChain()
        scans[0] = 0
        memory = InMemorySpanExporter()
        RedactingSpanExporter(memory, chain).export(spans)
        together = memory.get_finished_spans()
        if hinted_count <= 3:  # each hinted span: ~2 scans a halving and its run of 8 span by span
            assert scans[0] <= 1 + hinted_count * 21, (hinted_count, scans[0])
        one_by_one = [chain.span(s) for s in spans]
        assert [(s.name, dict(s.attributes)) for s in together] == [(s.name, dict(s.attributes)) for s in one_by_one]
        assert all(SECRET not in s.attributes["gen_ai.input.messages"] for s in together)
        assert [s for i, s in enumerate(together) if i not in where] == [s for i, s in enumerate(spans) if i not in where]
