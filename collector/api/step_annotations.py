"""A person's marks on a session's steps: `POST /api/v1/sessions/{id}/annotations` (open to the
ingest token, as feedback is: an instrumented app sends its users' marks) records a label, a
score and a comment on one step; a negative mark raises an alert and queues a diagnosis, as
a session's thumbs-down does. `GET` lists the session's marks."""
from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tracefix.collector.api.bodies import read_model
from tracefix.collector.api.context import ApiContext
from tracefix.collector.api.errors import error
from tracefix.collector.auth import INGEST
from tracefix.collector.marks import check_mark
from tracefix.collector.responses import JSONResponse
from tracefix.collector.schemas.bodies import AnnotationRequest
from tracefix.collector.store import UnknownSession, UnknownStep

PATH = "/api/v1/sessions/{session_id:session_id}/annotations"


def routes(api: ApiContext) -> list[Route]:
    collector, store, write = api.collector, api.store, api.write

    async def annotate(request: Request) -> Response:
        sid = request.path_params["session_id"]
        data = await read_model(request, AnnotationRequest, 1 << 20)
        try:  # NaN / Infinity (or 1e400): refused before anything is written
            check_mark(data.score, data.label)
        except ValueError as exc:
            return error(422, str(exc), parameter="score")
        try:
            mark = await write(lambda s: s.add_annotation(sid, data.step, label=data.label, score=data.score,
                                                          comment=data.comment, source="api",
                                                          **collector.feedback_options()))
        except UnknownStep as exc:
            return error(422, str(exc), parameter="step")
        collector.feedback_recorded(mark)  # the alert's webhooks and the diagnosis are woken
        return JSONResponse(mark, status_code=201)

    async def annotations(request: Request) -> Response:
        sid = request.path_params["session_id"]
        marks = await run_in_threadpool(store.list_annotations, sid)
        if marks is None:
            raise UnknownSession(sid)
        return JSONResponse({"session_id": sid, "annotations": marks})

    post, get = api.guarded(annotate, INGEST), api.guarded(annotations)

    async def marks(request: Request) -> Response:
        # one route for both methods (each under its own token scope), so a 405 on the path
        # lists both in Allow
        return await (post if request.method == "POST" else get)(request)

    return [Route(PATH, marks, methods=["GET", "POST"])]
