"""The agent's own modules a replay zygote imports before it forks, when its operator names
them (``--preload-module``) and a trial import shows the import is safe to share.

Importing the agent's modules is most of what is left of a forked child's start (about 80 ms
of a 250 ms child for the demo's bank). A zygote never imports them on its own: an app's
module may call ``tracefix.init()``, start a thread or a process, open a connection or keep
state at import, and all of that would then be shared by every child forked after it, or
lost across the fork. So the operator opts in, by module (the trust decision: what the
module leaves behind at import, every child starts from), and the zygote first imports the
named modules in a throwaway fork of itself (`probe`): the import must start no thread and
no process, open no socket and call no ``tracefix.init()``. Only then does the zygote import
them itself; otherwise it says why and each child imports them as before.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import select
import signal
import sys
import threading

PROBE_TIMEOUT_S = 60.0


def _sockets() -> set[str]:
    """This process's open sockets (Linux: /proc/self/fd links read `socket:[inode]`)."""
    found = set()
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:  # no procfs: threads, processes and tracefix.init() are still checked
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


def _started_a_process() -> bool:
    try:
        return os.waitpid(-1, os.WNOHANG) == (0, 0)  # a child exists and still runs
    except ChildProcessError:
        return False


def side_effects(modules: list[str]) -> list[str]:
    """Import `modules` here and name what the import left behind that forking cannot share."""
    from tracefix import configure

    threads, sockets = set(threading.enumerate()), _sockets()
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the zygote's answer to the runner
        for module in modules:
            importlib.import_module(module)
    found = []
    started = [t.name for t in threading.enumerate() if t not in threads and t.is_alive()]
    if started:
        found.append(f"started threads ({', '.join(started)})")
    if _started_a_process():
        found.append("started a process")
    if _sockets() - sockets:
        found.append("opened a socket")
    if configure.current_handle() is not None:
        found.append("called tracefix.init()")
    return found


def probe(modules: list[str]) -> str | None:
    """Import `modules` in a throwaway fork of this process: None when the import had none of
    the effects `side_effects` looks for, else why the modules must not be preloaded."""
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:  # the probe: never returns
        os.close(readable)
        try:
            found = side_effects(modules)
            answer = f"importing them {' and '.join(found)}" if found else ""
        except BaseException as exc:  # SystemExit too: a module that exits at import is no preload
            answer = f"importing them raised {type(exc).__name__}: {exc}"
        os.write(writable, (answer or "ok").encode()[:4096])
        os._exit(0)
    os.close(writable)
    try:
        ready, _, _ = select.select([readable], [], [], PROBE_TIMEOUT_S)
        answer = os.read(readable, 4096).decode(errors="replace") if ready else ""
    finally:
        os.close(readable)
        if not answer:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if answer == "ok":
        return None
    return answer or f"importing them took over {PROBE_TIMEOUT_S:.0f} s"


def preload(modules: list[str]) -> tuple[list[str], str | None]:
    """Import `modules` into this process when `probe` finds them safe: (the modules imported,
    why none were, or None)."""
    if not modules:
        return [], None
    refused = probe(modules)
    if refused:
        return [], refused
    try:
        with contextlib.redirect_stdout(sys.stderr):
            for module in modules:
                importlib.import_module(module)
    except Exception as exc:  # it imported in the probe: something differs; the children import it
        return [], f"importing them raised {type(exc).__name__}: {exc}"
    return list(modules), None
