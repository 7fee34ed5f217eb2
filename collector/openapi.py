"""`GET /openapi.json`: the API described as OpenAPI 3.1, built from the models of
`tracefix.collector.schemas` (its bodies, queries and answers) and the table of operations below.

`document(routes)` walks the app's own route table, so the document lists every route the
server answers; each should have an entry in OPERATIONS (`undescribed(routes)` names those
that have none: the server logs them, tests/collector/test_openapi.py fails on them). Schemas are pydantic's JSON Schema (2020-12,
which OpenAPI 3.1 uses as is) under `components/schemas`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from tracefix.collector.charts import CHARTS
from tracefix.collector.schemas import answers, bodies, datasets, queries
from tracefix.collector.auth import API, INGEST

JSON = "application/json"
REF = "#/components/schemas/{model}"


@dataclass(frozen=True)
class Operation:
    summary: str
    ok: dict[int, type[BaseModel] | tuple[str, ...]]  # status -> JSON model, or the media types of another answer
    body: type[BaseModel] | tuple[str, ...] | None = None  # a JSON model, or the media types of another body
    query: type[BaseModel] | None = None
    errors: dict[int, type[BaseModel]] = field(default_factory=dict)  # besides those every route may answer
    scope: str | None = API  # the bearer token it needs (tracefix.collector.auth); None: no token
    description: str = ""
    error_media: tuple[str, ...] = ()  # what its errors may be besides an ErrorBody (OTLP: a protobuf Status)


def _fails(*statuses: int) -> dict[int, type[BaseModel]]:
    return {status: answers.ErrorBody for status in statuses}


SESSION = "/api/v1/sessions/{session_id:session_id}"
OTLP_MEDIA = ("application/x-protobuf", JSON)  # OTLP/HTTP: the answer in the request's encoding


def _otlp_export(signal: str, request: str, stored: str) -> Operation:
    """The OTLP/HTTP export of logs or metrics: answered as /v1/traces is."""
    return Operation(f"OTLP/HTTP {signal} export", {200: OTLP_MEDIA}, body=OTLP_MEDIA, scope=INGEST,
                     errors=_fails(400, 408, 413, 415, 429, 503), error_media=("application/x-protobuf",),
                     description=f"An {request}, answered as /v1/traces is. {stored}")


OPERATIONS: dict[tuple[str, str], Operation] = {
    ("/healthz", "GET"): Operation("Liveness and write progress", {200: answers.Health}, scope=None,
                                   errors={503: answers.Health},
                                   description="503, with the same body, while the store cannot write"),
    ("/openapi.json", "GET"): Operation("This document", {200: (JSON,)}),
    ("/v1/traces", "POST"): Operation(
        "OTLP/HTTP trace export", {200: OTLP_MEDIA}, body=OTLP_MEDIA, scope=INGEST,
        errors=_fails(400, 408, 413, 415, 429, 503), error_media=("application/x-protobuf",),
        description="An ExportTraceServiceRequest as protobuf or OTLP/JSON (opentelemetry-proto); answered "
                    "with an ExportTraceServiceResponse in the request's encoding, partial success included. "
                    "An error answer to a protobuf request is a protobuf google.rpc.Status (its message, and "
                    "RetryInfo beside Retry-After on 429 and 503); to any other request, an ErrorBody."),
    ("/v1/logs", "POST"): _otlp_export(
        "logs", "ExportLogsServiceRequest",
        "GenAI events (event names starting gen_ai.) are stored, their messages shown on their LLM span's step; "
        "other records are acknowledged and not stored."),
    ("/v1/metrics", "POST"): _otlp_export(
        "metrics", "ExportMetricsServiceRequest",
        "The data points of GenAI metrics (names starting gen_ai.) are stored (GET /api/v1/metrics); others are "
        "acknowledged and not stored."),
    ("/metrics", "GET"): Operation("The collector's own telemetry (Prometheus text format)", {200: ("text/plain",)}),
    ("/api/v1/store", "GET"): Operation("The store's file, for token holders", {200: answers.StoreInfo}),
    ("/api/v1/sessions", "GET"): Operation("Sessions, newest first", {200: answers.SessionList},
                                           query=queries.SessionListQuery, errors=_fails(422)),
    (SESSION, "GET"): Operation("One page of a session (contracts §1b)", {200: answers.SessionPage},
                                query=queries.SessionPageQuery, errors=_fails(404, 422)),
    (f"{SESSION}/spans", "GET"): Operation("A page of the session's spans (streamed)", {200: answers.SpansPage},
                                           query=queries.SpansQuery, errors=_fails(404, 422)),
    (f"{SESSION}/steps/{{index}}", "GET"): Operation("One step uncut", {200: answers.StepAnswer},
                                                     errors=_fails(404, 422)),
    (f"{SESSION}/messages", "GET"): Operation("A page of the session's stored message texts (streamed)",
                                              {200: answers.MessagesPage}, query=queries.PageQuery,
                                              errors=_fails(404, 422)),
    (f"{SESSION}/messages/{{key}}", "GET"): Operation("One message uncut", {200: answers.MessageAnswer},
                                                      errors=_fails(404, 422)),
    (f"{SESSION}/analysis", "GET"): Operation("The session's stored analysis", {200: bodies.AnalysisResult},
                                              errors=_fails(404)),
    (f"{SESSION}/analysis", "POST"): Operation("Store an analysis", {201: answers.ResultSaved},
                                               body=bodies.AnalysisResult, errors=_fails(400, 404, 413)),
    (f"{SESSION}/analysis", "PUT"): Operation("Store an analysis", {201: answers.ResultSaved},
                                              body=bodies.AnalysisResult, errors=_fails(400, 404, 413)),
    (f"{SESSION}/replay", "GET"): Operation("The session's stored replay result", {200: bodies.ReplayResult},
                                            errors=_fails(404)),
    (f"{SESSION}/replay", "POST"): Operation("Store a replay result", {201: answers.ResultSaved},
                                             body=bodies.ReplayResult, errors=_fails(400, 404, 413)),
    (f"{SESSION}/replay", "PUT"): Operation("Store a replay result", {201: answers.ResultSaved},
                                            body=bodies.ReplayResult, errors=_fails(400, 404, 413)),
    (f"{SESSION}/report", "GET"): Operation("The session's report: HTML, or Markdown with format=md",
                                            {200: ("text/html", "text/markdown")}, query=queries.ReportQuery,
                                            errors=_fails(404, 422)),
    ("/api/v1/feedback", "POST"): Operation(
        "Record feedback on a session", {201: answers.FeedbackRecorded}, body=bodies.FeedbackRequest, scope=INGEST,
        errors=_fails(400, 404, 422, 429, 503),
        description="A score below the alert threshold raises an alert (webhooks) and queues a diagnosis."),
    (f"{SESSION}/annotations", "POST"): Operation(
        "Mark one step of a session (label, score, comment)", {201: answers.AnnotationRecorded},
        body=bodies.AnnotationRequest, scope=INGEST, errors=_fails(400, 404, 422, 429, 503),
        description="A negative mark (a score below the alert threshold, or a negative label alone) raises an alert "
                    "and queues a diagnosis, as a session's thumbs-down does; the diagnosis ranks the step first. "
                    "422: no step of that number, or a non-finite score."),
    (f"{SESSION}/annotations", "GET"): Operation("The marks on a session's steps, oldest first",
                                                 {200: answers.AnnotationList}, errors=_fails(404)),
    ("/api/v1/dashboard/{chart}", "GET"): Operation(
        "One dashboard chart over time, per service, model, agent or tool", {200: answers.DashboardChart},
        query=queries.DashboardQuery, errors=_fails(422),
        description="Read from the stored sessions and spans (the sessions replays ran left out), one query per chart."),
    ("/api/v1/import", "POST"): Operation("Import message-log sessions", {201: answers.Imported},
                                          body=bodies.ImportRequest, errors=_fails(400, 413)),
    ("/api/v1/training_sessions", "GET"): Operation("Sessions to train the detectors on",
                                                    {200: answers.TrainingSessions}, query=queries.TrainingQuery,
                                                    errors=_fails(422)),
    ("/api/v1/jobs", "GET"): Operation("Jobs", {200: answers.JobList}, query=queries.JobsQuery),
    ("/api/v1/jobs", "POST"): Operation("Queue a diagnosis or a replay", {201: answers.Job}, body=bodies.JobRequest,
                                        errors=_fails(400, 404)),
    ("/api/v1/jobs/claim", "POST"): Operation(
        "A worker claims the oldest queued job of its kind (replay by default)", {200: answers.Job, 204: ()},
        body=bodies.ClaimRequest, errors=_fails(400), description="204 (no body) when no job is queued."),
    ("/api/v1/jobs/{job_id}/lease", "POST"): Operation("Renew a claimed job's lease", {200: answers.LeaseRenewed},
                                                       body=bodies.LeaseRequest,
                                                       errors={400: answers.ErrorBody, 409: answers.LeaseConflict}),
    ("/api/v1/jobs/{job_id}/finish", "POST"): Operation("Finish a claimed job", {200: answers.JobFinished},
                                                        body=bodies.FinishRequest,
                                                        errors={400: answers.ErrorBody, 409: answers.FinishConflict}),
    ("/api/v1/alerts", "GET"): Operation("Alerts and their webhook deliveries", {200: answers.AlertList},
                                         query=queries.AlertsQuery),
    ("/api/v1/metrics", "GET"): Operation("Stored data points of GenAI metrics, oldest first",
                                          {200: answers.MetricPoints}, query=queries.MetricPointsQuery,
                                          errors=_fails(422)),
    ("/api/v1/datasets", "GET"): Operation("Datasets of sessions", {200: datasets.DatasetList}),
    ("/api/v1/datasets/items", "GET"): Operation("Dataset items (contracts §8)", {200: datasets.DatasetItems},
                                                 query=datasets.DatasetItemsQuery, errors=_fails(422)),
    ("/api/v1/datasets/items", "POST"): Operation("Add stored sessions to a dataset", {201: datasets.DatasetChanged},
                                                  body=datasets.DatasetAddRequest, errors=_fails(400, 404)),
    ("/api/v1/datasets/import", "POST"): Operation("Import exported dataset items", {201: datasets.DatasetChanged},
                                                   body=datasets.DatasetImportRequest, errors=_fails(400, 413)),
    ("/api/v1/regress", "GET"): Operation("Regression runs, or one run's results", {200: datasets.RegressAnswer},
                                          query=datasets.RegressQuery, errors=_fails(422)),
    ("/api/v1/regress", "POST"): Operation("Store one item's regression result", {201: datasets.RegressSaved},
                                           body=datasets.RegressResultRequest, errors=_fails(400)),
    ("/api/v1/regress/queue", "POST"): Operation("Queue a regression run's items as regress jobs",
                                                 {201: datasets.RegressQueued}, body=datasets.RegressQueueRequest,
                                                 errors=_fails(400)),
}

UNDESCRIBED = Operation("(not described yet: add it to tracefix.collector.openapi.OPERATIONS)", {200: (JSON,)})

PATH_PARAMETERS = {
    "session_id": ({"type": "string"}, "the session's id, percent-encoded as one path segment (`/` as %2F)"),
    "index": ({"type": "string", "pattern": "^[0-9]{1,10}$"}, "a step number"),
    "key": ({"type": "string", "pattern": "^[0-9a-f]{16}$"}, "a message key: 16 lowercase hex digits"),
    "job_id": ({"type": "string"}, "the job's id"),
    "chart": ({"type": "string", "enum": list(CHARTS)}, "which chart"),
}


def openapi_path(template: str) -> str:
    """A Starlette path template as OpenAPI writes it: `{session_id:session_id}` -> `{session_id}`."""
    return re.sub(r"\{(\w+)(?::\w+)?\}", r"{\1}", template)


def _media(kind: type[BaseModel] | tuple[str, ...], refs: dict, mode: str = "serialization") -> dict:
    if isinstance(kind, tuple):  # not described here (OTLP protobuf, HTML, ...), or no content at all
        return {"content": {media: {} for media in kind}} if kind else {}
    return {"content": {JSON: {"schema": refs[(kind, mode)]}}}


def _operation(op: Operation, path: str, method: str, refs: dict, query: dict) -> dict:
    out: dict = {"summary": op.summary, "operationId": f"{method.lower()}_{_slug(path)}"}
    if op.description:
        out["description"] = op.description
    params = [{"name": name, "in": "path", "required": True, "schema": schema, "description": text}
              for name in re.findall(r"\{(\w+)", path)
              for schema, text in [PATH_PARAMETERS.get(name, ({"type": "string"}, name))]]
    if op.query is not None:
        params += query[op.query]
    if params:
        out["parameters"] = params
    if op.body is not None:
        out["requestBody"] = {"required": True, **_media(op.body, refs, "validation")}
    responses: dict = {}
    for status, kind in sorted(op.ok.items()):
        responses[str(status)] = {"description": "success" if kind else "no content", **_media(kind, refs)}
    errors = {**({401: answers.ErrorBody} if op.scope else {}), **op.errors}
    for status, model in [*sorted(errors.items()), ("default", answers.ErrorBody)]:
        answer = _media(model, refs)
        answer["content"].update({media: {} for media in op.error_media})
        responses[str(status)] = {"description": _ERROR_TEXT.get(status, "error"), **answer}
    out["responses"] = responses
    out["security"] = [{"bearer": []}] if op.scope else []
    return out


_ERROR_TEXT: dict[int | str, str] = {
    400: "the body is not JSON or does not match its schema", 401: "missing or wrong bearer token",
    404: "unknown session, or nothing stored there", 408: "the body arrived too slowly",
    409: "the job is no longer this worker's", 413: "the body is too large",
    415: "unsupported Content-Type", 422: "a query parameter or value the API cannot use",
    429: "busy: retry after Retry-After", 503: "the collector cannot store now",
    "default": "any other error"}


def _slug(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", path.lower()).strip("_") or "root"


def _query_parameters(model: type[BaseModel]) -> list[dict]:
    schema = model.model_json_schema()
    return [{"name": name, "in": "query", "required": False, "schema": _as_query(prop),
             **({"description": prop["description"]} if "description" in prop else {})}
            for name, prop in schema["properties"].items()]


def _as_query(prop: dict) -> dict:
    """A query parameter's schema as the API reads it (url_input.QueryParams): a value or
    absent, never null, and never empty (`name=` is a 422), a repeated one's values too."""
    prop = {k: v for k, v in prop.items() if k != "title" and not (k == "default" and v is None)}
    kept = [branch for branch in prop.pop("anyOf", []) if branch != {"type": "null"}]
    if len(kept) == 1:
        prop.update(kept[0])
    elif kept:
        prop["anyOf"] = kept
    for schema in (prop, prop.get("items", {})):
        if schema.get("type") == "string" and "enum" not in schema:
            schema.setdefault("minLength", 1)
    return prop


