"""The dashboard page asks for its eight charts at once (`Dashboard.charts`), and the charts
that aggregate the same rows share one query: each must still be exactly what the API's
one-chart answer (`Dashboard.chart`) gives, for every grouping, on a file store fed real
OTLP spans from several services, hours, agents, models and tools, with a thumbs-down."""
from __future__ import annotations

import random
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracefix.collector.charts import CHARTS, GROUPINGS
from tracefix.collector.normalize import normalize_request
from tracefix.collector.store import Store

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
from agent_spans import request, session_spans  # noqa: E402

DAY_NS = int(datetime(2026, 1, 5, tzinfo=timezone.utc).timestamp()) * 10**9
HOUR_NS = 3600 * 10**9


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = Store(str(tmp_path_factory.mktemp("dashboard") / "store.duckdb"))
    rng = random.Random(11)
    for n in range(14):
        spans = session_spans(f"dq-{n}", rng.randint(1, 6), rng, growing=False, window=2,
                              t0=DAY_NS + rng.randrange(24) * HOUR_NS + 60 * 10**9)
        body = request(spans, service=f"svc-{n % 3}").SerializeToString()
        s.ingest(normalize_request(ExportTraceServiceRequest.FromString(body)))
    s.add_feedback("dq-3", -1.0)
    yield s
    s.close()


@pytest.mark.parametrize("by", GROUPINGS)
def test_the_pages_charts_at_once_are_each_charts_own_answer(store, by):
    window = {"by": by, "since_ns": DAY_NS, "until_ns": DAY_NS + 24 * HOUR_NS - 1, "buckets": 24}
    together = store.charts(list(CHARTS), **window)
    alone = {name: store.chart(name, **window) for name in CHARTS}
    assert together == alone
    # not a comparison of empty charts: each kind of rows has points, and the thumbs-down shows
    assert all(together[name]["series"] for name in ("sessions", "tokens", "tool_error_rate"))
    assert any(point["value"] > 0 for s in together["thumbs_down_rate"]["series"] for point in s["points"])
