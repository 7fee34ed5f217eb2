"""What was found about a session: its analysis (contracts §3) and replay result (§5), read
(GET) and stored as posted (POST, PUT: checked against `schemas.bodies`' outline first), and
its root-cause report, rendered by the report part the composition root injects
(`collector.pipeline.report`; 404 where none is installed)."""
from __future__ import annotations

import logging

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from tracefix.collector import jsonsafe
from tracefix.collector.api.bodies import read_json
from tracefix.collector.api.context import ApiContext
from tracefix.collector.api.errors import error
from tracefix.collector.api.paging import query_params
from tracefix.collector.responses import REPORT_CSP, JSONResponse
from tracefix.collector.schemas.bodies import AnalysisResult, ReplayResult, parse_body
from tracefix.collector.store import UnknownSession

log = logging.getLogger("tracefix.collector")


def routes(api: ApiContext) -> list[Route]:
    collector, cfg, store, write = api.collector, api.cfg, api.store, api.write

    def result_routes(kind: str, model):
        async def get_result(request: Request) -> Response:
            sid = request.path_params["session_id"]
            result = await run_in_threadpool(getattr(store, f"get_{kind}"), sid)
            if result is None:
                return error(404, f"no {kind} stored for session {sid!r}")
            return JSONResponse(result)

        async def post_result(request: Request) -> Response:
            sid = request.path_params["session_id"]
            result = await read_json(request, cfg.max_body_bytes)
            parse_body(model, result)  # checked, then stored as posted
            if not await run_in_threadpool(store.session_exists, sid):
                raise UnknownSession(sid)
            await write(lambda s: getattr(s, f"save_{kind}")(sid, result))
            return JSONResponse({"session_id": sid, "saved": kind}, status_code=201)

        async def result_route(request: Request) -> Response:
            # one route for every method of the path, so a 405 there lists them all in Allow
            return await (post_result if request.method in ("POST", "PUT") else get_result)(request)

        return result_route

    analysis_route = result_routes("analysis", AnalysisResult)
    replay_route = result_routes("replay", ReplayResult)

    async def report(request: Request) -> Response:
        sid = request.path_params["session_id"]
        fmt = query_params(request).choice("format", ("html", "md"), default="html")
        try:
            if collector.pipeline.report is None:
                raise ImportError("this collector was started without one (run it as `tracefix serve`)")
            render_report = collector.pipeline.report()
        except ImportError as exc:
            return error(404, f"the report renderer is not available in this installation ({exc}); "
                              "install tracefix[report]")
        try:
            text = await run_in_threadpool(render_report, store, sid, fmt)
        except KeyError:
            raise UnknownSession(sid) from None
        except Exception as exc:  # the renderer's bug must not look like ours, nor kill the server
            log.warning("report of session %s failed: %s", sid, exc)
            return error(500, f"the report renderer failed: {type(exc).__name__}: {exc}")
        if fmt == "md":
            return Response(jsonsafe.utf8(text), media_type="text/markdown; charset=utf-8")
        return HTMLResponse(jsonsafe.utf8(text), headers={"Content-Security-Policy": REPORT_CSP})

    return [
        Route("/api/v1/sessions/{session_id:session_id}/analysis", api.guarded(analysis_route),
              methods=["GET", "POST", "PUT"]),
        Route("/api/v1/sessions/{session_id:session_id}/replay", api.guarded(replay_route),
              methods=["GET", "POST", "PUT"]),
        Route("/api/v1/sessions/{session_id:session_id}/report", api.guarded(report)),
    ]
