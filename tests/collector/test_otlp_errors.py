"""OTLP/HTTP error answers in the request's encoding: to a protobuf request, every 4xx/5xx of
the OTLP paths is a protobuf `google.rpc.Status` (the specification's "Failures": the body
is a Status, Content-Type application/x-protobuf), with RetryInfo beside Retry-After where
the client should retry; a JSON request keeps the API's ErrorBody."""
from __future__ import annotations

import http.client
import urllib.parse

import pytest
from collector_support import TOKEN, otlp_error, strict_json
from google.rpc import code_pb2, status_pb2
from starlette.requests import Request
from test_ingest import _otlp_request

from tracefix.collector.api.errors import error, in_request_encoding

PROTOBUF, JSON = "application/x-protobuf", "application/json"


def send(collector, method: str, path: str, body: bytes, content_type: str, token: str | None = TOKEN,
         headers: dict | None = None) -> tuple[int, bytes, dict]:
    """One request on a raw connection, so a Content-Length may promise more than is sent."""
    url = urllib.parse.urlsplit(collector.match["http"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=20)
    try:
        conn.putrequest(method, path)
        sent = {"Content-Type": content_type, "Content-Length": str(len(body)), **(headers or {})}
        if token:
            sent["Authorization"] = f"Bearer {token}"
        for name, value in sent.items():
            conn.putheader(name, value)
        conn.endheaders(body if int(sent["Content-Length"]) == len(body) else None)
        resp = conn.getresponse()
        return resp.status, resp.read(), {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


# (what is wrong, how to send it, the status, words of the message, gRPC's code for the status)
CASES = [
    ("not protobuf", dict(body=b"\x0a\xff\xff\xff\xff\x0f junk"), 400, "protobuf", code_pb2.INVALID_ARGUMENT),
    ("wrong token", dict(token="wrong"), 401, "bearer token", code_pb2.UNAUTHENTICATED),
    ("too large", dict(headers={"Content-Length": str(100 << 20)}), 413, "limit", code_pb2.RESOURCE_EXHAUSTED),
    ("unknown encoding", dict(headers={"Content-Encoding": "br"}), 415, "Content-Encoding",
     code_pb2.INVALID_ARGUMENT),
    ("profiles not received", dict(path="/v1/profiles"), 404, "Not Found", code_pb2.NOT_FOUND),
    ("wrong method", dict(method="PUT"), 405, "Method Not Allowed", code_pb2.UNIMPLEMENTED),
]


@pytest.mark.parametrize(("what", "how", "status", "words", "code"), CASES, ids=[c[0] for c in CASES])
def test_a_protobuf_request_is_answered_a_protobuf_status(collector, what, how, status, words, code):
    body = how.get("body", _otlp_request("otlp-errors", 1))
    got, answer, headers = send(collector, how.get("method", "POST"), how.get("path", "/v1/traces"), body, PROTOBUF,
                                token=how.get("token", TOKEN), headers=how.get("headers"))
    assert got == status, answer[:300]
    assert headers["content-type"] == PROTOBUF
    parsed = status_pb2.Status.FromString(answer)
    assert words in parsed.message and parsed.code == code, parsed
    assert headers["x-content-type-options"] == "nosniff"  # the security headers stay
    # the same mistake sent as OTLP/JSON keeps the API's error shape
    json_body = b"{" if "body" in how else b"{}"
    got, answer, headers = send(collector, how.get("method", "POST"), how.get("path", "/v1/traces"), json_body, JSON,
                                token=how.get("token", TOKEN), headers=how.get("headers"))
    assert got == (400 if what == "not protobuf" else status), answer[:300]
    assert headers["content-type"] == JSON and strict_json(answer)["error"]


def protobuf_request() -> Request:
    return Request({"type": "http", "method": "POST", "path": "/v1/traces", "query_string": b"",
                    "headers": [(b"content-type", b"application/x-protobuf; charset=binary")]})


@pytest.mark.parametrize(("status", "headers", "delay"), [(503, {}, 1.0), (429, {"Retry-After": "3"}, 3.0)])
def test_a_status_that_says_when_to_retry_carries_retry_info_beside_retry_after(status, headers, delay):
    """503 (the store cannot take them now) and 429 (busy) as error() writes them: the Status
    has RetryInfo with the delay, and the Retry-After header stays (the HTTP exporters read it).
    429 under real back-pressure: tests/collector/test_backpressure.py and test_spool.py."""
    answer = in_request_encoding(protobuf_request(), error(status, "come back later", headers=headers))
    assert answer.status_code == status and answer.media_type == PROTOBUF
    assert answer.headers["retry-after"] == str(int(delay))
    assert otlp_error(bytes(answer.body), PROTOBUF) == ("come back later", delay)
    exact = in_request_encoding(protobuf_request(), error(429, "busy", retry_after_s=0.25,
                                                          headers={"Retry-After": "1"}))
    assert otlp_error(bytes(exact.body), PROTOBUF) == ("busy", 0.25)  # the exact delay, not the rounded header


def test_answers_that_are_no_errors_are_left_as_they_are():
    ok = error(200, "not an error")
    assert in_request_encoding(protobuf_request(), ok) is ok
