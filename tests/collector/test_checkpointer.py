"""`tracefix serve`'s background checkpoints (tracefix.collector.checkpointer): under the
default memory limit they wait for a WAL twice DuckDB's 16 MB (each one rewrites the last row
group of every table whole, so fewer cost less CPU per span: issue 39 §1), never for more than
half the writer's budget, and TRACEFIX_CHECKPOINT_THRESHOLD still sets them."""
from __future__ import annotations

import time

import pytest

from tracefix.collector.checkpointer import Checkpointer
from tracefix.collector.store import Store

MB = 1000 * 1000  # DuckDB's and size_bytes' MB


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "c.duckdb", checkpoint_threshold="1GB", memory_limit="256MB")  # as serve's default
    yield store
    store.close()


def _grow_wal(store: Store, to_bytes: int) -> None:
    """Committed rows until the WAL holds at least `to_bytes` (none checkpointed: DuckDB's own
    commit-time checkpoint waits for 1 GB here)."""
    store.con.execute("CREATE TABLE IF NOT EXISTS filler (text VARCHAR)")
    while store.wal_bytes() < to_bytes:
        store.con.execute("INSERT INTO filler SELECT repeat(md5(random()::VARCHAR), 64) FROM range(2000)")


def _checkpoints_after(checkpointer: Checkpointer, seconds: float) -> int:
    checkpointer.start()
    try:
        time.sleep(seconds)
    finally:
        checkpointer.stop()
    return checkpointer.checkpoints


def test_a_wal_past_duckdbs_16mb_waits_for_32mb_before_a_background_checkpoint(store, monkeypatch):
    monkeypatch.delenv("TRACEFIX_CHECKPOINT_THRESHOLD", raising=False)
    _grow_wal(store, 20 * MB)
    assert _checkpoints_after(Checkpointer(store, interval_s=0.02), 0.3) == 0  # was checkpointed at 16 MB
    assert store.wal_bytes() >= 20 * MB
    _grow_wal(store, 33 * MB)
    assert _checkpoints_after(Checkpointer(store, interval_s=0.02), 0.5) == 1
    assert store.wal_bytes() < MB


def test_the_threshold_set_is_kept_within_half_the_writers_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEFIX_CHECKPOINT_THRESHOLD", "8MB")
    small = Store(tmp_path / "s.duckdb", memory_limit="32MB")  # budget: a quarter, 8 MB
    try:
        assert Checkpointer(small).threshold == 4 * MB
    finally:
        small.close()
    roomy = Store(tmp_path / "r.duckdb", memory_limit="1GB")
    try:
        assert Checkpointer(roomy).threshold == 8 * MB  # what the operator set
        monkeypatch.delenv("TRACEFIX_CHECKPOINT_THRESHOLD")
        assert Checkpointer(roomy).threshold == 32 * MB  # not half its budget (128 MB)
    finally:
        roomy.close()
