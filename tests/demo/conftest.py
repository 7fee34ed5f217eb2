"""Demo fixtures. The openai-client tests use the session-wide `tracefix sim` subprocess from
tests/conftest.py; the task tests run many whole tasks and so stay in-process (the same
HTTP server, without an interpreter start-up per fault configuration)."""
from __future__ import annotations

import pytest
from demo_sims import running_sim


@pytest.fixture(scope="module")
def clean_sim():
    with running_sim() as server:
        yield server
