"""The diagnosis worker: runs queued jobs (one per negative feedback) inside `tracefix serve`.

A job runs the analysis (`tracefix.analysis.pipeline.analyze_session`) and, when the
session is replayable and `--diagnose full`, the replay pipeline
(`tracefix.replay.pipeline.diagnose`). Both are imported lazily; a missing part or any
exception marks the job failed with the error, and the server keeps serving. They get an
access object bound to this process's store, so their writes go through the single writer.
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


def run_diagnosis(access, session_id: str, mode: str) -> list[str]:
    """Run the configured stages for one session; returns the stages that ran."""
    ran = []
    from tracefix.analysis.pipeline import analyze_session

    result = analyze_session(access, session_id)
    if isinstance(result, dict):
        access.save_analysis(session_id, result)
    ran.append("analysis")
    if mode == "full":
        doc = access.get_session(session_id)
        if doc and doc.get("replayable"):
            from tracefix.replay.pipeline import diagnose

            replay = diagnose(access, session_id)
            if isinstance(replay, dict):
                access.save_replay(session_id, replay)
            ran.append("replay")
    return ran


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
        access.otlp_endpoint = self.collector.http_url  # where replay children export their spans
        while not self._stop.is_set():
            try:
                job = writer.run(lambda s: s.claim_job())
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
                ran = run_diagnosis(access, job["session_id"], self.mode)
                log.info("diagnosis %s of session %s done (%s)", job["job_id"], job["session_id"], ", ".join(ran))
            except BaseException as exc:  # ImportError while a part is missing, or its bug
                error = f"{type(exc).__name__}: {exc}"
                log.warning("diagnosis %s of session %s failed: %s\n%s", job["job_id"], job["session_id"], error,
                            traceback.format_exc(limit=3))
            try:
                writer.run(lambda s: s.finish_job(job["job_id"], error=error))
            except Exception:
                log.exception("could not record the end of job %s", job["job_id"])
