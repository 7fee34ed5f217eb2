"""Replay children forked from a preloaded zygote (tracefix.replay.zygote): what is preloaded,
and that a forked child gets its own folder, log, environment, session and exit status."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tracefix.replay import runner
from tracefix.replay.zygote import ALWAYS, Zygote, preloads

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="zygotes fork")


def test_preloads_are_the_traced_libraries_the_entrypoint_imports_read_without_running_it(tmp_path):
    (tmp_path / "agentpkg").mkdir()
    (tmp_path / "agentpkg" / "__init__.py").write_text("raise SystemExit('the package ran')\n")
    (tmp_path / "agentpkg" / "app.py").write_text(
        "raise SystemExit('the module ran')\nimport openai\nfrom agentpkg import tools\nimport json, shop\n")
    modules = preloads("agentpkg.app:main", [str(tmp_path)])
    assert modules[:len(ALWAYS)] == list(ALWAYS)
    assert {"openai", "openai.resources.chat.completions", "tracefix.openai_chat"} <= set(modules)
    assert not {"agentpkg", "agentpkg.tools", "shop", "json", "anthropic", "autogen"} & set(modules)
    assert preloads("nowhere.to.be.found:main", [str(tmp_path)]) == list(ALWAYS)


def _zygote(tmp_path: Path, *modules: str, path: Path | None = None) -> Zygote:
    env = {**runner.child_env(), **({"PYTHONPATH": str(path)} if path else {})}
    return Zygote(list(modules), cwd=tmp_path, env=env, log=tmp_path / "zygote.log")


def test_a_forked_child_runs_in_its_folder_with_its_log_and_environment_and_reports_its_status(tmp_path):
    zygote = _zygote(tmp_path)
    try:
        folders = [tmp_path / f"child{i}" for i in range(2)]
        pids = []
        for folder in folders:
            folder.mkdir()
            # no replay file: the child says how it is used and exits 2
            pids.append(zygote.spawn(cwd=folder, log=folder / "child.log", env={"TRACEFIX_REPLAY": ""}))
        assert [zygote.wait(pid, 60) for pid in pids] == [2, 2]
        assert all("set TRACEFIX_REPLAY" in (f / "child.log").read_text() for f in folders)
        assert len(set(pids)) == 2 and os.getpid() not in pids
    finally:
        zygote.close()
    assert zygote.proc.returncode == 0


def test_a_forked_child_that_hangs_is_killed_with_its_session(tmp_path):
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)  # opening it to read blocks until a writer comes: none will
    zygote = _zygote(tmp_path)
    try:
        pid = zygote.spawn(cwd=tmp_path, log=tmp_path / "child.log", env={"TRACEFIX_REPLAY": str(fifo)})
        assert zygote.wait(pid, 0.5) is None
        assert os.getpgid(pid) == pid  # its own session: a timeout kills what it started too
        os.killpg(pid, signal.SIGKILL)
        assert zygote.wait(pid, 30) == -signal.SIGKILL
    finally:
        zygote.close()


def test_a_zygote_with_a_thread_after_its_imports_refuses_to_fork(tmp_path):
    (tmp_path / "spins.py").write_text("import threading, time\n"
                                       "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="forking is unsafe"):
        _zygote(tmp_path, "spins", path=tmp_path)
    assert time.monotonic() - started < 60
    assert "spins" not in sys.modules
