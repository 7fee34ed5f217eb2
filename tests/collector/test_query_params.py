"""Query parameters the store cannot use are a 422 naming the parameter, on every route
that reads one; good values keep working."""
from __future__ import annotations

import datetime as dt
import uuid

import pytest
from collector_support import http, strict_json
from test_ingest import _otlp_request, post


@pytest.fixture(scope="module")
def seeded(collector):
    sid = f"qp-{uuid.uuid4().hex[:8]}"
    assert post(collector.match["http"] + "/v1/traces", _otlp_request(sid, 1))[0] == 200
    return sid


BAD = [
    ("/api/v1/sessions", "limit", "-1"),
    ("/api/v1/sessions", "limit", "ten"),
    ("/api/v1/sessions", "limit", "1e3"),
    ("/api/v1/sessions", "offset", "-5"),
    ("/api/v1/sessions", "offset", "1e23"),
    ("/api/v1/sessions", "offset", "99999999999999999999"),
    ("/api/v1/sessions", "offset", "9223372036854775808"),
    ("/api/v1/sessions", "until", "-1e400"),
    ("/api/v1/sessions", "since", "1e400"),
    ("/api/v1/sessions", "since", "nan"),
    ("/api/v1/sessions", "since", "garbage"),
    ("/api/v1/sessions", "since", "2024-13-45"),
    ("/api/v1/sessions", "until", "1e30"),
    ("/api/v1/sessions", "until", "0001-01-01"),
    ("/api/v1/sessions", "feedback", "sideways"),
    ("/api/v1/training_sessions", "criterion", "vibes"),
    ("/api/v1/sessions/{sid}/report", "format", "pdf"),
]


@pytest.mark.parametrize(("route", "name", "value"), BAD)
def test_bad_query_parameter_is_422_naming_it(collector, seeded, route, name, value):
    url = f"{collector.match['http']}{route.format(sid=seeded)}?{name}={value}"
    status, body, _ = http("GET", url)
    assert status == 422, body[:300]
    answer = strict_json(body)
    assert answer["parameter"] == name and repr(name) in answer["error"], answer


def test_good_query_parameters_still_work(collector, api, seeded):
    base = collector.match["http"] + "/api/v1/sessions"
    status, body, _ = http("GET", base + "?limit=0")
    assert status == 200 and strict_json(body)["sessions"] == []
    status, body, _ = http("GET", base + "?limit=5000")
    assert status == 200 and strict_json(body)["limit"] == 1000  # clamped, as documented
    status, body, _ = http("GET", base + "?offset=9223372036854775807")
    assert status == 200 and strict_json(body)["sessions"] == []
    yesterday = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1))
    for since in (yesterday.isoformat().replace("+00:00", "Z"), str(int(yesterday.timestamp()))):
        listed = api.list_sessions(since=since, limit=1000)
        assert seeded in {s["session_id"] for s in listed}, since
    before = api.list_sessions(until=str(int(yesterday.timestamp())), limit=1000)
    assert seeded not in {s["session_id"] for s in before}


EMPTY = [  # one parameter of each kind on each route that reads them, sent as `name=`
    ("/api/v1/sessions", "limit"), ("/api/v1/sessions", "feedback"), ("/api/v1/sessions", "since"),
    ("/api/v1/sessions", "service"), ("/api/v1/sessions/{sid}", "max_chars"), ("/api/v1/sessions/{sid}", "content"),
    ("/api/v1/sessions/{sid}/spans", "offset"), ("/api/v1/sessions/{sid}/messages", "limit"),
    ("/api/v1/sessions/{sid}/report", "format"), ("/api/v1/training_sessions", "criterion"),
    ("/api/v1/jobs", "state"), ("/api/v1/jobs", "job_id"), ("/api/v1/alerts", "session_id"),
    ("/api/v1/alerts", "order"),
]


@pytest.mark.parametrize(("route", "name"), EMPTY)
def test_an_empty_query_parameter_is_422_naming_it(collector, seeded, route, name):
    """`limit=` is not "no limit given": a client that wrote it meant a value, and silently
    answering the default would hide its bug (the web UI's forms, which send blank filters
    for "any", read their own parameters and keep accepting them)."""
    url = f"{collector.match['http']}{route.format(sid=seeded)}?{name}="
    status, body, _ = http("GET", url)
    assert status == 422, body[:300]
    answer = strict_json(body)
    assert answer["parameter"] == name and "empty" in answer["error"], answer
    # the same parameter left out, or given a value among others, still works
    status, body, _ = http("GET", f"{collector.match['http']}{route.format(sid=seeded)}")
    assert status == 200, body[:300]
    if name == "job_id":  # a repeatable parameter: one empty value among others is refused too
        assert http("GET", f"{url}&{name}=x")[0] == 422
