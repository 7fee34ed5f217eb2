"""Where the store is: `--store ducklake:postgres:...` is checked before anything starts, and
its password never reaches a log line."""
from __future__ import annotations

import subprocess

import procs
import pytest

from tracefix.collector.store.lake import catalog_conninfo, is_lake, redacted


def test_a_lake_location_names_its_postgresql_catalog():
    assert is_lake("ducklake:postgres:dbname=t host=db") and not is_lake("/data/tracefix.duckdb")
    assert catalog_conninfo("ducklake:postgres:dbname=t host=db") == "dbname=t host=db"
    assert catalog_conninfo("ducklake:postgres:postgresql://u@db/t") == "postgresql://u@db/t"
    with pytest.raises(ValueError, match="catalog is PostgreSQL"):
        catalog_conninfo("ducklake:sqlite:lake.db")


@pytest.mark.parametrize("location, secret", [
    ("ducklake:postgres:dbname=t password=hunter2 host=db", "hunter2"),
    ("ducklake:postgres:dbname=t password='two words' host=db", "two words"),
    ("ducklake:postgres:postgresql://tracefix:hunter2@db:5432/t", "hunter2"),
])
def test_the_password_is_never_shown(location, secret):
    shown = redacted(location)
    assert secret not in shown and "***" in shown and "db" in shown


@pytest.mark.parametrize("args, message", [
    (["--store", "postgres://db/t"], "ducklake:postgres:CONNINFO"),
    (["--store", "ducklake:sqlite:x.db"], "catalog is PostgreSQL"),
    (["--data-path", "/tmp/x"], "--data-path goes with --store"),
])
def test_serve_refuses_a_wrong_store_before_starting(args, message):
    done = subprocess.run([*procs.TRACEFIX, "serve", "--http-port", "0", "--grpc-port", "0", *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and message in done.stderr, done.stderr
