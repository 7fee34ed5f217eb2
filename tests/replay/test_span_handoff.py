"""A replay child hands its spans to the runner (tracefix.replay.span_handoff): the child
writes them to its folder and leaves without waiting on the collector, and the runner posts
them before anything reads the child's session. None may be lost on the way."""
from __future__ import annotations

import socket

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracefix.replay import span_handoff
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
    error = span_handoff.deliver(spans, f"http://127.0.0.1:{port}", timeout_s=0.5)
    assert error and "did not reach the collector" in error, error
    assert span_handoff.deliver(tmp_path / "none-written", f"http://127.0.0.1:{port}") is None
