"""Run replays in fresh child processes, several at a time.

Each replay is one ``python -m tracefix.replay.child`` with ``TRACEFIX_REPLAY`` pointing at
its replay file (contracts §4: cassette, intervention, child session id, parent, report
path, guard) plus what the child needs to start the entrypoint: the collector's OTLP
endpoint, input overrides and the guard's settings. A child that outlives its timeout is
killed and reported as such; the others are unaffected. Children share nothing but the
collector they export to: each has its own session id, work directory and report. A child
writes its spans to its folder and the runner posts them to the collector once the child is
gone (tracefix.replay.span_handoff), so no child waits on the collector as it leaves.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tracefix.replay import span_handoff
from tracefix.replay.preload_modules import preloads
from tracefix.replay.zygote import Zygote, Zygotes

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_CONCURRENCY = 3  # replays at once: an intervention's three runs together (`--concurrency`)
# a child writes its spans to its folder and the runner posts them (span_handoff); False: each
# child sends its own, as before (bench/replay.py --before measures the difference)
HAND_OVER_SPANS = True
log = logging.getLogger("tracefix.replay")


@dataclass
class ReplayJob:
    key: str  # groups the runs of one intervention
    run_index: int
    cassette: dict
    intervention: dict | None
    parent_session_id: str
    otlp_endpoint: str | None
    allowed_modules: list[str]  # the operator's --allow-module list (tracefix.entrypoints)
    allowed_entrypoints: list[str] = field(default_factory=list)  # and --allow-entrypoint list
    overrides: dict = field(default_factory=dict)
    guard: dict | None = None
    service: str | None = None  # the parent's service name, so replays list beside it
    otlp_headers: dict | None = None  # e.g. the collector's bearer token
    timeout_s: float = DEFAULT_TIMEOUT_S
    child_session_id: str = field(default_factory=lambda: "s-replay-" + uuid.uuid4().hex[:16])


def child_env() -> dict:
    """The environment of a replay child, but its replay file. The child runs in its own
    folder; the agent's modules are found where this process was started (a worker or
    `tracefix replay` started in the app's folder, as `python app.py` is)."""
    search_path = os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": search_path}


def _status_error(status: int | None, timeout_s: float) -> str | None:
    if status is None:
        return f"replay child killed after its {timeout_s:.0f}s timeout"
    return f"replay child exited with status {status}" if status else None


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # the timed-out child, or what it left running
    except (ProcessLookupError, PermissionError):
        pass


def _run_started(workdir: Path, log_path: Path, env: dict, timeout_s: float) -> str | None:
    with open(log_path, "w") as log:
        # its own process group: what the agent started (tool subprocesses, servers) goes with it
        proc = subprocess.Popen([sys.executable, "-m", "tracefix.replay.child"], env=env, stdout=log,
                                stderr=subprocess.STDOUT, cwd=str(workdir), start_new_session=True)
        try:
            status = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            status = None
        finally:
            _kill_group(proc.pid)
            proc.wait()
    return _status_error(status, timeout_s)


def _wait_forked(zygote: Zygote, pid: int, timeout_s: float) -> str | None:
    status = zygote.wait(pid, timeout_s)
    _kill_group(pid)
    if status is None:
        zygote.wait(pid, 10)
    return _status_error(status, timeout_s)


def _tail(path: Path, limit: int = 1500) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text[-limit:]


def run_one(job: ReplayJob, workdir: Path, zygote: Zygote | None = None) -> dict:
    """Run one child to completion (or timeout), forked from `zygote` when given, else
    started cold; return its report plus wall time and error."""
    workdir.mkdir(parents=True, exist_ok=True)
    replay_path, report_path, log_path = workdir / "replay.json", workdir / "report.json", workdir / "child.log"
    spans_path = workdir / span_handoff.SPANS_FILE if job.otlp_endpoint and HAND_OVER_SPANS else None
    replay = {
        "cassette": job.cassette, "intervention": job.intervention, "session_id": job.child_session_id,
        "parent_session_id": job.parent_session_id, "report_path": str(report_path),
        "guard": bool(job.guard), "allowed_modules": list(job.allowed_modules),
        "allowed_entrypoints": list(job.allowed_entrypoints),
        # read by tracefix.replay.child, ignored by the instrumentation
        "otlp_endpoint": job.otlp_endpoint, "input_overrides": job.overrides, "guard_config": job.guard,
        "service": job.service, "otlp_headers": job.otlp_headers,
        "spans_file": str(spans_path) if spans_path else None,
    }
    replay_path.write_text(json.dumps(replay, default=str))
    replay_path.chmod(0o600)  # it may carry the collector token
    env = {"TRACEFIX_REPLAY": str(replay_path)}
    started, spawned_at = time.monotonic(), time.time()
    zygote_pid = None
    try:
        if zygote is None:
            raise RuntimeError("no zygote")
        zygote_pid = zygote.spawn(cwd=workdir, log=log_path, env=env)  # in its own session, as a started child
    except RuntimeError:  # no zygote, or it could not fork: start the child cold
        error = _run_started(workdir, log_path, {**child_env(), **env}, job.timeout_s)
    else:
        error = _wait_forked(zygote, zygote_pid, job.timeout_s)
    wall_s, ended_at = time.monotonic() - started, time.time()
    delivered_at, rejected = None, None
    if spans_path is not None:  # before anyone reads the child's session: its spans are stored
        delivery = span_handoff.deliver(spans_path, job.otlp_endpoint or "", job.otlp_headers)
        error = "; ".join(e for e in (error, delivery.error) if e) or None
        rejected, delivered_at = delivery.note, time.time()
    report = {}
    if report_path.exists():
        try:
            report = json.loads(report_path.read_text())
        except ValueError as exc:
            error = error or f"unreadable replay report: {exc}"
    elif error is None:
        error = "replay child wrote no report"
    if error:
        tail = _tail(log_path)
        error = f"{error}: {tail.strip().splitlines()[-1] if tail.strip() else 'no output'}"
    if report.get("error") and not error:
        error = report["error"]
    return {"key": job.key, "run_index": job.run_index, "child_session_id": job.child_session_id,
            "report": report, "wall_s": round(wall_s, 3), "error": error, "log": str(log_path),
            "phases": phases(report.get("timings"), spawned_at, ended_at, delivered_at),
            "forked": zygote_pid is not None,
            "spans_rejected": rejected,  # what the collector said it could not store of the child's spans
            # CPU time beside wall time: what the child cost, whatever else the machine was doing
            "cpu_ms": zygote.cpu_ms.pop(zygote_pid, None) if zygote is not None and zygote_pid else None,
            # the folder may be removed after the run: keep the end of the child's output
            "log_tail": _tail(log_path, 4000) if error or report.get("divergence") else None}


