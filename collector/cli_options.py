"""The options every CLI verb that reaches the store shares: `--server`, `--db`, `--token`,
each with one help text and one environment variable.

Light on purpose (click only, no duckdb): `tracefix worker` uses `server_option` and
`token_option` beside the agent's own code. Where the store file is when `--db` is not
given is `tracefix.collector.db_path`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, TypeVar

import click

from tracefix.collector import DEFAULT_DB, db_path

__all__ = ["PORT", "db_option", "db_path", "server_option", "store_options", "token_option"]

F = TypeVar("F", bound=Callable)

# a TCP port option's type: 70000 is a usage error naming the option, not an OverflowError at bind
PORT = click.IntRange(0, 65535)


def server_option(without: str = "the store file, through the collector running on it when there is one, "
                                   "or the one on the default port when there is no file here") -> Callable[[F], F]:
    """`--server URL` (TRACEFIX_SERVER): the `tracefix serve` to talk to; `without` says what is
    used when it is not given."""
    return click.option("--server", envvar="TRACEFIX_SERVER", default=None, metavar="URL",
                        help=f"URL of a running `tracefix serve`, which must answer (without it: {without}).")


def _db_in_a_folder(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refuse a --db whose nearest existing ancestor is a file (`/etc/hostname/x.duckdb`) before
    anything is created, instead of failing deep inside with "File exists: '/etc/hostname'"."""
    if value is None or value == ":memory:":
        return value
    parent = Path(value).absolute().parent
    for folder in (parent, *parent.parents):
        if folder.exists():
            if not folder.is_dir():
                raise click.BadParameter(f"{value}: {folder} is a file, not a folder; give a path inside a folder")
            break
    return value


def db_option(default: str | None = None) -> Callable[[F], F]:
    """`--db PATH` (TRACEFIX_DB): the DuckDB file of the store."""
    return click.option("--db", envvar="TRACEFIX_DB", default=default, show_default=default is not None,
                        type=click.Path(dir_okay=False), metavar="PATH", callback=_db_in_a_folder,
                        help="DuckDB file of the store" + ("." if default else f" (default {DEFAULT_DB})."))


def token_option(help: str = "Bearer token of the collector's API (`tracefix serve --token`).") -> Callable[[F], F]:
    """`--token TOKEN` (TRACEFIX_TOKEN): the API token (not the ingest token)."""
    return click.option("--token", envvar="TRACEFIX_TOKEN", default=None, metavar="TOKEN", help=help)


def store_options(fn: F) -> F:
    """`--server`, `--db` and `--token`, in that order, for a verb that reads or writes the store."""
    return server_option()(db_option()(token_option()(fn)))
