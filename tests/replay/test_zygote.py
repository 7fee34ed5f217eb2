"""Replay children forked from a preloaded zygote (tracefix.replay.zygote): what is preloaded,
and that a forked child gets its own folder, log, environment, session and exit status."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracefix.replay import runner
from tracefix.replay.preload_modules import ALWAYS, preloads
from tracefix.replay.zygote import Zygote, Zygotes

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


def test_tracefix_init_imports_none_of_tracefix_that_a_zygote_has_not_preloaded():
    # a module tracefix.init() imports in a forked child is imported again by every child
    # (about 3 ms of its init): this process imports what a zygote preloads, then runs init()
    script = (
        "import importlib, sys\n"
        "from tracefix.replay.preload_modules import ALWAYS\n"
        "for module in ALWAYS: importlib.import_module(module)\n"
        "preloaded = set(sys.modules)\n"
        "import tracefix\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "tracefix.init(span_processor=SimpleSpanProcessor(InMemorySpanExporter())).shutdown()\n"
        "print(sorted(m for m in set(sys.modules) - preloaded if m.split('.')[0] == 'tracefix'))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=runner.child_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


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


def test_the_libraries_the_apps_own_modules_import_are_preloaded_read_without_running_them(tmp_path):
    # the entrypoint imports the SDK only through the app's other modules (absolute and relative)
    (tmp_path / "agentpkg").mkdir()
    (tmp_path / "agentpkg" / "__init__.py").write_text("raise SystemExit('the package ran')\n")
    (tmp_path / "agentpkg" / "app.py").write_text("raise SystemExit('ran')\nfrom agentpkg import team\nfrom . import llm\n")
    (tmp_path / "agentpkg" / "team.py").write_text("raise SystemExit('ran')\ndef run():\n    import openai\n")
    (tmp_path / "agentpkg" / "llm.py").write_text("raise SystemExit('ran')\nimport anthropic\n")
    modules = preloads("agentpkg.app:main", [str(tmp_path)])
    assert {"openai", "openai.resources.chat.completions", "anthropic", "anthropic.resources.messages"} <= set(modules)
    assert not [m for m in modules if m.startswith("agentpkg")] and "agentpkg" not in sys.modules
    # a worker warms a zygote for an allowed package before a job names its entrypoint: all of it is read
    assert set(modules) <= set(preloads("agentpkg:_", [str(tmp_path)]))


def test_a_warm_zygote_that_preloads_more_serves_an_entrypoint_that_needs_less(tmp_path):
    zygotes = Zygotes(env=runner.child_env(), folder=tmp_path)
    try:
        wide = zygotes.get(["tracefix", "json"])
        assert wide is not None and zygotes.get(["tracefix"]) is wide
        assert zygotes.get(["tracefix", "csv"]) is not wide
    finally:
        zygotes.close()


def test_the_demo_preloads_its_sdk_where_an_editable_install_maps_the_package(tmp_path):
    # tracefix.demo lives in demo/ of the checkout: only the editable install's finder knows it
    modules = runner.entrypoint_preloads("tracefix.demo.bank:run_task")
    assert {"openai", "openai.resources.chat.completions", "tracefix.openai_chat", "requests",
            "tracefix.redaction"} <= set(modules), modules
    assert not [m for m in modules if m.startswith("tracefix.demo")]
    zygote = _zygote(tmp_path, *modules)
    try:  # what an SDK loads on its first client is loaded before the fork, and said if it could not be
        assert "openai" in zygote._ready["loaded"]
        assert "not preloaded" not in (tmp_path / "zygote.log").read_text()
        assert "warm-up" not in (tmp_path / "zygote.log").read_text()
    finally:
        zygote.close()


def test_a_replay_of_the_demo_is_forked_and_says_where_its_time_went(lab):
    from tracefix.replay.pipeline import diagnose

    with lab.access() as access:
        result = diagnose(access, lab.session_id, allowed_modules=["tracefix.demo"], llm=False, runs=1,
                          replay_key=lab.replay_key, save=False, otlp_endpoint=lab.serve_url,
                          hypotheses=[{"step": lab.fault_step}], overrides={"base_url": lab.follow_url},
                          workdir=lab.workdir / "zygote-phases")
    (run,) = result["hypotheses"][0]["runs"]
    assert run["forked"] is True, run  # the zygote path, not a fresh interpreter
    assert set(run["phases"]) == {*runner.PHASES, "deliver", "judge"} and min(run["phases"].values()) >= 0, run["phases"]
    assert sum(run["phases"][p] for p in runner.PHASES) <= run["wall_s"] * 1000 + 5


# the agent's modules, each noting the process that imported it; the last four leave behind
# what a fork cannot share
_APP_MODULES = {
    "quiet_app": "",
    "threads_app": "import threading, time\n"
                   "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n",
    "socket_app": "import socket\nLISTENER = socket.socket()\nLISTENER.bind(('127.0.0.1', 0))\n",
    "init_app": "import tracefix\nHANDLE = tracefix.init(endpoint='http://127.0.0.1:9')\n",
    "process_app": "import subprocess, sys\n"
                   "WATCHER = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(10)'])\n",
}


def _app(tmp_path: Path, name: str) -> Path:
    marker = tmp_path / f"{name}.imported"
    (tmp_path / f"{name}.py").write_text(f"import os\nopen({str(marker)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
                                         + _APP_MODULES[name])
    return marker


def _importers(marker: Path) -> list[int]:
    return [int(pid) for pid in marker.read_text().split()] if marker.exists() else []


def test_the_zygote_imports_the_agents_modules_only_where_named_and_after_a_trial_import(tmp_path):
    quiet, other = _app(tmp_path, "quiet_app"), _app(tmp_path, "threads_app")
    zygote = Zygote([], app_modules=[], cwd=tmp_path, env={**runner.child_env(), "PYTHONPATH": str(tmp_path)},
                    log=tmp_path / "zygote.log")
    try:  # not named: not imported, however harmless
        assert zygote._ready["app_loaded"] == [] and not quiet.exists()
    finally:
        zygote.close()
    zygote = Zygote([], app_modules=["quiet_app"], cwd=tmp_path,
                    env={**runner.child_env(), "PYTHONPATH": str(tmp_path)}, log=tmp_path / "zygote.log")
    try:
        assert zygote._ready["app_loaded"] == ["quiet_app"] and zygote._ready["app_refused"] is None
        probe, kept = _importers(quiet)  # a throwaway fork first, then the zygote its children fork from
        assert kept == zygote.proc.pid != probe
        assert not other.exists()
    finally:
        zygote.close()


@pytest.mark.parametrize("name, effect", [("threads_app", "started threads"), ("socket_app", "opened a socket"),
                                          ("init_app", "called tracefix.init()"),
                                          ("process_app", "started a process")])
def test_an_agent_module_whose_import_leaves_what_a_fork_cannot_share_is_refused(tmp_path, name, effect):
    marker = _app(tmp_path, name)
    zygote = Zygote([], app_modules=[name], cwd=tmp_path, env={**runner.child_env(), "PYTHONPATH": str(tmp_path)},
                    log=tmp_path / "zygote.log")
    try:  # the zygote still forks; its children import the module themselves
        assert zygote._ready["app_loaded"] == [] and effect in zygote._ready["app_refused"], zygote._ready
        assert zygote.proc.pid not in _importers(marker) and len(_importers(marker)) == 1
        folder = tmp_path / "child"
        folder.mkdir()
        assert zygote.wait(zygote.spawn(cwd=folder, log=folder / "child.log", env={"TRACEFIX_REPLAY": ""}), 60) == 2
    finally:
        zygote.close()


def test_an_agent_module_named_for_preloading_must_be_allowed_to_run():
    from tracefix.entrypoints import EntrypointRefused
    from tracefix.replay.preload_modules import app_preloads

    assert app_preloads(["my_agent.app", "my_agent"], ["my_agent"]) == ["my_agent.app", "my_agent"]
    with pytest.raises(EntrypointRefused, match="other.app lies outside the modules allowed"):
        app_preloads(["my_agent.app", "other.app"], ["my_agent", "other_agent"])
