"""One option set for the CLIs: every verb that reaches the store names --server, --db and
--token the same way, and the worker's options stay light (no duckdb)."""
import subprocess
import sys

import click

from tracefix.cli import main

STORE_VERBS = ["sessions", "show", "feedback", "import", "analyze", "train", "replay", "report"]


def _options(verb: str) -> dict[str, click.Option]:
    command = main.get_command(click.Context(main), verb)
    return {p.name: p for p in command.params if isinstance(p, click.Option)}


def test_store_verbs_share_one_server_db_token_option_set():
    helps = {name: {_options(verb)[name].help for verb in STORE_VERBS} for name in ("server", "db", "token")}
    assert all(len(texts) == 1 for texts in helps.values()), helps
    for verb in STORE_VERBS:
        opts = _options(verb)
        assert [opts[n].envvar for n in ("server", "db", "token")] == ["TRACEFIX_SERVER", "TRACEFIX_DB", "TRACEFIX_TOKEN"]


def test_worker_takes_the_same_server_and_token_without_loading_duckdb():
    opts = _options("worker")
    # not required: without it the worker takes the collector on the default port, as the other verbs find it
    assert not opts["server"].required and "http://127.0.0.1:4318" in opts["server"].help
    assert opts["server"].envvar == "TRACEFIX_SERVER" and opts["token"].help == _options("sessions")["token"].help
    loaded = subprocess.run([sys.executable, "-c", "import sys, tracefix.replay.cli, tracefix.collector.cli_options; "
                             "print('duckdb' in sys.modules)"], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "False"


def test_db_path_resolves_flag_then_environment_then_default(monkeypatch):
    from tracefix.collector import DEFAULT_DB, db_path

    monkeypatch.delenv("TRACEFIX_DB", raising=False)
    assert db_path() == DEFAULT_DB
    monkeypatch.setenv("TRACEFIX_DB", "/tmp/x.duckdb")
    assert db_path() == "/tmp/x.duckdb" and db_path("given.duckdb") == "given.duckdb"
