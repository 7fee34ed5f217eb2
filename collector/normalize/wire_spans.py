"""OTLP trace requests read straight from their protobuf bytes (the C reader in otlp_wire/),
for the common shape of request; `read_traces` answers None for any other, and the caller
decodes that body with protobuf as before.

Why: reading a request through upb's Python objects, attribute by attribute, cost the decode
worker ~9 us of its ~21 us a span (bench/normalize.py); the C reader builds the attribute and
event dicts in one pass (`bench/normalize.py --wire` compares both). `normalize_request` takes
either form and makes the same batch of both, byte for byte (tests/collector/test_wire_spans.py
checks it on every dialect, on fuzzed bodies, and that what the reader leaves to protobuf is
what it should). Built by `pip install` where a C compiler is found; elsewhere, or with
TRACEFIX_OTLP_C_READER=off, every body takes protobuf's path.
"""
from __future__ import annotations

import os

try:
    from tracefix.collector.normalize._otlp_wire import WireSpan, read_traces as _read_traces
except ImportError:  # installed without a C compiler
    WireSpan = None
    _read_traces = None

BUILT = _read_traces is not None
# TRACEFIX_OTLP_C_READER=off: protobuf reads every body (an operator's way around a reader
# bug without reinstalling; and the other side of an A/B of bench/ingest.py)
ENABLED = BUILT and os.environ.get("TRACEFIX_OTLP_C_READER", "on").strip().lower() != "off"


def read_traces(body: bytes, max_chars: int) -> list | None:
    """[(resource attributes, [(scope name, [WireSpan])])] of an ExportTraceServiceRequest's
    protobuf bytes, or None: not built, or a body in a shape the reader leaves to protobuf
    (its reasons: otlp_wire/traces.c). An attribute string over `max_chars` characters is such a
    shape: protobuf's path rejects the span, saying why."""
    if not ENABLED:
        return None
    return _read_traces(body, max_chars)
