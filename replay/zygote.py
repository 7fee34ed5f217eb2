"""Replay children forked from a preloaded process (a zygote) instead of started cold.

A replay child spends most of its life importing: the openai SDK and an agent framework take
seconds each (more on a busy machine), the replay itself a fraction of that (the cassette
answers up to the edited step, then a few live calls). So `runner.run_all` starts one zygote
per batch of replays: ``python -m tracefix.replay.zygote`` imports tracefix, its exporter
and the libraries among those tracefix traces that the entrypoint's module and the app's own
modules it imports import (their sources are read, never run; found where the children will
look, an editable install's mapped packages included), loads what those SDKs load lazily (the
attributes the patches wrap, one throwaway client each: `WARM_UPS`), then forks one child per
replay. From the fork on, a child is what a started one is: its own session (setsid: a timeout
kills what it started), folder, log, environment (``TRACEFIX_REPLAY``) and exit status; it
calls ``tracefix.init()`` in replay mode and then imports the entrypoint's module itself, as a
started child does. A child's end wakes the zygote at once (SIGCHLD), so the runner hears of it
without a polling delay.

Well-known libraries are preloaded, and the agent's own modules only where the operator named
them (``--preload-module``) and a trial import in a throwaway fork found them safe to share
(tracefix.replay.app_preload): importing those may track state or call ``tracefix.init()``,
which must happen in the child. A zygote that has a thread running after its imports cannot
fork safely: it says so, and the runner starts its children cold, as it does where there is
no ``os.fork``.

Protocol, JSON lines: the runner writes ``{"id", "cwd", "log", "env"}``; the zygote answers
``{"ready": bool, "loaded", "app_loaded", "app_refused", ...}`` once, then ``{"id", "pid"}``
per fork and ``{"exit": pid, "status", "cpu_ms"}`` when a child ends (status as
``Popen.returncode``: negative for a signal; cpu_ms its user + system CPU time).
"""
from __future__ import annotations

import importlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tracefix.replay import app_preload, child_tracing, prebuilt_tls

