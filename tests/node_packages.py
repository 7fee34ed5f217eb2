"""The OpenTelemetry JS SDK and its OTLP exporters for the tests that run them (tests/js/).

Installed once with `npm ci` from the pinned tests/js/package-lock.json into
~/.cache/tracefix-tests/node/<hash of the lock file> (TRACEFIX_TEST_CACHE moves the cache),
so a changed lock file installs afresh and an unchanged one costs nothing. Without node and
npm, or when the install fails (no network), the calling test is skipped and says why.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

JS_DIR = Path(__file__).parent / "js"
BURST_SCRIPT = JS_DIR / "burst.js"
MIN_NODE_MAJOR = 18  # the JS SDK 2.x's floor


def node_modules() -> Path:
    """The installed packages' node_modules folder (for NODE_PATH); skips the test without them."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are not installed: the OpenTelemetry JS exporter tests need Node.js "
                    f"{MIN_NODE_MAJOR}+ (apt-get install nodejs npm)")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    if int(version.lstrip("v").split(".")[0] or 0) < MIN_NODE_MAJOR:
        pytest.skip(f"node {version} is older than the JS SDK needs ({MIN_NODE_MAJOR}+)")
    lock = (JS_DIR / "package-lock.json").read_bytes()
    key = hashlib.sha256(lock + (JS_DIR / "package.json").read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("TRACEFIX_TEST_CACHE") or Path.home() / ".cache" / "tracefix-tests") / "node"
    target = cache / key
    if (target / "node_modules" / ".installed").exists():
        return target / "node_modules"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"{key}.lock", "w") as guard:  # two test runs at once install once
        fcntl.flock(guard, fcntl.LOCK_EX)
        if (target / "node_modules" / ".installed").exists():
            return target / "node_modules"
        staging = cache / f"{key}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        for name in ("package.json", "package-lock.json"):
            shutil.copy(JS_DIR / name, staging / name)
        try:
            done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
                                  cwd=staging, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            pytest.skip("npm ci of the OpenTelemetry JS packages took over 10 minutes (no network?)")
        if done.returncode != 0:
            pytest.skip(f"npm ci of the OpenTelemetry JS packages failed (no network?): {done.stderr[-500:]}")
        (staging / "node_modules" / ".installed").touch()
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return target / "node_modules"


def run_burst(modules: Path, protocol: str, endpoint: str, *, spans: int, sessions: int, run: str,
              ca: Path | None = None, token: str | None = None, timeout: float = 240) -> dict:
    """Run tests/js/burst.js; its summary ({created, exported, failed, errors, seconds})."""
    import json

    args = ["node", str(BURST_SCRIPT), "--protocol", protocol, "--endpoint", endpoint, "--spans", str(spans),
            "--sessions", str(sessions), "--run", run]
    if ca is not None:
        args += ["--ca", str(ca)]
    if token is not None:
        args += ["--token", token]
    env = {**os.environ, "NODE_PATH": str(modules)}
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "GRPC_PROXY", "grpc_proxy"):
        env.pop(proxy, None)  # loopback only
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
