"""The diagnosis job runner of `tracefix serve`: threads that claim queued diagnosis jobs (one
per negative feedback) and run each with the diagnosis the composition root gave the
collector (tracefix.collector.pipeline; the analysis's `run_diagnosis` under `tracefix
serve`). A part that is missing or any exception marks the job failed, and the server keeps
serving.
"""
from __future__ import annotations

import logging
import threading
import traceback
from typing import TYPE_CHECKING, Callable

from tracefix.collector.pipeline import Diagnose
from tracefix.collector.threadnames import name_os_thread

if TYPE_CHECKING:
    from tracefix.collector.server import Collector

log = logging.getLogger("tracefix.collector.diagnosis")

MODES = ("off", "analysis", "full")


def _no_diagnosis_given() -> Diagnose:
    raise ImportError("this collector was started without a diagnosis (run it as `tracefix serve`)")


class DiagnosisJobRunner:
    """`workers` threads claim jobs one at a time (claiming goes through the writer, so two
    threads never run the same job). `diagnosis` loads the callable that runs one job. With
    no threads, the jobs wait for `tracefix worker --jobs diagnosis` processes (leased over the API)."""

    def __init__(self, collector: "Collector", diagnosis: Callable[[], Diagnose] | None = None, mode: str = "full",
                 poll_s: float = 2.0, workers: int = 1):
        if mode not in MODES:
            raise ValueError(f"--diagnose must be one of {', '.join(MODES)}")
        self.collector = collector
        self.diagnosis = diagnosis or _no_diagnosis_given
        self.mode = mode
        self.poll_s = poll_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, name=f"tracefix-diagnosis-{i}", daemon=True)
                         for i in range(workers)]  # 0: `tracefix worker --jobs diagnosis` runs them

    def start(self) -> "DiagnosisJobRunner":
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
                done = self.diagnosis()(access, job["session_id"], self.mode, job["job_id"])
                log.info("diagnosis %s of session %s done (%s)", job["job_id"], job["session_id"], "; ".join(done))
            except BaseException as exc:  # ImportError while a part is missing, or its bug
                error = f"{type(exc).__name__}: {exc}"
                log.warning("diagnosis %s of session %s failed: %s\n%s", job["job_id"], job["session_id"], error,
                            traceback.format_exc(limit=3))
            try:
                writer.run(lambda s: s.finish_job(job["job_id"], error=error))
            except Exception:
                log.exception("could not record the end of job %s", job["job_id"])