# An SDK imports its HTTP stack and resources when its first client is built, and fills its
# caches (request types, response models) on its first call: the zygote builds one client of
# each preloaded SDK on an HTTP client that answers every request in process, makes one call
# and throws it away, so a child's first client and call cost what a warm process's do.
# Nothing is sent: the SDK's own HTTP library's mock transport answers (no proxy, no socket).
WARM_UPS = {
    "openai": ("OpenAI", lambda client: client.chat.completions.create(
        model="warm-up", messages=[{"role": "user", "content": "warm-up"}]), ("responses",),
        {"id": "warm-up", "object": "chat.completion", "created": 0, "model": "warm-up",
         "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]}),
    "anthropic": ("Anthropic", lambda client: client.messages.create(
        model="warm-up", max_tokens=1, messages=[{"role": "user", "content": "warm-up"}]), (),
        {"id": "warm-up", "type": "message", "role": "assistant", "model": "warm-up", "stop_reason": "end_turn",
         "content": [{"type": "text", "text": "ok"}], "usage": {"input_tokens": 1, "output_tokens": 1}}),
}
READY_TIMEOUT_S = 120.0


class Zygote:
    """The runner's side: start the zygote, fork children from it, wait for their ends."""

    def __init__(self, modules: list[str], *, cwd: str | Path, env: dict, log: str | Path,
                 app_modules: list[str] | tuple[str, ...] = ()):
        self._lock = threading.Lock()
        self._next_id = 0
        self._replies: dict[int, dict] = {}
        self._exits: dict[int, int] = {}
        self.cpu_ms: dict[int, float] = {}  # each ended child's CPU time (user + system), by pid
        self._changed = threading.Condition()
        self._ready: dict | None = None
        with open(log, "w") as err:  # what the preloading printed, for an operator who asks why it fell back
            self.proc = subprocess.Popen([sys.executable, "-m", "tracefix.replay.zygote", json.dumps(modules),
                                          json.dumps(list(app_modules))],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=str(cwd),
                                         env=env, text=True, start_new_session=True)
        threading.Thread(target=self._read, name="tracefix-zygote", daemon=True).start()
        with self._changed:
            self._changed.wait_for(lambda: self._ready is not None, READY_TIMEOUT_S)
        if not (self._ready or {}).get("ready"):
            self.close()
            raise RuntimeError(f"replay zygote not ready: {(self._ready or {}).get('reason', 'no answer')}")
        if self._ready.get("app_refused"):
            print(f"tracefix: replay children import {', '.join(app_modules)} themselves: "
                  f"{self._ready['app_refused']}", file=sys.stderr, flush=True)

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            with self._changed:
                if "ready" in message:
                    self._ready = message
                elif "exit" in message:
                    self._exits[message["exit"]] = message["status"]
                    self.cpu_ms[message["exit"]] = message.get("cpu_ms")
                elif "id" in message:
                    self._replies[message["id"]] = message
                self._changed.notify_all()
        with self._changed:  # the zygote is gone: nobody will report the children still waited on
            self._ready = self._ready or {"ready": False, "reason": f"exited with status {self.proc.wait()}"}
            self._gone = True
            self._changed.notify_all()

    _gone = False

    def spawn(self, *, cwd: str | Path, log: str | Path, env: dict) -> int:
        """Fork a child running ``tracefix.replay.child`` in `cwd` with `env` added; its pid."""
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            self.proc.stdin.write(json.dumps({"id": request_id, "cwd": str(cwd), "log": str(log), "env": env}) + "\n")
            self.proc.stdin.flush()
        with self._changed:
            self._changed.wait_for(lambda: request_id in self._replies or self._gone, 30)
            reply = self._replies.pop(request_id, None)
        if not reply or "pid" not in reply:
            raise RuntimeError(f"replay zygote could not fork: {(reply or {}).get('error', 'no answer')}")
        return reply["pid"]

    def wait(self, pid: int, timeout: float | None) -> int | None:
        """The child's exit status, or None if it still runs after `timeout` seconds."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self._gone, timeout)
            if pid in self._exits:
                return self._exits.pop(pid)
            return -signal.SIGKILL if self._gone else None

    def close(self) -> None:
        """Stop the zygote (it kills the children it still has)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Zygotes:
    """Zygotes kept warm between batches, one per set of preloaded modules (at most `keep`,
    the least recently used closed first): a `tracefix worker` replays the same agent again
    and again, and can start its zygotes before the first job comes (`warm`)."""

    def __init__(self, *, env: dict, folder: str | Path, keep: int = 4):
        self.env, self.folder, self.keep = env, Path(folder), keep
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, ...], dict] = {}  # insertion order = last use
        self._closed = False

    def get(self, modules: list[str], app_modules: list[str] | tuple[str, ...] = ()) -> Zygote | None:
        """The zygote for `modules` and the agent's `app_modules` (or one that preloads them and
        more: a worker warms one for a whole allowed package), started (and waited for) if
        needed; None if it cannot start."""
        key = (tuple(modules), tuple(app_modules))
        with self._lock:
            if self._closed:
                return None
            if key not in self._entries:  # one that preloads all of these (and more) serves them too
                key = next((k for k, e in self._entries.items() if set(modules) <= set(k[0])
                            and set(app_modules) <= set(k[1])
                            and not (e["ready"].is_set() and not _alive(e["zygote"]))), key)
            entry = self._entries.pop(key, None)
            if entry is not None and entry["ready"].is_set() and not _alive(entry["zygote"]):
                entry = None  # it died: start another
            if entry is None:
                entry = {"ready": threading.Event(), "zygote": None}
                threading.Thread(target=self._start, args=(key, entry), name="tracefix-zygote-start",
                                 daemon=True).start()
            self._entries[key] = entry
            while len(self._entries) > self.keep:
                oldest = self._entries.pop(next(iter(self._entries)))
                if oldest["ready"].is_set() and oldest["zygote"] is not None:
                    oldest["zygote"].close()
        entry["ready"].wait()
        return entry["zygote"]

    def warm(self, preload_sets: list[list[str]], app_modules: list[str] | tuple[str, ...] = ()) -> None:
        """Start these zygotes in the background (a worker does so for its allowed modules)."""
        for modules in preload_sets[:self.keep]:
            threading.Thread(target=self.get, args=(modules, app_modules), name="tracefix-zygote-warm",
                             daemon=True).start()

    def _start(self, key: tuple[tuple[str, ...], tuple[str, ...]], entry: dict) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            zygote = Zygote(list(key[0]), app_modules=list(key[1]), cwd=self.folder, env=self.env,
                            log=self.folder / f"zygote-{abs(hash(key)):x}.log")
            with self._lock:
                if self._closed:  # closed while this one was loading
                    zygote.close()
                else:
                    entry["zygote"] = zygote
        except (OSError, RuntimeError) as exc:
            print(f"tracefix: replays start cold: {exc}", file=sys.stderr, flush=True)
        finally:
            entry["ready"].set()

    def close(self) -> None:
        """Stop the zygotes; one still loading stops when it is ready."""
        with self._lock:
            self._closed = True
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            if entry["zygote"] is not None:
                entry["zygote"].close()


