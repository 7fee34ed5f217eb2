"""A replay child hands its spans to the runner (tracefix.replay.span_handoff): the child
writes them to its folder and leaves without waiting on the collector, and the runner posts
them before anything reads the child's session. None may be lost on the way."""
from __future__ import annotations

import datetime as dt
import email.utils
import http.server
import os
import socket
import threading
import time

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tracefix.replay import runner, span_handoff
from tracefix.replay.pipeline import diagnose


def _span_ids(bodies: list[bytes]) -> list[str]:
    ids = []
    for body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        ids += [span.span_id.hex() for resource in request.resource_spans for scope in resource.scope_spans
                for span in scope.spans]
    return ids


def test_every_span_a_replay_child_hands_over_is_stored_before_its_run_is_judged(lab):
    workdir = lab.workdir / "handoff"
    with lab.access() as access:
        result = diagnose(access, lab.session_id, allowed_modules=["tracefix.demo"], llm=False, runs=1,
                          replay_key=lab.replay_key, save=False, otlp_endpoint=lab.serve_url,
                          hypotheses=[{"step": lab.fault_step}], overrides={"base_url": lab.follow_url},
                          workdir=workdir, keep=True)
        (run,) = result["hypotheses"][0]["runs"]
        assert run["error"] is None and run["success"] is not None, run
        written = _span_ids(span_handoff.batches(workdir / run["child_session_id"] / span_handoff.SPANS_FILE))
        # the child wrote its spans to its folder: one per LLM call and tool, the session's root
        assert len(written) == len(set(written)) > sum(run["counts"].values()), (len(written), run["counts"])
        stored = {span["span_id"] for span in access.get_spans(run["child_session_id"])}
    assert stored == set(written)
    assert run["phases"]["deliver"] >= 0


def test_spans_the_collector_never_takes_are_an_error_not_a_silent_loss(tmp_path):
    spans = tmp_path / span_handoff.SPANS_FILE
    body = ExportTraceServiceRequest().SerializeToString()
    spans.write_bytes(span_handoff._LENGTH.pack(len(body)) + body + span_handoff._LENGTH.pack(99) + b"cut")
    assert span_handoff.batches(spans) == [body]  # a record cut short by a killed child is left out
    with socket.socket() as closed:  # a port nothing listens on: the connection is refused, then retried
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    delivery = span_handoff.deliver(spans, f"http://127.0.0.1:{port}", timeout_s=0.5)
    assert delivery.error and "did not reach the collector" in delivery.error, delivery
    assert span_handoff.deliver(tmp_path / "none-written", f"http://127.0.0.1:{port}") == span_handoff.Delivery()


def _request(*spans: tuple[str, bytes, bytes]) -> bytes:
    """An export of spans (name, trace id, span id) of one session."""
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for name, trace_id, span_id in spans:
        span = scope.spans.add(name=name, trace_id=trace_id, span_id=span_id, start_time_unix_nano=1_700_000_000_000_000_000,
                               end_time_unix_nano=1_700_000_001_000_000_000)
        span.attributes.add(key="session.id", value=AnyValue(string_value="s-handoff-" + trace_id.hex()[:8]))
    return request.SerializeToString()


def test_spans_the_collector_rejects_are_the_runs_note_and_the_rest_are_stored(lab, tmp_path):
    trace_id = os.urandom(16)
    # a span whose id is 4 bytes: the collector stores its sibling and answers a partial success
    bodies = [_request(("kept-span", trace_id, os.urandom(8)), ("span-with-a-short-id", trace_id, b"\x01\x02\x03\x04"))]
    # the runner delivers what the child's folder holds: the child appends to what is there
    job = runner.ReplayJob(key="h", run_index=0, cassette={"entrypoint": "nowhere:main", "inputs": {}},
                           intervention=None, parent_session_id="s-parent", otlp_endpoint=lab.serve_url,
                           allowed_modules=[], timeout_s=60)
    workdir = tmp_path / job.child_session_id
    workdir.mkdir()
    fd = os.open(workdir / span_handoff.SPANS_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    for body in bodies:
        span_handoff.append(fd, body)
    os.close(fd)
    run = runner.run_one(job, workdir)
    note = run["spans_rejected"]
    assert note and "rejected 1 of the replay's spans" in note and "span-with-a-short-id" in note, run
    assert "kept-span" not in note and "did not reach" not in (run["error"] or ""), run
    with lab.access() as access:
        stored = [span["name"] for span in access.get_spans("s-handoff-" + trace_id.hex()[:8])]
    assert stored == ["kept-span"]


class _Refusing(http.server.BaseHTTPRequestHandler):
    """A receiver that answers its first export 503 with a Retry-After date, then takes them."""

    seen: list[float] = []
    retry_after = ""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append(time.monotonic())
        busy = len(self.seen) == 1
        self.send_response(503 if busy else 200)
        if busy:
            self.send_header("Retry-After", self.retry_after)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize("retry_after", ["date", "2"])
def test_delivery_waits_what_a_retry_after_asks_in_seconds_or_as_a_date(tmp_path, retry_after):
    spans = tmp_path / span_handoff.SPANS_FILE
    body = _request(("a-span", os.urandom(16), os.urandom(8)))
    spans.write_bytes(span_handoff._LENGTH.pack(len(body)) + body)
    # a date three seconds on (HTTP dates count whole seconds: the wait is two to three seconds)
    asked = email.utils.format_datetime(dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=3), usegmt=True)
    handler = type("Handler", (_Refusing,), {"seen": [], "retry_after": asked if retry_after == "date" else "2"})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        delivery = span_handoff.deliver(spans, f"http://127.0.0.1:{server.server_address[1]}", timeout_s=10)
    finally:
        server.shutdown()
        server.server_close()
    assert delivery == span_handoff.Delivery()
    first, second = handler.seen
    assert second - first > 0.9, second - first  # not the 0.1 s backoff of an answer without one
