"""A replay child's spans, handed to the process that ran it instead of sent by the child.

A child that exports its own spans waits, as it leaves, for the collector to acknowledge
them: a fresh connection and the collector's ingest of the batch (about 30 ms of a 250 ms
child on the 2-core machine). Instead the child appends its spans (replay.child_tracing),
encoded as the OTLP/HTTP request bodies its exporter would have sent (after tracefix's
redaction and signing, which stay in front), to a file in its private folder (`SPANS_FILE`);
the runner, which waits for the child's end anyway, posts them to the collector the child
was told of (`deliver`) before anything reads the child's session. A batch the collector does
not take is retried as an OTLP exporter would (429, 502-504, a refused connection), then
reported as the run's error; spans it answers it could not store (an OTLP partial success)
are the run's note: spans are never dropped without a word.
"""
from __future__ import annotations

import os
import struct
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

SPANS_FILE = "spans.otlp"
_LENGTH = struct.Struct(">I")  # each record: its length, then one ExportTraceServiceRequest
RETRYABLE = {429, 502, 503, 504}
DELIVERY_TIMEOUT_S = 30.0


def append(fd: int, body: bytes) -> None:
    """Append one record (`body`, an ExportTraceServiceRequest) to the open spans file `fd`."""
    record = memoryview(_LENGTH.pack(len(body)) + body)
    while record:  # a regular file takes it all at once; a short write is finished
        record = record[os.write(fd, record):]


def batches(path: str | Path) -> list[bytes]:
    """The request bodies a child wrote to `path`; a record cut short (a child killed while
    writing it) is left out."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    out, at = [], 0
    while at + _LENGTH.size <= len(data):
        (size,) = _LENGTH.unpack_from(data, at)
        if at + _LENGTH.size + size > len(data):
            break
        out.append(data[at + _LENGTH.size:at + _LENGTH.size + size])
        at += _LENGTH.size + size
    return out


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of `endpoint` (a base URL, as the child's exporter reads it)."""
    return endpoint if endpoint.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"


@dataclass
class Delivery:
    """What became of a child's spans: `error` when a batch never reached the collector (the
    run's error), else the spans the collector answered it could not store (`rejected`, an
    OTLP partial success, and its `reasons`): the rest are stored, and the run says so."""

    error: str | None = None
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)

    @property
    def note(self) -> str | None:
        if not self.rejected:
            return None
        why = "; ".join(dict.fromkeys(r for r in self.reasons if r)) or "no reason given"
        return f"the collector rejected {self.rejected} of the replay's spans: {why}"


def _partial_success(answer: bytes) -> tuple[int, str]:
    """The rejected spans and the message of an export's protobuf answer (0 for none, or an
    answer that is no ExportTraceServiceResponse)."""
    if not answer:
        return 0, ""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    try:
        partial = ExportTraceServiceResponse.FromString(answer).partial_success
    except DecodeError:
        return 0, ""
    return partial.rejected_spans, partial.error_message


def deliver(path: str | Path, endpoint: str, headers: dict | None = None,
            timeout_s: float = DELIVERY_TIMEOUT_S) -> Delivery:
    """Post every batch in `path` to the collector at `endpoint`, retrying what an OTLP
    exporter retries within `timeout_s` (waiting what a Retry-After asks, when it asks)."""
    from tracefix.client_tls import client_context

    url = traces_url(endpoint)
    context = client_context() if url.startswith("https:") else None
    deadline = time.monotonic() + timeout_s
    delivery = Delivery()
    for body in batches(path):
        backoff = 0.1
        while True:
            request = urllib.request.Request(url, data=body, method="POST", headers={
                **(headers or {}), "Content-Type": "application/x-protobuf"})
            wait = backoff
            try:
                with urllib.request.urlopen(request, timeout=max(1.0, deadline - time.monotonic()),
                                            context=context) as answer:
                    rejected, reason = _partial_success(answer.read())
                delivery.rejected += rejected
                delivery.reasons += [reason] if rejected else []
                break
            except urllib.error.HTTPError as exc:
                if exc.code not in RETRYABLE:
                    delivery.error = f"the collector refused the replay's spans: HTTP {exc.code}"
                    return delivery
                from tracefix.collector.alerts import retry_after_s

                error = f"HTTP {exc.code}"
                asked = retry_after_s(exc.headers.get("Retry-After"), cap=timeout_s)
                wait = backoff if asked is None else asked
            except (urllib.error.URLError, OSError) as exc:
                error = str(getattr(exc, "reason", exc))
            if time.monotonic() + wait > deadline:
                delivery.error = f"the replay's spans did not reach the collector within {timeout_s:.0f} s: {error}"
                return delivery
            time.sleep(wait)
            backoff = min(backoff * 2, 2.0)
    return delivery
