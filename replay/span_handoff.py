"""A replay child's spans, handed to the process that ran it instead of sent by the child.

A child that exports its own spans waits, as it leaves, for the collector to acknowledge
them: a fresh connection and the collector's ingest of the batch (about 30 ms of a 250 ms
child on the 2-core machine). Instead the child's exporter appends each batch, encoded as
the OTLP/HTTP request body it would have sent (after tracefix's redaction and signing, which
stay in front of it), to a file in the child's private folder (`SPANS_FILE`); the runner,
which waits for the child's end anyway, posts the batches to the collector the child was
told of (`deliver`) before anything reads the child's session. A batch the collector does
not take is retried as an OTLP exporter would (429, 502-504, a refused connection), then
reported as the run's error: spans are never dropped without a word.
"""
from __future__ import annotations

import os
import struct
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Sequence

SPANS_FILE = "spans.otlp"
_LENGTH = struct.Struct(">I")  # each record: its length, then one ExportTraceServiceRequest
RETRYABLE = {429, 502, 503, 504}
DELIVERY_TIMEOUT_S = 30.0


def file_exporter(path: str | Path) -> Any:
    """An OpenTelemetry span exporter appending each batch to `path` (`SPANS_FILE`)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class SpanFileExporter(SpanExporter):
        def __init__(self) -> None:
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            body = encode_spans(spans).SerializeToString()
            record = memoryview(_LENGTH.pack(len(body)) + body)
            while record:  # a regular file takes it all at once; a short write is finished
                record = record[os.write(self.fd, record):]
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            os.close(self.fd)

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    return SpanFileExporter()


def hand_over(handle: Any, path: str | Path) -> None:
    """Send what `handle` (tracefix.init()'s) exports to `path` instead of the collector:
    its exporters keep redaction and signing in front (RedactingSpanExporter.inner)."""
    for exporter in handle.exporters:
        exporter.inner = file_exporter(path)


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


def deliver(path: str | Path, endpoint: str, headers: dict | None = None,
            timeout_s: float = DELIVERY_TIMEOUT_S) -> str | None:
    """Post every batch in `path` to the collector at `endpoint`; None when all were taken,
    else why not (after retrying what an OTLP exporter retries, within `timeout_s`)."""
    from tracefix.client_tls import client_context

    url = traces_url(endpoint)
    context = client_context() if url.startswith("https:") else None
    deadline = time.monotonic() + timeout_s
    for body in batches(path):
        backoff = 0.1
        while True:
            request = urllib.request.Request(url, data=body, method="POST", headers={
                **(headers or {}), "Content-Type": "application/x-protobuf"})
            retry_after = None
            try:
                with urllib.request.urlopen(request, timeout=max(1.0, deadline - time.monotonic()),
                                            context=context) as answer:
                    answer.read()
                break
            except urllib.error.HTTPError as exc:
                if exc.code not in RETRYABLE:
                    return f"the collector refused the replay's spans: HTTP {exc.code}"
                error, retry_after = f"HTTP {exc.code}", exc.headers.get("Retry-After")
            except (urllib.error.URLError, OSError) as exc:
                error = str(getattr(exc, "reason", exc))
            wait = float(retry_after) if retry_after and retry_after.isdigit() else backoff
            if time.monotonic() + wait > deadline:
                return f"the replay's spans did not reach the collector within {timeout_s:.0f} s: {error}"
            time.sleep(wait)
            backoff = min(backoff * 2, 2.0)
    return None
