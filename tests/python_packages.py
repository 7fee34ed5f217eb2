"""Python packages a test runs in a process of its own, outside the project's environment.

The official OpenTelemetry GenAI instrumentation for the openai SDK,
`opentelemetry-instrumentation-openai-v2`, is published only as pre-releases. It installs
beside the dev packages, but it registers an `opentelemetry_instrumentor` entry point: every
`opentelemetry-instrument` run of the other tests (tests/collector/test_other_instrumentors.py,
the examples' matrix) would load it too and record each call once more. So it is installed
(`pip install --no-deps --target`, the pinned versions below; its dependencies are the dev
environment's own OpenTelemetry packages) into ~/.cache/tracefix-tests/python/<hash of the
pins> (TRACEFIX_TEST_CACHE moves the cache), and a test puts that folder on PYTHONPATH of the
process it starts. Installed once; without the registry (no network) the test is skipped,
saying why.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# 2.4b0 names no upper bound for opentelemetry-util-genai; from 1.0b0 on util-genai dropped the
# module 2.4b0 imports (`instruments`) and its default conventions (v1.30: one event per message)
OPENAI_V2 = ("opentelemetry-instrumentation-openai-v2==2.4b0", "opentelemetry-util-genai==0.4b0")


def installed(pins: tuple[str, ...] = OPENAI_V2) -> Path:
    """The folder holding `pins` (for PYTHONPATH); skips the test when they cannot be installed."""
    key = hashlib.sha256("\n".join(pins).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("TRACEFIX_TEST_CACHE") or Path.home() / ".cache" / "tracefix-tests") / "python"
    target = cache / key
    if (target / ".installed").exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"{key}.lock", "w") as guard:  # two test runs at once install once
        fcntl.flock(guard, fcntl.LOCK_EX)
        if (target / ".installed").exists():
            return target
        staging = cache / f"{key}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                                   "--target", str(staging), *pins], capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip(f"pip install of {', '.join(pins)} took over 5 minutes (no network?)")
        if done.returncode != 0:
            pytest.skip(f"pip install of {', '.join(pins)} failed (no network?): {done.stderr[-500:]}")
        (staging / ".installed").touch()
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return target
