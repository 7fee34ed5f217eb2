"""The diagnosis job: what `tracefix serve` runs for a thumbs-down session.

The collector's job runner (tracefix.collector.job_runner) claims queued diagnosis jobs
and calls :func:`run_diagnosis`, given to it by the composition root
(docs/architecture.md). It runs the analysis, which stores its result, and with `--diagnose
full` queues a replay job for a replayable session.

The collector never runs agent code: a session's recorded entrypoint is data that anyone
holding the ingest token can write. Replay jobs are claimed over the API by
`tracefix worker` processes that run beside the agent's own code and import only the
modules their operator allowed (`--allow-module`).
"""
from __future__ import annotations

from tracefix.analysis.pipeline import analyze_session


def run_diagnosis(access, session_id: str, mode: str, job_id: str) -> list[str]:
    """Run the analysis and, in `full` mode, queue the replay; returns what was done."""
    done = []
    analyze_session(access, session_id)  # stores the result
    done.append("analysis")
    if mode == "full":
        doc = access.get_session(session_id)
        if doc and doc.get("replayable") and doc.get("entrypoint"):
            replay = access.enqueue_job(session_id, reason=f"diagnosis {job_id}", kind="replay")
            done.append(f"replay job {replay['job_id']} queued for a tracefix worker")
        else:
            done.append("no replay (the session did not record a replayable entrypoint)")
    return done