def undescribed(routes: Iterable) -> list[str]:
    """`METHOD path` of every route of `routes` ((path template, methods)) that has no
    Operation in OPERATIONS (tests/collector/test_openapi.py requires none)."""
    return [f"{method} {template}" for template, methods in routes for method in sorted(set(methods) - {"HEAD"})
            if (template, method) not in OPERATIONS]


def operations(routes: Iterable) -> list[tuple[str, str, Operation]]:
    """(path template, method, Operation) of every method of `routes`; a route without an
    entry in OPERATIONS is listed all the same, as undescribed."""
    return [(template, method, OPERATIONS.get((template, method), UNDESCRIBED))
            for template, methods in routes for method in sorted(set(methods) - {"HEAD"})]


def document(routes: Iterable, version: str) -> dict:
    """The OpenAPI document of `routes` ((path template, methods) of the app's routes)."""
    chosen = operations(routes)
    models = {(answers.ErrorBody, "serialization")}
    for _, _, op in chosen:
        models |= {(m, "serialization") for m in [*op.ok.values(), *op.errors.values()] if not isinstance(m, tuple)}
        if op.body is not None and not isinstance(op.body, tuple):
            models.add((op.body, "validation"))
    refs, defs = models_json_schema(sorted(models, key=lambda m: (m[0].__name__, m[1])), ref_template=REF)
    query = {op.query: _query_parameters(op.query) for _, _, op in chosen if op.query is not None}
    paths: dict = {}
    for template, method, op in chosen:
        path = openapi_path(template)
        paths.setdefault(path, {})[method.lower()] = _operation(op, path, method, refs, query)
    return {
        "openapi": "3.1.0",
        "info": {"title": "tracefix collector API", "version": version,
                 "description": "Every 4xx/5xx answer is an ErrorBody: {\"error\": text, \"code\": name, ...}. "
                                "See docs/contracts.md for the documents."},
        "paths": paths,
        "components": {"schemas": defs.get("$defs", {}),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description":
                                                      "the API token (--token) opens every route; the ingest token "
                                                      "(--ingest-token) opens /v1/traces and /api/v1/feedback"}}},
    }
