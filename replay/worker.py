"""`tracefix worker`: claims replay (and diagnosis) jobs from `tracefix serve` and runs them.

The collector never runs agent code: a session's entrypoint and inputs are data that any
holder of the ingest token can write. A worker runs in the agent's own image or
virtualenv, with the agent's modules allowed by its operator (``--allow-module``):

1. claim the oldest queued replay job over the API (``POST /api/v1/jobs/claim``); the job
   is leased to this worker, and the lease is renewed while the job runs, so a worker
   that dies gives its job back when the lease runs out;
2. refuse a session whose entrypoint lies outside the allowed modules (and entrypoints), or
   whose entrypoint, inputs and id the app did not sign with the worker's replay key
   (``TRACEFIX_REPLAY_KEY``; ``--allow-unsigned`` lets them through): the job ends
   ``refused`` with the reason, nothing is imported. An entrypoint the app did not mark
   replayable is refused by the first replay children, which import its module: the job
   ends ``refused`` too, none of its code having run;
3. otherwise run the DoVer replay (``tracefix.replay.pipeline.diagnose``): its children
   export their spans to the collector, the result is stored through the API;
4. finish the job (``done``, or ``failed`` with the error; also when no replay ran through,
   e.g. every run lacked the app's environment, as `verdicts.nothing_replayed` says).

With ``--jobs regress`` it claims the dataset items a ``tracefix regress --queue`` queued
(``tracefix.replay.regress_worker``: the same trust rules, the result stored under the run).
With ``--jobs diagnosis`` (or ``replay,diagnosis``) it also claims diagnosis jobs, leased and
renewed the same way, and runs the collector's own diagnosis (``tracefix.analysis.diagnosis``)
through the API: the session is read, the analysis result saved and, when the collector runs
``--diagnose full``, the replay job queued, all over HTTP. A collector started with
``--diagnosis-workers 0`` leaves every diagnosis to such workers. A diagnosis runs no agent
code: it needs no ``--allow-module``. The analysis's libraries (torch, scikit-learn) are
imported by the first diagnosis, not when the worker starts.

Replay children are forked from zygotes that preloaded the agent's traced libraries
(``tracefix.replay.zygote``), and the agent's own modules its operator named
(``--preload-module``, when a trial import finds them safe: ``tracefix.replay.app_preload``);
the worker keeps them between jobs and starts one for each allowed module as it starts, so
even its first job does not wait for those imports.

Several workers may share a queue: the collector's single writer hands each job to one.
SIGTERM / Ctrl-C stops claiming and lets the job at hand finish; a second one leaves at
once (the lease then returns the job to the queue).
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import traceback

from tracefix.collector.access import AccessError
from tracefix.entrypoints import EntrypointRefused
from tracefix.errors import UnknownSession
from tracefix.replay import runner
from tracefix.replay.admission import ReplayError
from tracefix.replay.pipeline import diagnose, requested_hypotheses
from tracefix.replay.regress_worker import run_regress_job
from tracefix.replay.verdicts import nothing_replayed
from tracefix.replay.zygote import Zygotes

log = logging.getLogger("tracefix.worker")

# the line a starting worker prints (group 1: the collector it serves), for launchers
READY = re.compile(r"tracefix worker: \S+ takes \S+ jobs from (\S+)")

KINDS = ("replay", "diagnosis", "regress")


class Worker:
    def __init__(self, access, allowed_modules: list[str], *, name: str | None = None, lease_s: float = 60.0,
                 poll_s: float = 1.0, replay_options: dict | None = None, kinds: tuple[str, ...] = ("replay",),
                 allowed_entrypoints: list[str] | None = None):
        if not kinds or any(kind not in KINDS for kind in kinds):
            raise ValueError(f"a worker takes jobs of {' and/or '.join(KINDS)}, not {kinds!r}")
        self.access = access
        self.kinds = tuple(dict.fromkeys(kinds))
        self.allowed_modules = list(allowed_modules)
        self.allowed_entrypoints = list(allowed_entrypoints or [])
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.replay_options = dict(replay_options or {})
        self.stopping = threading.Event()
        self.zygotes: Zygotes | None = None

    def _start_zygotes(self, warm: bool) -> None:
        if not {"replay", "regress"} & set(self.kinds) or not self.replay_options.get("preload", True) \
                or not hasattr(os, "fork"):
            return
        folder = tempfile.mkdtemp(prefix="tracefix-zygotes-")
        self.zygotes = Zygotes(env=runner.child_env(), folder=folder)
        if warm:  # an allowed module is often the entrypoint's own: its libraries are known before any job
            self.zygotes.warm([runner.entrypoint_preloads(f"{module}:_") for module in self.allowed_modules]
                              + [runner.entrypoint_preloads(entrypoint) for entrypoint in self.allowed_entrypoints],
                              app_modules=self.replay_options.get("preload_modules") or ())

    def _stop_zygotes(self) -> None:
        if self.zygotes is not None:
            self.zygotes.close()
            shutil.rmtree(self.zygotes.folder, ignore_errors=True)
            self.zygotes = None

    def run_until_stopped(self, once: bool = False) -> int:
        """Claim and run jobs until stopped (or, with `once`, until the queue is empty);
        returns how many jobs this worker finished."""
        self._handle_signals()
        allowed = ""
        if {"replay", "regress"} & set(self.kinds):
            allowed = f" (allowed modules: {', '.join(self.allowed_modules) or 'none'}" + (
                f"; entrypoints: {', '.join(self.allowed_entrypoints)})" if self.allowed_entrypoints else ")")
        print(f"tracefix worker: {self.name} takes {','.join(self.kinds)} jobs from {self.access.server}{allowed}",
              flush=True)
        self._start_zygotes(warm=not once)
        try:
            return self._claim_until_stopped(once)
        finally:
            self._stop_zygotes()

    def _claim_until_stopped(self, once: bool) -> int:
        handled, unreachable_s, kinds = 0, 0.0, list(self.kinds)
        while not self.stopping.is_set():
            try:
                job = None
                for kind in kinds:
                    job = self.access.claim_job(kind, self.name, self.lease_s)
                    if job is not None:  # the other kind goes first next time: neither waits behind the other
                        kinds.remove(kind)
                        kinds.append(kind)
                        break
                unreachable_s = 0.0
            except AccessError as exc:
                # Refused (a wrong token, ...): waiting will not help. Unreachable: a collector
                # restarting comes back, unless this run was to take what is queued and stop.
                if exc.status is not None or once:
                    raise
                unreachable_s = min(30.0, max(self.poll_s, unreachable_s * 2))
                log.warning("%s; trying again in %.0f s", exc, unreachable_s)
                self.stopping.wait(unreachable_s)
                continue
            if job is None:
                if once:
                    break
                self.stopping.wait(self.poll_s)
                continue
            self.run_job(job)
            handled += 1
        return handled

    def run_job(self, job: dict) -> str:
        """Run one claimed job to its end state, renewing its lease meanwhile."""
        done = threading.Event()
        renewer = threading.Thread(target=self._renew, args=(job["job_id"], done), name="tracefix-lease", daemon=True)
        renewer.start()
        try:
            if job.get("kind") == "diagnosis":
                state, error = self._diagnose(job)
            elif job.get("kind") == "regress":  # a dataset item run again (tracefix.replay.regress_worker)
                state, error = run_regress_job(self.access, job, allowed_modules=self.allowed_modules,
                                               allowed_entrypoints=self.allowed_entrypoints,
                                               replay_options=self.replay_options, zygotes=self.zygotes)
            else:
                state, error = self._replay(job["session_id"], job.get("options"))
        finally:
            done.set()
            renewer.join(5)
        try:
            if not self.access.finish_job(job["job_id"], worker=self.name, state=state, error=error):
                log.warning("job %s was no longer this worker's when it ended (its lease ran out)", job["job_id"])
        except AccessError as exc:  # the lease runs out and the job is queued again
            log.warning("could not record the end of job %s: %s", job["job_id"], exc)
        print(f"tracefix worker: {job.get('kind', 'replay')} job {job['job_id']} (session {job['session_id']}): {state}"
              + (f": {error}" if error else ""), flush=True)
        return state

    def _replay(self, session_id: str, request: dict | None = None) -> tuple[str, str | None]:
        try:
            # diagnose refuses an entrypoint outside the allowed modules before anything else
            result = diagnose(self.access, session_id, allowed_modules=self.allowed_modules,
                              allowed_entrypoints=self.allowed_entrypoints,
                              otlp_endpoint=self.access.server, hypotheses=requested_hypotheses(request),
                              zygotes=self.zygotes, **self.replay_options)
        except EntrypointRefused as exc:
            return "refused", str(exc)
        except (ReplayError, UnknownSession) as exc:
            return "failed", str(exc)
        except Exception as exc:  # a bug in a stage or an unreachable collector: the job says so, the worker goes on
            log.warning("replay of %s failed:\n%s", session_id, traceback.format_exc(limit=5))
            return "failed", f"{type(exc).__name__}: {exc}"
        log.info("replay of %s: %s", session_id, ", ".join(h["verdict"] for h in result["hypotheses"]) or "nothing tested")
        unrun = nothing_replayed(result)  # every run errored (no credentials, a crash): the job failed, and says why
        return ("failed", unrun) if unrun else ("done", None)

    def _diagnose(self, job: dict) -> tuple[str, str | None]:
        """The collector's diagnosis of the job's session, through the API (what `--diagnose`
        asks, as the collector's claim answer says; the analysis alone when it does not)."""
        from tracefix.analysis.diagnosis import run_diagnosis  # torch and scikit-learn: loaded by the first job

        try:
            done = run_diagnosis(self.access, job["session_id"], job.get("diagnose") or "analysis", job["job_id"])
        except UnknownSession as exc:
            return "failed", str(exc)
        except Exception as exc:  # a bug in the analysis or an unreachable collector: the job says so
            log.warning("diagnosis of %s failed:\n%s", job["session_id"], traceback.format_exc(limit=5))
            return "failed", f"{type(exc).__name__}: {exc}"
        log.info("diagnosis of %s: %s", job["session_id"], "; ".join(done))
        return "done", None

    def _renew(self, job_id: str, done: threading.Event) -> None:
        while not done.wait(self.lease_s / 3):
            try:
                if not self.access.renew_lease(job_id, self.name, self.lease_s):
                    log.warning("job %s is no longer leased to this worker", job_id)
                    return
            except Exception as exc:  # the collector may be restarting: try again at the next beat
                log.warning("could not renew the lease of job %s: %s", job_id, exc)

    def _handle_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def stop(signum, frame):
            if self.stopping.is_set():
                raise SystemExit(128 + signum)  # second signal: leave now, the lease returns the job
            print("tracefix worker: stopping after the job at hand (again to stop now)", flush=True)
            self.stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
