"""A real collector for the web UI's tests: `tracefix serve` with an API token, two imported
message-log sessions (one with hostile text, analyzed by `tracefix analyze`), and diagnosis
jobs run by the collector itself (`--diagnose analysis`); and a second one that runs no job,
for tests that queue and finish jobs themselves (`quiet_server`)."""
from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import procs
import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "report"))
from report_session import HOSTILE_LOG, tracefix  # noqa: E402

TOKEN = "ui-test-token"
CALM_LOG = {"task": "Summarise the quarterly ledger", "history": [
    {"name": "Planner", "content": "PLAN: read the ledger, then summarise."},
    {"name": "Writer", "content": "Summary: revenue up 4%, costs flat."},
    {"name": "Planner", "content": "FINAL ANSWER: revenue up 4%, costs flat."}]}


@dataclass
class UiServer:
    url: str
    token: str
    hostile: str  # session ids
    calm: str
    folder: Path


@contextmanager
def serving_two_sessions(folder: Path, diagnose: str, analyzed: bool):
    """`tracefix serve --diagnose DIAGNOSE` with the hostile and the calm session imported (the
    hostile one analyzed by `tracefix analyze` when `analyzed`)."""
    serve = procs.start_serve(folder / "store.duckdb", "--diagnose", diagnose, "--token", TOKEN)
    try:
        url = serve.match["http"]
        (folder / "logs.json").write_text(json.dumps([HOSTILE_LOG, CALM_LOG]))
        ids = json.loads(tracefix("import", str(folder / "logs.json"), "--server", url, "--token", TOKEN,
                                  "--json").stdout)
        if analyzed:
            tracefix("analyze", ids[0], "--server", url, "--token", TOKEN)
        yield UiServer(url, TOKEN, ids[0], ids[1], folder)
    finally:
        serve.stop()


@pytest.fixture(scope="session")
def ui_server(tmp_path_factory) -> UiServer:
    with serving_two_sessions(tmp_path_factory.mktemp("ui"), "analysis", analyzed=True) as server:
        yield server


@pytest.fixture(scope="session")
def quiet_server(tmp_path_factory) -> UiServer:
    """A collector of its own that runs no job (`--diagnose off`), for tests that queue, claim
    and finish jobs, raise alerts and add replay sessions without touching `ui_server`'s
    store; the same two sessions, not analyzed."""
    with serving_two_sessions(tmp_path_factory.mktemp("ui-quiet"), "off", analyzed=False) as server:
        yield server
