"""OTLP/HTTP requests that look like an agent with long prompts: each span an LLM call whose
answer is a long message, many spans a request (tests/collector/test_large_exports.py and
bench/large_exports.py send them).

The text is prose with ids and numbers in it, cut at random places from one pool, so every
message is different (the store keeps one copy of a message it has already) and compresses
as much as what agents write, not more."""
from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans

WORDS = ("the account balance transfer customer request pending review approved checked ledger statement "
         "branch savings checking routing payment invoice amount total limit daily").split()


def prose(rng: random.Random, chars: int) -> str:
    """Banking-flavoured prose with ids and numbers in it, as agents and tools write."""
    out, size = [], 0
    while size < chars:
        r = rng.random()
        word = (f"ACC-{rng.randint(1000, 9999)}" if r < 0.03 else str(rng.randint(10, 99999)) if r < 0.08
                else rng.choice(WORDS))
        out.append(word + ("\n" if rng.random() < 0.02 else " "))
        size += len(word) + 1
    return "".join(out)[:chars]


def _attribute(key: str, value: str | int) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value))


class LongPrompts:
    """Requests of one session of LLM spans, each with a `message_kb` KB answer, `calls_per_step`
    of them a step."""

    def __init__(self, session_id: str, *, message_kb: int, calls_per_step: int = 1, seed: int = 7,
                 pool_mb: int = 4):
        self.session_id = session_id
        self.message_chars = message_kb * 1024
        self.calls_per_step = calls_per_step
        self.rng = random.Random(seed)
        self.pool = prose(self.rng, max(pool_mb << 20, 2 * self.message_chars))
        self.spans = 0

    def request(self, spans: int) -> bytes:
        """The next `spans` LLM spans of the session as one protobuf export request."""
        resource = ResourceSpans()
        resource.resource.attributes.append(_attribute("service.name", "long-prompts"))
        scope = resource.scope_spans.add()
        scope.scope.name = "long-prompts"
        trace_id, start = os.urandom(16), time.time_ns()
        for i in range(spans):
            step, self.spans = self.spans // self.calls_per_step, self.spans + 1
            at = self.rng.randrange(0, len(self.pool) - self.message_chars)
            answer = self.pool[at:at + self.message_chars]
            span = scope.spans.add(trace_id=trace_id, span_id=os.urandom(8), name="chat agent-model", kind=3,
                                   start_time_unix_nano=start + i * 1000, end_time_unix_nano=start + i * 1000 + 500)
            span.attributes.extend([
                _attribute("gen_ai.operation.name", "chat"), _attribute("tracefix.session.id", self.session_id),
                _attribute("tracefix.step", step),
                _attribute("gen_ai.input.messages", json.dumps([{"role": "user", "content": f"step {step}"}])),
                _attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "content": answer}]))])
        return ExportTraceServiceRequest(resource_spans=[resource]).SerializeToString()


def export(http: str, body: bytes, *, token: str | None = None, timeout: float = 120.0) -> tuple[int, bytes]:
    """POST one protobuf request to /v1/traces: (status, body)."""
    headers = {"Content-Type": "application/x-protobuf"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(http + "/v1/traces", data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def export_retrying(http: str, body: bytes, *, attempts: int = 5, pause_s: float = 0.5,
                    statuses: list[int] | None = None) -> bool:
    """Export as an OTLP exporter does: a 429 or 503 is tried again after a pause, up to
    `attempts` times. True once acknowledged; every answer is appended to `statuses`."""
    for _ in range(attempts):
        status, _ = export(http, body)
        if statuses is not None:
            statuses.append(status)
        if status == 200:
            return True
        if status not in (429, 503):
            return False
        time.sleep(pause_s)
    return False


def get(url: str) -> tuple[int, bytes]:
    """GET without a token: (status, body), an error status included."""
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def stored_steps(http: str, session_id: str) -> list[int]:
    """The step of every stored span of the session (one entry a span), through the spans
    route's pages (the long messages stay in the store)."""
    steps: list[int] = []
    offset = 0
    while offset is not None:
        status, body = get(f"{http}/api/v1/sessions/{session_id}/spans?offset={offset}&limit=1000")
        assert status == 200, (status, body[:300])
        page = json.loads(body)
        steps += [span["attributes"]["tracefix.step"] for span in page["spans"]]
        offset = page["page"]["next_offset"]
    return steps
