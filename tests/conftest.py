"""Session-wide real processes. Area-specific fixtures live in each tests/<area>/conftest.py."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # `import procs` from any test folder

import procs  # noqa: E402


@pytest.fixture(scope="session")
def sim():
    """A scripted LLM server with no faults, shared by the whole run."""
    p = procs.start_sim("--seed", "1")
    yield p
    p.stop()


@pytest.fixture(scope="session")
def sim_url(sim) -> str:
    return sim.match["base_url"]
