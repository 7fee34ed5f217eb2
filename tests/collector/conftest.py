"""Collector test fixtures: a real `tracefix serve` subprocess, a real webhook receiver and
real OpenTelemetry SDK exporters pointed at it."""
from __future__ import annotations

import pytest

import procs
from collector_support import TOKEN, WebhookReceiver


@pytest.fixture(scope="session")
def webhook():
    w = WebhookReceiver()
    yield w
    w.close()


@pytest.fixture(scope="session")
def collector(tmp_path_factory, webhook):
    """One collector for most tests: token required, alerts to `webhook`, diagnosis = analysis only."""
    db = tmp_path_factory.mktemp("collector") / "tracefix.duckdb"
    p = procs.start_serve(db, "--token", TOKEN, "--webhook", webhook.url, "--diagnose", "analysis",
                          "--diagnosis-workers", "2",
                          env={"TRACEFIX_TOKEN": ""})
    p.db = db
    yield p
    p.stop()


@pytest.fixture(scope="session")
def api(collector):
    from tracefix.collector.access import HttpAccess

    return HttpAccess(collector.match["http"], TOKEN)
