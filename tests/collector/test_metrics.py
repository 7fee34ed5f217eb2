"""`GET /metrics`: a real `tracefix serve` takes real OTLP over HTTP and gRPC (stored spans, a
rejected span, refused requests, back-pressure), a thumbs-down whose webhook is down, a queued
job; its Prometheus text then counts each by the right amount."""
from __future__ import annotations

import threading
import time
import uuid

import grpc
import pytest
from collector_support import TOKEN, free_port
from prometheus_client.parser import text_string_to_metric_families
from test_ingest import post
from test_partial_success import export, good_chat, make_request, make_span, nested_messages

import procs

from tracefix.collector.access import HttpAccess


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    dead_hook = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens: every delivery fails
    # a queue of 1 span and no spool refuse any export that arrives while another waits:
    # back-pressure on demand (the spool's own counters: test_spool.py)
    p = procs.start_serve(tmp_path_factory.mktemp("metrics") / "m.duckdb", "--token", TOKEN, "--webhook", dead_hook,
                          "--diagnose", "off", "--max-queue-spans", "1", "--spool-max-mb", "0",
                          env={"TRACEFIX_TOKEN": ""})
    yield p
    p.stop()


def scrape(serve) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of one scrape."""
    status, body, headers = get(serve, "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain"), (status, body[:300])
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def get(serve, path: str, token: str | None = TOKEN):
    import urllib.error
    import urllib.request

    req = urllib.request.Request(serve.match["http"] + path,
                                 headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def value(metrics: dict, name: str, **labels) -> float:
    return metrics.get((name, tuple(sorted(labels.items()))), 0.0)


def burst(send, threads: int = 8, rounds: int = 4) -> list:
    """Send from several threads at once (so exports meet a non-empty queue); every answer."""
    answers, lock = [], threading.Lock()

    def worker():
        for _ in range(rounds):
            answer = send()
            with lock:
                answers.append(answer)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return answers


def session_request(sid: str, spans: int = 3):
    trace = uuid.uuid4().bytes
    return make_request([good_chat(sid, trace, n) for n in range(spans)])


def test_metrics_count_exports_refusals_backpressure_webhooks_and_jobs(serve):
    assert get(serve, "/metrics", token=None)[0] == 401  # behind the API token like the API
    before = scrape(serve)
    sid = f"metrics-{uuid.uuid4().hex[:8]}"

    # OTLP/HTTP: 3 spans stored; a body that is no protobuf and a request without token refused whole
    assert export(serve, session_request(sid), "protobuf")[0] == 200
    assert post(serve.match["http"] + "/v1/traces", b"\xff not protobuf")[0] == 400
    assert post(serve.match["http"] + "/v1/traces", session_request(sid).SerializeToString(), token=None)[0] == 401
    # OTLP/gRPC: 2 spans stored and 1 rejected (messages nested too deep) in one request
    trace = uuid.uuid4().bytes
    code, answer = export(serve, make_request([good_chat(sid, trace, 10), good_chat(sid, trace, 11),
                                               make_span(trace, 12, "chat deep", {
                                                   "gen_ai.operation.name": "chat", "tracefix.session.id": sid,
                                                   "gen_ai.input.messages": nested_messages(5000)})]), "grpc")
    assert code == grpc.StatusCode.OK and answer.partial_success.rejected_spans == 1

    # back-pressure: exports that meet a full queue are answered 429 / RESOURCE_EXHAUSTED
    body = session_request(f"{sid}-busy", 20).SerializeToString()
    http_answers = burst(lambda: export(serve, body, "protobuf")[0])
    grpc_answers = burst(lambda: export(serve, body, "grpc")[0])
    assert set(http_answers) <= {200, 429} and set(grpc_answers) <= {grpc.StatusCode.OK,
                                                                      grpc.StatusCode.RESOURCE_EXHAUSTED}
    http_busy, grpc_busy = http_answers.count(429), grpc_answers.count(grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert http_busy and grpc_busy, "no export met a full queue: the burst proves nothing"

    # a thumbs-down raises an alert whose webhook is down; a replay job waits for a worker
    api = HttpAccess(serve.match["http"], TOKEN)
    assert api.add_feedback(sid, -1, "wrong")["alert_id"]
    api.enqueue_job(sid, kind="replay")
    deadline = time.monotonic() + 15
    while not value(scrape(serve), "tracefix_webhook_deliveries_total", outcome="failed"):
        assert time.monotonic() < deadline, "no failed webhook delivery counted"
        time.sleep(0.1)

    first = scrape(serve)
    attempts = api.list_alerts(sid)[0]["deliveries"][0]["attempts"]
    after = scrape(serve)

    def moved(name, metrics=after, **labels):
        return value(metrics, name, **labels) - value(before, name, **labels)

    assert moved("tracefix_spans_accepted_total", protocol="http") == 3 + 20 * (len(http_answers) - http_busy)
    assert moved("tracefix_spans_accepted_total", protocol="grpc") == 2 + 20 * (len(grpc_answers) - grpc_busy)
    assert moved("tracefix_spans_rejected_total", protocol="grpc", reason="invalid") == 1
    assert moved("tracefix_spans_rejected_total", protocol="http", reason="invalid") == 0
    assert moved("tracefix_export_requests_refused_total", protocol="http", reason="invalid") == 1
    assert moved("tracefix_export_requests_refused_total", protocol="http", reason="unauthorized") == 1
    assert moved("tracefix_export_requests_backpressured_total", protocol="http") == http_busy
    assert moved("tracefix_export_requests_backpressured_total", protocol="grpc") == grpc_busy
    # every export that reached the writer is one transaction timed (merged ones share one)
    commits = moved("tracefix_writer_commit_seconds_count")
    assert 1 <= commits <= 2 + len(http_answers) - http_busy + len(grpc_answers) - grpc_busy
    assert value(after, "tracefix_writer_pending_spans") == 0
    assert value(after, "tracefix_jobs", kind="replay", state="queued") == \
        value(before, "tracefix_jobs", kind="replay", state="queued") + 1
    assert value(after, "tracefix_jobs", kind="diagnosis", state="running") == 0
    failed = "tracefix_webhook_deliveries_total"
    assert value(first, failed, outcome="failed") <= attempts <= value(after, failed, outcome="failed")
    assert moved(failed, outcome="delivered") == 0
