"""`GET /openapi.json` of a real `tracefix serve`: a valid OpenAPI 3.1 document that lists
every route the server answers, and real answers (successes and errors) that match the
schemas it publishes for them."""
from __future__ import annotations

import json
import re
import uuid
from urllib.parse import quote

import procs
import pytest
from collector_support import TOKEN, http, strict_json, tracer_provider
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from test_ingest import record_agent_session
from test_otlp_logs_metrics import meter_provider

from tracefix.collector.openapi import openapi_path, undescribed


@pytest.fixture(scope="module")
def served(tmp_path_factory, webhook):
    """A collector of its own: no diagnosis runs (the jobs stay queued for the worker routes)."""
    db = tmp_path_factory.mktemp("openapi") / "tracefix.duckdb"
    serve = procs.start_serve(db, "--token", TOKEN, "--webhook", webhook.url, "--diagnose", "off",
                              env={"TRACEFIX_TOKEN": ""})
    yield serve
    serve.stop()


@pytest.fixture(scope="module")
def spec(served) -> dict:
    status, body, headers = http("GET", served.match["http"] + "/openapi.json")
    assert status == 200 and headers["content-type"] == "application/json"
    return strict_json(body)


def test_the_document_is_valid_openapi_3_1(spec):
    validate(spec)  # raises on any violation of the OpenAPI 3.1 schema
    assert spec["openapi"].startswith("3.1.")


def test_the_document_lists_every_route_of_the_app(spec, tmp_path):
    from tracefix.collector.api import build_app
    from tracefix.collector.server import Collector, Config

    collector = Collector(Config(db=str(tmp_path / "routes.duckdb")))
    try:
        app = build_app(collector)
    finally:
        collector.decoder.close()
        collector.store.close()
    table = [(r.path, r.methods) for r in app.routes]
    assert undescribed(table) == []  # a route added to the app needs its entry in openapi.OPERATIONS
    assert undescribed([*table, ("/api/v1/new", {"GET", "HEAD"})]) == ["GET /api/v1/new"]
    served = {(openapi_path(r.path), m.lower()) for r in app.routes for m in r.methods - {"HEAD"}}
    documented = {(path, method) for path, ops in spec["paths"].items() for method in ops}
    assert served == documented
    # every JSON answer names its schema; every operation names the error shape as its default
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            assert op["responses"]["default"]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/ErrorBody"}, (path, method)
            for status, answer in op["responses"].items():
                media = answer.get("content", {}).get("application/json")
                if media is not None and (path, method) not in OWN_JSON:
                    assert media["schema"]["$ref"].startswith("#/components/schemas/"), (path, method, status)


# JSON answers whose schema is not ours to publish: this document, OTLP's Export*ServiceResponse
OWN_JSON = {("/openapi.json", "get"), ("/v1/traces", "post"), ("/v1/logs", "post"), ("/v1/metrics", "post")}


class Checker:
    """Sends real requests and checks each JSON answer against the schema the document
    publishes for its route, method and status."""

    def __init__(self, base: str, spec: dict):
        self.base, self.spec, self.checked = base, spec, set()
        self.unknown = {"default": {"content": {"application/json": {"schema": {
            "$ref": "#/components/schemas/ErrorBody"}}}}}

    def __call__(self, method: str, template: str, path: str | None = None, body=None, *, query: str = "",
                 token: str | None = TOKEN, expect: int = 200):
        url = self.base + (path or template) + (f"?{query}" if query else "")
        raw = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        status, answer, headers = http(method, url, raw, token=token)
        assert status == expect, (method, url, status, answer[:300])
        # a method or path the API does not have: the error shape all the same
        op = self.spec["paths"].get(template, {}).get(method.lower(), {"responses": self.unknown})
        documented = op["responses"].get(str(status)) or op["responses"]["default"]
        if status == 204:
            assert answer == b"" and "content" not in documented
            return None
        assert headers["content-type"].startswith("application/json"), (method, url)
        schema = documented["content"]["application/json"]["schema"]
        value = strict_json(answer)
        errors = sorted(Draft202012Validator({**schema, "components": self.spec["components"]}).iter_errors(value),
                        key=lambda e: list(e.absolute_path))
        assert not errors, (method, url, status, [f"{list(e.absolute_path)}: {e.message[:200]}" for e in errors[:5]])
        self.checked.add((template, method.lower(), status))
        return value


