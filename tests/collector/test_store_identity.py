"""/healthz answers without a token, so it names the store without disclosing its path;
a client that can reach the same file still finds the collector that owns it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import procs
import pytest
from collector_support import TOKEN, http, strict_json


def _health(base: str) -> tuple[bytes, dict]:
    with urllib.request.urlopen(base + "/healthz", timeout=10) as resp:
        body = resp.read()
    return body, strict_json(body)


def test_healthz_names_the_store_by_identity_not_path(collector, tmp_path):
    from tracefix.collector.access import HttpAccess, serves_file, store_identity

    body, health = _health(collector.match["http"])
    db = str(collector.db)
    assert "db" not in health
    for disclosed in (db, os.path.dirname(db), os.path.basename(db)):
        assert disclosed.encode() not in body
    assert health["store_id"] == store_identity(db)
    assert serves_file(health, db)
    assert serves_file(health, os.path.relpath(db))  # the same file by another name
    other = tmp_path / "other.duckdb"
    other.write_bytes(b"")
    assert not serves_file(health, other) and not serves_file(health, tmp_path / "missing.duckdb")

    # the path itself is told to token holders only (the analysis keeps its models beside it)
    assert http("GET", collector.match["http"] + "/api/v1/store", token=None)[0] == 401
    assert HttpAccess(collector.match["http"], TOKEN).store_path() == db
    assert HttpAccess(collector.match["http"], "wrong").store_path() is None


def test_analysis_through_the_server_shares_the_collectors_models_folder(collector, monkeypatch):
    pipeline = pytest.importorskip("tracefix.analysis.pipeline")
    from tracefix.collector.access import HttpAccess

    monkeypatch.delenv("TRACEFIX_MODEL_DIR", raising=False)
    models = pipeline.model_dir_for(HttpAccess(collector.match["http"], TOKEN))
    assert models == Path(collector.db).resolve().parent / "models"


CONNECT = """
import json, sys
from tracefix.collector.access import connect
with connect(db=sys.argv[1]) as access:
    print(json.dumps({"kind": access.kind, "server": getattr(access, "server", None)}))
"""


def test_connect_finds_the_collector_owning_the_file_on_the_default_port(tmp_path):
    from tracefix.collector.access import DEFAULT_SERVER

    db = tmp_path / "owned.duckdb"
    port = DEFAULT_SERVER.rsplit(":", 1)[1]
    try:
        serve = procs.start(["serve", "--http-port", port, "--grpc-port", "0", "--db", str(db), "--diagnose", "off"],
                            procs.SERVE_READY, health="{http}/healthz", timeout=30)
    except RuntimeError as exc:
        pytest.skip(f"the default port {port} is taken here: {str(exc)[-200:]}")
    try:
        env = {**os.environ, "TRACEFIX_SERVER": "", "TRACEFIX_TOKEN": "", "TRACEFIX_DB": ""}

        def connect(path) -> dict:
            out = subprocess.run([sys.executable, "-c", CONNECT, str(path)], capture_output=True, text=True,
                                 timeout=60, env=env, cwd=tmp_path)
            assert out.returncode == 0, out.stderr
            return json.loads(out.stdout)

        assert connect(db) == {"kind": "http", "server": DEFAULT_SERVER}
        assert connect("owned.duckdb") == {"kind": "http", "server": DEFAULT_SERVER}  # relative name, same file
        assert connect(tmp_path / "another.duckdb")["kind"] == "file"
    finally:
        serve.stop()
