"""`tracefix store compact`: maintenance of the store beside running collectors."""
from __future__ import annotations

import json
import os
import time

import click

from tracefix.collector import DEFAULT_DB
from tracefix.collector.cli_options import db_option


@click.group()
def store() -> None:
    """Maintain the store (a DuckLake's small files and old snapshots)."""


@store.command()
@db_option(default=DEFAULT_DB)
@click.option("--store", "store_location", envvar="TRACEFIX_STORE", default=None, metavar="ducklake:postgres:CONNINFO",
              help="The DuckLake to compact (as given to `tracefix serve --store`); else the --db file.")
@click.option("--older-than", default=3600.0, show_default=True, type=click.FloatRange(0),
              help="Snapshots older than this many seconds are expired and their unused files deleted "
                   "(time travel reaches back this far).")
@click.option("--every", default=None, type=click.FloatRange(1), metavar="SECONDS",
              help="Run again every SECONDS until stopped (a maintenance process beside the collectors).")
def compact(db, store_location, older_than, every):
    """Merge the small Parquet files ingest leaves into larger ones, flush rows inlined in the
    catalog, expire old snapshots and delete unused files. Safe while collectors write: it
    takes the lake's write lock, so ingest pauses for its duration. On a DuckDB file (no
    collector running on it): CHECKPOINT."""
    from tracefix.collector.store import Store

    location = store_location or os.path.abspath(db)
    while True:
        s = Store(location)
        try:
            click.echo(json.dumps(s.compact(older_than_s=older_than)))
        finally:
            s.close()
        if every is None:
            return
        time.sleep(every)
