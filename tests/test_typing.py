"""The typed contracts between the parts (session document, analysis and replay results),
the store's API, the HTTP API's module (with its query parsing) and the message-log
importer type-check with mypy, so `make test` fails when typing breaks.

mypy cannot follow setuptools' editable-install finder, so the test lays out the import
namespace the way pyproject's package-dir maps it, as symlinks, and checks that."""
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ["tracefix.errors", "tracefix.collector.contracts", "tracefix.collector.cli_options",
           "tracefix.collector.document", "tracefix.collector.store", "tracefix.collector.imports",
           "tracefix.collector.api", "tracefix.collector.url_input",
           "tracefix.analysis.contracts", "tracefix.replay.contracts"]


def namespace_tree(into: Path) -> Path:
    """`into/tracefix/...` as pyproject's [tool.setuptools.package-dir] maps the folders."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    top = into / "tracefix"
    top.mkdir(parents=True)
    for entry in (ROOT / mapping["tracefix"]).iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for name, folder in mapping.items():
        if name != "tracefix":
            (top / name.removeprefix("tracefix.")).symlink_to(ROOT / folder)
    return into


def test_contracts_and_store_api_type_check(tmp_path):
    tree = namespace_tree(tmp_path / "src")
    args = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
            "--cache-dir", str(tmp_path / "cache"), *[a for m in CHECKED for a in ("-p", m)]]
    started = time.monotonic()
    done = subprocess.run(args, cwd=tree, env={**os.environ, "MYPYPATH": str(tree)}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success" in done.stdout, done.stdout
    assert time.monotonic() - started < 120, "the typed scope grew too slow to check in every test run"
