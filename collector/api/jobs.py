"""The job queue: `/api/v1/jobs` lists jobs and queues a diagnosis or a replay; its worker side
(tracefix.replay.worker, `tracefix worker`) claims the oldest queued job of a kind, renews
the claim's lease while it works and finishes the job (409 once the lease is lost)."""
from __future__ import annotations

import logging

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tracefix.collector.api.bodies import read_model
from tracefix.collector.api.context import ApiContext
from tracefix.collector.api.errors import error
from tracefix.collector.api.paging import listed, page_params, query_params, streamed_page
from tracefix.collector.jobs import JOB_KINDS, JOB_STATES
from tracefix.collector.responses import JSONResponse
from tracefix.collector.schemas.bodies import ClaimRequest, FinishRequest, JobRequest, LeaseRequest
from tracefix.collector.schemas.queries import LIST_ORDERS

log = logging.getLogger("tracefix.collector")


def routes(api: ApiContext) -> list[Route]:
    collector, cfg, store, write = api.collector, api.cfg, api.store, api.write

    async def jobs(request: Request) -> Response:
        if request.method == "POST":
            data = await read_model(request, JobRequest, 1 << 20)
            kind = data.kind or "diagnosis"
            options = {k: v for k, v in (("steps", data.steps), ("edit", data.edit)) if v is not None}
            job = await write(lambda s: s.enqueue_job(data.session_id, reason=data.reason or "api",
                                                      kind=kind, options=options or None))
            if kind == "diagnosis":
                collector.wake_diagnosis()
            return JSONResponse(job, status_code=201)
        q = query_params(request)
        offset, limit = page_params(q, default_limit=100)
        state, session_id, kind = q.choice("state", JOB_STATES), q.text("session_id"), q.choice("kind", JOB_KINDS)
        job_ids = q.texts("job_id", most=1000)  # only those jobs: how a page polls the jobs it shows
        newest_first = q.choice("order", LIST_ORDERS, default="oldest") == "newest"

        def read() -> tuple[int, list[dict]]:
            return (store.count_jobs(state, session_id, kind, job_ids=job_ids),
                    store.list_jobs(state, session_id, kind=kind, job_ids=job_ids, offset=offset, limit=limit,
                                    newest_first=newest_first))

        total, rows = await run_in_threadpool(read)
        return streamed_page("jobs", total, offset, listed(rows, offset))

    # --- the worker side of jobs (tracefix.replay.worker) -------------------------------------
    async def claim_job(request: Request) -> Response:
        data = await read_model(request, ClaimRequest, 1 << 16)
        worker, kind = data.worker[:200], data.kind
        if kind == "diagnosis" and cfg.diagnose == "off":  # the operator turned diagnoses off: none is handed out
            return Response(status_code=204)
        job = await write(lambda s: s.claim_job(kind, worker, data.lease_s))
        if job is None:
            return Response(status_code=204)
        if kind == "diagnosis":  # what the job runs is this collector's --diagnose, as when it runs one itself
            job["diagnose"] = cfg.diagnose
        log.info("%s job %s of session %s claimed by %s", kind, job["job_id"], job["session_id"], worker)
        return JSONResponse(job)

    async def renew_lease(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        data = await read_model(request, LeaseRequest, 1 << 16)
        worker = data.worker[:200]
        if await write(lambda s: s.renew_lease(job_id, worker, data.lease_s)):
            return JSONResponse({"job_id": job_id, "renewed": True})
        return error(409, f"job {job_id!r} is not running under a lease of worker {worker!r}", code="lease_lost",
                     job_id=job_id, renewed=False)

    async def finish_job(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        data = await read_model(request, FinishRequest, 1 << 20)
        worker, state, err = data.worker[:200], data.state, data.error
        finished = await write(lambda s: s.finish_job(job_id, error=err and err[:20_000], state=state, worker=worker))
        if not finished:
            return error(409, f"job {job_id!r} is not running under worker {worker!r}", code="lease_lost",
                         job_id=job_id, finished=False)
        if state != "done":
            log.warning("job %s %s by %s: %s", job_id, state, worker, err)
        return JSONResponse({"job_id": job_id, "finished": True})

    return [
        Route("/api/v1/jobs", api.guarded(jobs), methods=["GET", "POST"]),
        Route("/api/v1/jobs/claim", api.guarded(claim_job), methods=["POST"]),
        Route("/api/v1/jobs/{job_id}/lease", api.guarded(renew_lease), methods=["POST"]),
        Route("/api/v1/jobs/{job_id}/finish", api.guarded(finish_job), methods=["POST"]),
    ]
