"""Fixtures for the instrumentation tests: a real tracefix.init() whose spans land in the
SDK's in-memory exporter, shut down (SDK methods restored) after each test."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracefix

sys.path.insert(0, str(Path(__file__).parent))  # instr_support


@pytest.fixture
def spans():
    """init(span_processor=in-memory); yields the exporter; handle.shutdown() afterwards."""
    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))
    yield exporter
    handle.shutdown()



@pytest.fixture(scope="module")
def otlp_receiver():
    from otlp_receiver import OTLPReceiver

    receiver = OTLPReceiver().start()
    yield receiver
    receiver.stop()