# the phases of a child's wall time, each from the end of the one before (report "timings")
PHASES = ("start", "config", "init", "entrypoint", "flush", "exit")


def phases(timings: dict | None, spawned_at: float, ended_at: float,
           delivered_at: float | None = None) -> dict[str, float] | None:
    """Milliseconds of each of `PHASES`: start (fork, or a cold interpreter's start and
    imports, to the child's main), config (reading the replay file), init (tracefix in replay
    mode: the cassette, the exporter, the patches), entrypoint (importing and running the
    agent), flush (the report and the exporter's shutdown), exit (the child's exit until the
    runner sees it); and, after the child, deliver (the runner posting the child's spans to
    the collector, when it handed them over). None when the child wrote no timings."""
    if not isinstance(timings, dict) or not all(isinstance(timings.get(k), (int, float))
                                                for k in ("main", "config", "init", "ran", "flushed")):
        return None
    marks = [spawned_at, timings["main"], timings["config"], timings["init"], timings["ran"], timings["flushed"],
             ended_at]
    split = {name: round((end - start) * 1000, 1) for name, start, end in zip(PHASES, marks, marks[1:])}
    if delivered_at is not None:
        split["deliver"] = round((delivered_at - ended_at) * 1000, 1)
    return split


@contextmanager
def replay_folder(workdir: str | Path | None = None, *, keep: bool = False):
    """A private folder (0700) for the children's replay files, cassettes and logs, which
    hold the session's full content; removed on the way out unless `keep`."""
    if workdir:
        base = Path(workdir)
        base.mkdir(parents=True, exist_ok=True, mode=0o700)
        base.chmod(0o700)
    else:
        base = Path(tempfile.mkdtemp(prefix="tracefix-replay-"))  # created 0700
    try:
        yield base
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


def run_all(jobs: list[ReplayJob], *, concurrency: int = DEFAULT_CONCURRENCY, workdir: str | Path, progress=None,
            preload: bool = True, zygotes: Zygotes | None = None,
            app_modules: list[str] | tuple[str, ...] = ()) -> list[dict]:
    """Run every job with at most `concurrency` children alive, each in its own folder under
    `workdir`; results in job order. With `preload` (and os.fork), children are forked from
    a process that imported tracefix and the entrypoint's libraries once
    (tracefix.replay.zygote): one of `zygotes`, kept warm by its owner, else one for this
    batch; it also imports the agent's `app_modules` (the operator's --preload-module) when a
    trial import finds that safe (tracefix.replay.app_preload). Without, or if that process
    cannot start, each child starts cold."""
    base = Path(workdir)
    results: dict[int, dict] = {}
    zygote = None
    if preload and jobs and hasattr(os, "fork"):
        modules = entrypoint_preloads(jobs[0].cassette.get("entrypoint") or "")
        zygote = zygotes.get(modules, app_modules) if zygotes is not None else _start_zygote(modules, app_modules, base)
    try:
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            futures = {pool.submit(run_one, job, base / job.child_session_id, zygote): i
                       for i, job in enumerate(jobs)}
            for done, future in enumerate(as_completed(futures), 1):
                results[futures[future]] = future.result()
                if progress:
                    progress(done, len(jobs))
    finally:
        if zygote is not None and zygotes is None:
            zygote.close()
    return [results[i] for i in range(len(jobs))]


def entrypoint_preloads(entrypoint: str) -> list[str]:
    """What a zygote preloads for `entrypoint`, found where its children will look."""
    return preloads(entrypoint, child_env()["PYTHONPATH"].split(os.pathsep) + sys.path)


def _start_zygote(modules: list[str], app_modules: list[str] | tuple[str, ...], base: Path) -> Zygote | None:
    try:
        return Zygote(modules, app_modules=app_modules, cwd=base, env=child_env(), log=base / "zygote.log")
    except (OSError, RuntimeError) as exc:
        log.warning("replays start cold: %s", exc)
        return None
