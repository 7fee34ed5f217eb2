"""A collector whose store cannot write says so: /healthz answers 503 "unhealthy" with the
reason (and the store's identity, as when healthy); the CLI's collector discovery and the
launcher recognise it as the store's collector and print why, instead of opening the file
themselves; once the disk has room again the store is opened again, its WAL replayed, and
nothing acknowledged is lost (issue 35 §1).

The disk is made full the way the OS does it for one process: RLIMIT_FSIZE on the running
`tracefix serve` lets its files grow by 7 MB. The next export (6 MB of long messages) fits
in the WAL and is acknowledged; the checkpoint that follows cannot write it into the file
(~8.5 MB), DuckDB gives up on the database, and opening it again fails the same way."""
from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
import uuid

import pytest
from long_prompts import LongPrompts, export, export_retrying, get, stored_steps

from tracefix.collector.access import AccessError, connect, store_identity
from tracefix.collector.launcher import SERVE_READY, ProcessDidNotStart, TracefixProcess

ROOM_MB = 7  # the WAL takes the 6 MB export, the file cannot take its checkpoint


def _wait_for_health(http: str, status: int, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        code, body = get(http + "/healthz")
        if code == status or time.monotonic() > deadline:
            assert code == status, (code, body[:500])
            return json.loads(body)
        time.sleep(0.1)


def _file_size_limit(pid: int, limit: int) -> None:
    hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)[1]
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, hard))


def test_a_store_that_cannot_write_is_unhealthy_says_why_and_comes_back_with_every_span(tmp_path):
    db = tmp_path / "full.duckdb"
    serve = TracefixProcess("tracefix serve", ["serve", "--db", str(db), "--http-port", "0", "--grpc-port", "0",
                                               "--diagnose", "off"], SERVE_READY,
                            env={"TRACEFIX_DB_MEMORY_LIMIT": "64MB", "TRACEFIX_CHECKPOINT_THRESHOLD": "4MB",
                                 "TRACEFIX_TOKEN": "", "TRACEFIX_SERVER": ""})
    try:
        http = serve.address(60)
        session = LongPrompts(f"full-{uuid.uuid4().hex[:8]}", message_kb=200)
        _file_size_limit(serve.popen.pid, db.stat().st_size + (ROOM_MB << 20))
        status, body = export(http, session.request(30))
        assert status == 200, body[:300]  # in the WAL: acknowledged

        health = _wait_for_health(http, 503)
        assert health["status"] == "unhealthy" and health["store_id"] == store_identity(db)
        assert "File too large" in health["reason"], health  # the OS's EFBIG, as DuckDB reports it
        assert str(tmp_path) not in json.dumps(health)  # /healthz is public: the store by identity only

        with pytest.raises(AccessError) as refused:
            connect(server=http, db=db)
        assert refused.value.status == 503 and health["reason"] in str(refused.value)
        done = subprocess.run([sys.executable, "-m", "tracefix.cli", "sessions", "--server", http, "--db", str(db)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode != 0 and "unhealthy" in done.stderr and "File too large" in done.stderr, done.stderr
        assert "using the file" not in done.stderr  # it did not go around the collector to the file
        started = time.monotonic()
        with pytest.raises(ProcessDidNotStart, match="unhealthy.*File too large"):
            serve.address(timeout=30)  # the launcher's wait ends with the reason, not at its timeout
        assert time.monotonic() - started < 10

        _file_size_limit(serve.popen.pid, resource.RLIM_INFINITY)  # room again
        assert export_retrying(http, session.request(30))  # the store is opened again, its WAL replayed
        assert _wait_for_health(http, 200)["status"] == "ok"
        assert sorted(stored_steps(http, session.session_id)) == list(range(60))
    finally:
        serve.stop()
    assert serve.popen.returncode == 0, serve.tail(40)
