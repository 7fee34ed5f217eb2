"""What `/openapi.json` says a request body may be is what the server takes: a body the
published schema admits is not refused as invalid (400), and one it refuses is refused
before anything is stored, never coerced (`false` is no integer, `"1"` no number). The
result routes keep a document as posted, so a lax check there stored documents that broke
their own schema on the way back out."""
from __future__ import annotations

import json
import uuid
from urllib.parse import quote

import pytest
from collector_support import http, strict_json
from jsonschema import Draft202012Validator

SESSION = "/api/v1/sessions/{session_id}"


@pytest.fixture(scope="module")
def spec(collector) -> dict:
    status, body, _ = http("GET", collector.match["http"] + "/openapi.json")
    assert status == 200
    return strict_json(body)


@pytest.fixture()
def session(api) -> str:
    """A stored session of its own (nothing stored for it but its messages)."""
    sid = f"agree/{uuid.uuid4().hex[:8]}"
    api.import_sessions([{"session_id": sid, "messages": [{"role": "user", "content": "hi"}]}])
    return sid


def published(spec: dict, template: str, method: str, status: str | None = None) -> Draft202012Validator:
    """The validator of the request body (or of the `status` answer) the document publishes."""
    op = spec["paths"][template][method.lower()]
    holder = op["requestBody"] if status is None else op["responses"][status]
    return Draft202012Validator({**holder["content"]["application/json"]["schema"], "components": spec["components"]})


# (path template, method, body, admitted by the published schema): bodies a lax reader would
# coerce, numbers written as JSON may write them, and the rules the issue found the schema silent on
CASES = [
    (f"{SESSION}/replay", "PUT", {"rounds": False}, False),
    (f"{SESSION}/replay", "POST", {"rounds": "3"}, False),
    (f"{SESSION}/replay", "PUT", {"stages": {"attribution": 1}}, False),
    (f"{SESSION}/replay", "PUT", {"notes": [1]}, False),
    (f"{SESSION}/replay", "PUT", {"rounds": 2.0, "notes": ["2.0 is a whole number"], "mine": {"x": [1]}}, True),
    (f"{SESSION}/analysis", "PUT", {"llm_used": 1}, False),
    (f"{SESSION}/analysis", "POST", {"llm_used": "true"}, False),
    (f"{SESSION}/analysis", "PUT", {"created_at": 5}, False),
    (f"{SESSION}/analysis", "PUT", {"frontier": {"hgt": ["1"]}}, False),
    (f"{SESSION}/analysis", "PUT", {"frontier": {"hgt": [1, 2.0]}, "llm_used": False}, True),
    ("/api/v1/feedback", "POST", {"session_id": "{sid}", "score": "1"}, False),
    ("/api/v1/feedback", "POST", {"session_id": "{sid}", "score": True}, False),
    ("/api/v1/jobs", "POST", {"session_id": "{sid}", "kind": "replay", "steps": [15596.0]}, True),
    ("/api/v1/jobs", "POST", {"session_id": "{sid}", "kind": "replay", "steps": [True]}, False),
    ("/api/v1/jobs", "POST", {"session_id": "{sid}", "kind": "replay", "steps": ["3"]}, False),
    ("/api/v1/jobs", "POST", {"session_id": "{sid}", "edit": "use ACC-2"}, False),  # an edit is for a replay
    ("/api/v1/jobs", "POST", {"session_id": "{sid}", "kind": "diagnosis", "steps": [1]}, False),
    ("/api/v1/jobs", "POST", {"session_id": "{sid}", "kind": "replay", "steps": [1, 2], "edit": "x"}, False),
    ("/api/v1/jobs", "POST", {"session_id": "{sid}", "kind": "replay", "steps": [1], "edit": "  "}, False),
    ("/api/v1/jobs", "POST", {"session_id": "{sid}", "kind": "replay", "steps": [1], "edit": "use ACC-2"}, True),
    ("/api/v1/jobs/{job_id}/lease", "POST", {"worker": " "}, False),
    ("/api/v1/jobs/{job_id}/lease", "POST", {"worker": "\t\n"}, False),
    ("/api/v1/jobs/{job_id}/lease", "POST", {"worker": " w "}, True),
    ("/api/v1/jobs/{job_id}/finish", "POST", {"worker": " ", "state": "done"}, False),
    ("/api/v1/import", "POST", [{"session_id": "{new}"}], False),
    ("/api/v1/import", "POST", [{"session_id": "{new}", "messages": None, "steps": None}], False),
    ("/api/v1/import", "POST", [{"session_id": "{new}", "steps": []}], True),
    ("/api/v1/import", "POST", {"sessions": [{"session_id": "{new}", "messages": []}], "skip_stored": "yes"}, False),
]


def filled(value, sid: str, new: str):
    if isinstance(value, str):
        return value.replace("{sid}", sid).replace("{new}", new)
    if isinstance(value, list):
        return [filled(v, sid, new) for v in value]
    if isinstance(value, dict):
        return {k: filled(v, sid, new) for k, v in value.items()}
    return value


@pytest.mark.parametrize(("template", "method", "body", "admitted"), CASES,
                         ids=[f"{m} {t.rsplit('/', 1)[-1]} {b}"[:80] for t, m, b, _ in CASES])
def test_the_server_takes_a_body_exactly_when_its_published_schema_does(collector, api, spec, session, template,
                                                                        method, body, admitted):
    new = f"agree-new-{uuid.uuid4().hex[:8]}"
    body = filled(body, session, new)
    assert published(spec, template, method).is_valid(body) is admitted, "the case's premise"
    path = template.replace("{session_id}", quote(session, safe="")).replace("{job_id}", "no-such-job")
    status, answer, _ = http(method, collector.match["http"] + path, json.dumps(body).encode())
    if admitted:
        # taken (the lease and finish of an unknown job answer 409 after reading the body)
        assert status in (200, 201, 409), (status, answer[:300])
    else:
        assert status == 400, (status, answer[:300])
        assert strict_json(answer)["code"] == "invalid_body"
    if template.startswith(SESSION):
        kind = template.rsplit("/", 1)[-1]
        got, stored, _ = http("GET", collector.match["http"] + path)
        if not admitted:
            assert got == 404, stored[:300]  # nothing was stored
        else:  # what comes back out is what the schema of the GET describes
            assert got == 200
            document = strict_json(stored)
            errors = [e.message for e in published(spec, template, "GET", "200").iter_errors(document)]
            assert errors == [], errors
            assert document == body, kind  # kept as posted
    if template == "/api/v1/import":
        assert api.get_session(new) is None if not admitted else api.get_session(new) is not None
