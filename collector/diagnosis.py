"""The diagnosis worker: runs queued diagnosis jobs (one per negative feedback) inside `tracefix serve`.

A diagnosis job runs the analysis (`tracefix.analysis.pipeline.analyze_session`, imported
lazily; a missing part or any exception marks the job failed and the server keeps
serving). With `--diagnose full` it then queues a replay job for a replayable session.

The collector never runs agent code: a session's recorded entrypoint is data that anyone
holding the ingest token can write. Replay jobs are claimed over the API by
`tracefix worker` processes that run beside the agent's own code and import only the
modules their operator allowed (`--allow-module`).
"""
from __future__ import annotations

import logging
import threading
import traceback
from typing import TYPE_CHECKING

from tracefix.collector.threadnames import name_os_thread

if TYPE_CHECKING:
    from tracefix.collector.server import Collector

log = logging.getLogger("tracefix.collector.diagnosis")

MODES = ("off", "analysis", "full")


def run_diagnosis(access, session_id: str, mode: str, job_id: str) -> list[str]:
    """Run the analysis and, in `full` mode, queue the replay; returns what was done."""
    from tracefix.analysis.pipeline import analyze_session

    done = []
    result = analyze_session(access, session_id)
    if isinstance(result, dict):
        access.save_analysis(session_id, result)
    done.append("analysis")
    if mode == "full":
        doc = access.get_session(session_id)
        if doc and doc.get("replayable") and doc.get("entrypoint"):
            replay = access.enqueue_job(session_id, reason=f"diagnosis {job_id}", kind="replay")
            done.append(f"replay job {replay['job_id']} queued for a tracefix worker")
        else:
            done.append("no replay (the session did not record a replayable entrypoint)")
    return done


class DiagnosisWorker:
    """`workers` threads claim jobs one at a time (claiming goes through the writer, so two
    threads never run the same job)."""

    def __init__(self, collector: "Collector", mode: str = "full", poll_s: float = 2.0, workers: int = 1):
        if mode not in MODES:
            raise ValueError(f"--diagnose must be one of {', '.join(MODES)}")
        self.collector = collector
        self.mode = mode
        self.poll_s = poll_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, name=f"tracefix-diagnosis-{i}", daemon=True)
                         for i in range(max(1, workers))]

    def start(self) -> "DiagnosisWorker":
        if self.mode != "off":
            for t in self._threads:
                t.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            if t.is_alive():
                t.join(timeout)

    def _run(self) -> None:
        from tracefix.collector.access import StoreAccess

        name_os_thread("tf-diagnosis")
        writer = self.collector.writer
        access = StoreAccess(self.collector.store, writer)
        while not self._stop.is_set():
            try:
                job = writer.run(lambda s: s.claim_job("diagnosis"))
            except Exception:
                if self._stop.is_set():
                    return
                log.exception("could not claim a diagnosis job")
                job = None
            if job is None:
                self._wake.wait(self.poll_s)
                self._wake.clear()
                continue
            error = None
            try:
                done = run_diagnosis(access, job["session_id"], self.mode, job["job_id"])
                log.info("diagnosis %s of session %s done (%s)", job["job_id"], job["session_id"], "; ".join(done))
            except BaseException as exc:  # ImportError while a part is missing, or its bug
                error = f"{type(exc).__name__}: {exc}"
                log.warning("diagnosis %s of session %s failed: %s\n%s", job["job_id"], job["session_id"], error,
                            traceback.format_exc(limit=3))
            try:
                writer.run(lambda s: s.finish_job(job["job_id"], error=error))
            except Exception:
                log.exception("could not record the end of job %s", job["job_id"])