def test_real_answers_match_their_published_schemas(served, spec, webhook):
    base = served.match["http"]
    sid = f"oa/{uuid.uuid4().hex[:8]}"  # a `/` in the id: the path segment is percent-encoded
    provider = tracer_provider(served, "http", service="bank-demo")
    record_agent_session(provider.get_tracer("test"), sid)
    assert provider.force_flush(10_000)
    provider.shutdown()
    one = f"/api/v1/sessions/{quote(sid, safe='')}"
    s = "/api/v1/sessions/{session_id}"
    check = Checker(base, spec)

    check("GET", "/healthz", token=None)
    check("GET", "/api/v1/store")
    listed = check("GET", "/api/v1/sessions", query="limit=1000")
    assert sid in {row["session_id"] for row in listed["sessions"]}
    page = check("GET", s, one, query="limit=2&max_chars=50")
    assert page["page"]["next_offset"] == 2 and page["messages"]
    assert "messages" not in check("GET", s, one, query="content=keys")
    step = check("GET", f"{s}/steps/{{index}}", f"{one}/steps/3")
    assert step["step"]["tool_calls"][0]["error"]
    spans = check("GET", f"{s}/spans", f"{one}/spans", query="limit=5")
    assert len(spans["spans"]) == 5 and any("message_keys" in span for span in spans["spans"])
    texts = check("GET", f"{s}/messages", f"{one}/messages")
    key = texts["messages"][0]["key"]
    check("GET", f"{s}/messages/{{key}}", f"{one}/messages/{key}")

    imported = check("POST", "/api/v1/import", body={"sessions": [{
        "session_id": f"imp-{uuid.uuid4().hex[:6]}", "task": "reset my password", "outcome": "success",
        "messages": [{"role": "user", "content": "reset my password"}, {"role": "assistant", "content": "done"}]}]},
        expect=201)
    assert check("GET", "/api/v1/training_sessions")["sessions"]
    assert imported["session_ids"]

    metrics = meter_provider(served, "http", "openapi-app")  # a GenAI metric point in (an SDK exporter), read back
    metrics.get_meter("app").create_histogram("gen_ai.client.token.usage").record(3, {"gen_ai.token.type": "input"})
    metrics.shutdown()
    assert check("GET", "/api/v1/metrics", query="name=gen_ai.client.token.usage")["points"][0]["sum"] == 3

    recorded = check("POST", "/api/v1/feedback", body={"session_id": sid, "score": -1, "comment": "wrong"},
                     expect=201)
    assert recorded["alert_id"] and recorded["job_id"]
    webhook.wait_for(lambda j: j.get("alert_id") == recorded["alert_id"])
    alerts = check("GET", "/api/v1/alerts", query=f"session_id={quote(sid, safe='')}")
    assert alerts["alerts"][0]["deliveries"]
    mark = check("POST", f"{s}/annotations", f"{one}/annotations", body={"step": 3, "label": "wrong"}, expect=201)
    assert mark["negative"] and mark["score"] is None and mark["alert_id"]
    assert check("GET", f"{s}/annotations", f"{one}/annotations")["annotations"][0]["label"] == "wrong"
    assert check("GET", s, one)["annotations"][0]["step"] == 3
    chart = check("GET", "/api/v1/dashboard/{chart}", "/api/v1/dashboard/thumbs_down_rate", query="by=agent")
    assert chart["series"] and chart["series"][0]["points"]

    analysis = {"session_id": sid, "created_at": "2026-01-01T00:00:00Z", "model_version": None,
                "detectors": ["isolation_forest"], "notes": [], "llm_used": False,
                "scores": [{"step": 3, "isolation_forest": 0.9}], "frontier": {"isolation_forest": [3]},
                "graph": {"nodes": [], "edges": []}, "hypotheses": [{"rank": 1, "step": 3}]}
    replay = {"session_id": sid, "created_at": "2026-01-01T00:00:00Z", "rounds": 1, "stages": {}, "trials": [],
              "hypotheses": [{"id": "h-1", "step": 3, "verdict": "validated", "runs": []}]}
    for kind, result in (("analysis", analysis), ("replay", replay)):
        check("POST", f"{s}/{kind}", f"{one}/{kind}", body=result, expect=201)
        assert check("GET", f"{s}/{kind}", f"{one}/{kind}") == result  # stored and answered as posted
        check("PUT", f"{s}/{kind}", f"{one}/{kind}", body=result, expect=201)

    job = check("POST", "/api/v1/jobs", body={"session_id": sid, "kind": "replay", "steps": [3], "edit": "check"},
                expect=201)
    assert check("GET", "/api/v1/jobs", query="kind=replay")["jobs"]
    claimed = check("POST", "/api/v1/jobs/claim", body={"worker": "w1", "lease_s": 30})
    assert claimed["job_id"] == job["job_id"]
    check("POST", "/api/v1/jobs/claim", body={"worker": "w1"}, expect=204)
    lease, finish = "/api/v1/jobs/{job_id}/lease", "/api/v1/jobs/{job_id}/finish"
    check("POST", lease, f"/api/v1/jobs/{job['job_id']}/lease", body={"worker": "w1", "lease_s": 30})
    conflict = check("POST", lease, f"/api/v1/jobs/{job['job_id']}/lease", body={"worker": "w2"}, expect=409)
    assert conflict["code"] == "lease_lost" and conflict["renewed"] is False
    check("POST", finish, f"/api/v1/jobs/{job['job_id']}/finish", body={"worker": "w1", "state": "done"})
    conflict = check("POST", finish, f"/api/v1/jobs/{job['job_id']}/finish", body={"worker": "w1", "state": "done"},
                     expect=409)
    assert conflict["finished"] is False

    # datasets: the thumbs-down above made an item; a regression run's jobs and results in and out
    assert check("GET", "/api/v1/datasets")["datasets"][0]["thumbs_down"] == 1
    assert check("GET", "/api/v1/datasets/items", query="dataset=default")["items"][0]["kind"] == "thumbs-down"
    item = check("GET", "/api/v1/datasets/items", query="full=true")["items"][0]
    assert check("POST", "/api/v1/datasets/items", body={"dataset": "smoke", "session_ids": [sid]},
                 expect=201)["added"] == [sid]
    assert check("POST", "/api/v1/datasets/import", body={"dataset": "copy", "items": [item]},
                 expect=201)["added"] == [sid]
    queued = check("POST", "/api/v1/regress/queue", body={"run_id": "rg-1", "items": [["default", sid]]}, expect=201)
    assert len(queued["job_ids"]) == 1
    check("POST", "/api/v1/regress", body={"run_id": "rg-1", "session_id": sid, "result": {"verdict": "fixed"}},
          expect=201)
    assert check("GET", "/api/v1/regress", query="run_id=rg-1")["results"] == [{"verdict": "fixed"}]
    assert check("GET", "/api/v1/regress")["runs"][0]["run_id"] == "rg-1"

    # errors: one shape, whatever refused the request
    assert check("GET", "/api/v1/sessions", token="wrong", expect=401)["code"] == "unauthorized"
    assert check("GET", s, "/api/v1/sessions/no-such", expect=404)["code"] == "unknown_session"
    bad = check("GET", "/api/v1/sessions", query="limit=-1", expect=422)
    assert bad["code"] == "invalid_parameter" and bad["parameter"] == "limit"
    bad = check("POST", "/api/v1/feedback", body={"session_id": 5, "score": "very bad"}, expect=400)
    assert bad["code"] == "invalid_body" and {p["field"] for p in bad["detail"]} == {"session_id", "score"}
    assert check("POST", "/api/v1/feedback", body=b"not json", expect=400)["code"] == "bad_request"
    non_finite = json.dumps({"session_id": sid, "score": float("nan")}).encode()  # NaN: a number, not finite
    assert "finite" in check("POST", "/api/v1/feedback", body=non_finite, expect=422)["error"]
    assert check("POST", "/api/v1/feedback", body={"session_id": sid, "score": "nan"}, expect=400)["detail"]
    bad = check("POST", "/api/v1/jobs", body={"session_id": sid, "kind": "replay", "steps": ["1"]}, expect=400)
    assert bad["detail"][0]["field"] == "steps.0"
    assert check("POST", "/api/v1/jobs/claim", body={"worker": " ", "lease_s": True}, expect=400)["detail"]
    assert check("POST", "/api/v1/import", body=[{"messages": "not a list"}], expect=400)["code"] == "invalid_body"
    assert check("POST", f"{s}/analysis", f"{one}/analysis", body={"frontier": "x"}, expect=400)
    assert check("DELETE", "/api/v1/feedback", expect=405)["code"] == "method_not_allowed"
    assert check("GET", "/no/such/route", expect=404)["code"] == "not_found"

    # every JSON route was answered at least once, with a success
    json_routes = {(path, method) for path, ops in spec["paths"].items() for method, op in ops.items()
                   if any("schema" in (answer.get("content") or {}).get("application/json", {})
                          for status, answer in op["responses"].items() if re.fullmatch(r"2\d\d", status))}
    succeeded = {(path, method) for path, method, status in check.checked if status < 300 and path in spec["paths"]}
    assert json_routes - succeeded == set()


def test_an_unexpected_failure_is_a_500_in_the_error_shape_with_the_security_headers():
    """The collector's last-resort handler, on a Starlette app of one route that raises."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from tracefix.collector.api.errors import internal_error
    from tracefix.collector.responses import SecurityHeaders

    async def broken(request):
        raise RuntimeError("a bug")

    app = Starlette(routes=[Route("/broken", broken)], middleware=[Middleware(SecurityHeaders)],
                    exception_handlers={Exception: internal_error})
    answer = TestClient(app, raise_server_exceptions=False).get("/broken")
    assert answer.status_code == 500
    assert answer.json() == {"error": "internal error (RuntimeError)", "code": "internal"}
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["content-security-policy"].startswith("default-src 'none'")