def _alive(zygote: Zygote | None) -> bool:
    return zygote is not None and zygote.proc.poll() is None and not zygote._gone


# --- the zygote process ------------------------------------------------------------------

def _send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _warm_up(library: str) -> None:
    """Build a client of `library` (WARM_UPS) on an in-process HTTP answer, call it once, reach
    its other resources, then close it."""
    class_name, call, resources, answer = WARM_UPS[library]
    sdk = sys.modules[library]
    try:
        http_class = sdk.DefaultHttpxClient  # the SDK's HTTP client, on the HTTP library it is built on
        http = sys.modules[next(k.__module__ for k in http_class.__mro__ if not k.__module__.startswith(library))
                           .split(".")[0]]
        # a transport given: the HTTP library reads no proxy from the environment
        offline = http_class(transport=http.MockTransport(lambda request: http.Response(200, json=answer)))
        for http_client in (None, offline):  # the default one builds its TLS context, the other calls
            client = getattr(sdk, class_name)(api_key="tracefix-zygote", base_url="http://127.0.0.1:9",
                                               http_client=http_client, max_retries=0)
            if http_client is offline:
                call(client)
            for name in resources:
                getattr(client, name)
            client.close()
    except Exception as exc:  # another version of the SDK: its first client in a child costs more, nothing else
        print(f"tracefix zygote: no {library} client warm-up: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def _serve(modules: list[str], app_modules: list[str]) -> dict | None:
    """Preload, then fork on request; returns the request in a forked child, None at the end."""
    loaded = []
    for module in modules:
        try:
            importlib.import_module(module)
            loaded.append(module)
        except Exception as exc:  # a library missing here: the child imports what it needs itself
            print(f"tracefix zygote: {module} not preloaded: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    if "tracefix.instrumentor" in loaded:
        from tracefix.instrumentor import resolve_patch_targets

        resolve_patch_targets()  # what the SDKs load on first access, loaded once here
    for library in (name for name in WARM_UPS if name in loaded):
        _warm_up(library)
    prebuilt_tls.prebuild()  # the CA certificates a child's first client loads, loaded once here
    child_tracing.prepare()  # its detectors' threads end here, before the check below
    app_loaded, app_refused = app_preload.preload(app_modules)  # after the libraries: the probe forks from here
    if threading.active_count() > 1:
        names = ", ".join(t.name for t in threading.enumerate() if t is not threading.main_thread())
        _send({"ready": False, "reason": f"threads running after the preloaded imports ({names}): forking is unsafe"})
        return None
    _send({"ready": True, "loaded": loaded, "app_loaded": app_loaded, "app_refused": app_refused})
    children: set[int] = set()
    pending = b""
    stdin = sys.stdin.fileno()
    # a child's end wakes the loop at once (SIGCHLD writes to this pipe), so the runner
    # learns of it without a polling delay
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    while True:
        readable, _, _ = select.select([stdin, woken], [], [], 1.0 if children else None)
        if woken in readable:
            os.read(woken, 4096)
            readable.remove(woken)
        for pid in list(children):
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                _send({"exit": pid, "status": os.waitstatus_to_exitcode(status),
                       "cpu_ms": round((usage.ru_utime + usage.ru_stime) * 1000, 1)})
        if not readable:
            continue
        chunk = os.read(stdin, 65536)
        if not chunk:  # the runner is done (or gone): take what is left with us
            for pid in children:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                os.waitpid(pid, 0)
            return None
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            try:
                pid = os.fork()
            except OSError as exc:
                _send({"id": request["id"], "error": str(exc)})
                continue
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(woken)
                os.close(wake)
                return request
            children.add(pid)
            _send({"id": request["id"], "pid": pid})


def _become_child(request: dict) -> None:
    """What `subprocess.Popen([python, -m, tracefix.replay.child], cwd=, env=, stdout=log,
    start_new_session=True)` would have set up."""
    os.setsid()
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(devnull)
    os.chdir(request["cwd"])
    os.environ.update(request["env"])
    from tracefix.replay import child

    sys.path[0] = request["cwd"]  # `python -m` puts its working directory first
    sys.argv = [child.__file__]


def main() -> int:
    request = _serve(*(json.loads(arg) for arg in (sys.argv[1:] + ["[]", "[]"])[:2]))
    if request is None:
        sys.stdout.flush()
        os._exit(0)  # the preloaded modules' teardown takes seconds and serves nothing
    _become_child(request)
    from tracefix.replay import child

    return child.run()


if __name__ == "__main__":
    raise SystemExit(main())
