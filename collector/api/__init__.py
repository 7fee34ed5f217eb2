"""The HTTP side of `tracefix serve` (starlette): OTLP/HTTP `POST /v1/traces`, `/v1/logs`,
`/v1/metrics` and the JSON API.

`build_app` assembles one router per resource, each a module whose `routes(api)` lists its
routes: `service` (health, metrics, this API's description, the store's file), `ingest`
(OTLP/HTTP), `sessions` (a session's contents), `results` (its analysis, replay result and
report), `feedback` (feedback and the alerts it raised), `step_annotations` (people's marks on
steps), `dashboard` (charts over time), `documents` (import, training
sessions), `jobs` (the queue and its workers) and `genai_metrics` (the stored GenAI metric
points). What they share: `context` (the
collector, the token check every route but `/healthz` runs, the single writer), `bodies`
(reading a request's body), `paging` (query parameters and streamed pages) and `errors`.

Reads run on store cursors in the thread pool (one that runs out of the store's memory is
answered again with room: `read_room`); every write goes through the single writer.
JSON leaves through `responses.JSONResponse` (non-finite numbers become null), query
parameters and session ids in paths are read by `url_input`, request bodies are validated
by the models of `schemas.bodies` (described, with every answer, in `GET /openapi.json`,
tracefix.collector.openapi), every 4xx/5xx is `errors.error()`'s one shape, and every
answer carries the security headers of `responses.SecurityHeaders`.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware

from tracefix.collector import openapi
from tracefix.collector.api import dashboard, datasets, documents, feedback, ingest, jobs, results, service, sessions
from tracefix.collector.api import step_annotations
from tracefix.collector.api import genai_metrics
from tracefix.collector.api.context import ApiContext
from tracefix.collector.api.errors import http_error, internal_error
from tracefix.collector.api.read_room import RetryReadsWithRoom
from tracefix.collector.responses import SecurityHeaders
from tracefix.collector.url_input import SessionPaths

if TYPE_CHECKING:
    from tracefix.collector.server import Collector

log = logging.getLogger("tracefix.collector")


def build_app(collector: "Collector") -> Starlette:
    api = ApiContext(collector)
    routes = [*service.routes(api, lambda: route_table), *ingest.routes(api), *sessions.routes(api),
              *results.routes(api), *feedback.routes(api), *step_annotations.routes(api), *dashboard.routes(api),
              *documents.routes(api), *jobs.routes(api),
              *datasets.routes(api), *genai_metrics.routes(api)]
    route_table = [(r.path, r.methods) for r in routes]
    if openapi.undescribed(route_table):
        log.warning("routes missing from /openapi.json: %s", ", ".join(openapi.undescribed(route_table)))
    return Starlette(routes=routes, middleware=[Middleware(SecurityHeaders), Middleware(SessionPaths),
                                                Middleware(RetryReadsWithRoom, room=collector.read_room)],
                     exception_handlers={HTTPException: http_error, Exception: internal_error})
