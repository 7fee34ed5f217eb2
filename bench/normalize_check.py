"""Whether two versions of `normalize_request` make the same batches of the same requests,
byte for byte (bench/normalize.py --check): what a change that only makes normalization
cheaper must keep."""
from __future__ import annotations

import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "collector"))

from agent_spans import _kv, request, session_spans  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import Span  # noqa: E402
from secret_samples import ORDINARY, SAMPLES, SECRET_KEYS  # noqa: E402
from test_normalize_parity import cases  # noqa: E402

from tracefix.collector import otlp  # noqa: E402


def observed(batch) -> dict:
    """Everything a batch carries to the writer, in a form `==` compares exactly."""
    table = batch.span_arrow()
    return {
        "table": None if table is None else (table.schema, table.to_pydict()),
        "messages": list(batch.messages.items()),
        "sessions": [(sid, list(fields.items())) for sid, fields in batch.sessions.items()],
        "snapshots": [vars(s) for s in batch.snapshots], "evaluations": [vars(e) for e in batch.evaluations],
        "rejected": batch.rejected, "errors": batch.errors, "warnings": batch.warnings,
        "span_count": batch.span_count, "wire_bytes": batch.wire_bytes,
        "fallback_traces": sorted(batch.fallback_traces), "explicit_traces": list(batch.explicit_traces.items()),
    }


def _secret_request(rng: random.Random) -> ExportTraceServiceRequest:
    """Agent spans with the samples' secrets in messages, tool results, events, names, and
    under keys that name credentials, beside ordinary text that must survive."""
    spans = session_spans("secret-session", 6, rng, growing=True)
    for i, span in enumerate(spans):
        sample = SAMPLES[i % len(SAMPLES)]
        span.attributes.append(_kv("custom.note", f"{sample.text} {ORDINARY[i % len(ORDINARY)]}"))
        span.attributes.append(_kv(SECRET_KEYS[i % len(SECRET_KEYS)], sample.secret))
        if i % 3 == 1:
            span.name = f"chat {sample.text}"
            span.status.message = sample.text
            span.events.append(Span.Event(name=f"note {sample.text}", time_unix_nano=span.start_time_unix_nano,
                                          attributes=[_kv("detail", [sample.text, "plain"])]))
    return request(spans)


def _requests() -> list[tuple[str, object, dict]]:
    rng = random.Random(39)
    out = [(f"pinned {name}", req, kw) for name, (req, kw) in cases().items()]
    out.append(("growing histories", request(session_spans("growing", 40, rng, growing=True)), {}))
    out.append(("secrets", _secret_request(rng), {}))
    return out


def check_same_output(new, old, bodies: list[bytes]) -> str:
    """Raise SystemExit at the first request whose batches differ; else what was compared."""
    checked = 0
    labelled = [(f"bench body {i}", otlp.decode(body, otlp.PROTOBUF), {"wire_bytes": len(body)})
                for i, body in enumerate(bodies)]
    requests = labelled + _requests()
    for label, req, kw in requests:
        for scan in (True, False):
            a = observed(new(req, **kw, wire_may_hold_secret=scan))
            b = observed(old(req, **kw, wire_may_hold_secret=scan))
            if a != b:
                field = next(k for k in a if a[k] != b[k])
                raise SystemExit(f"{label} (secret scan {scan}): the batches differ in {field}")
        checked += a["span_count"] + a["rejected"]
    return f"same batches from both versions: {checked} spans of {len(requests)} requests, each with and without the scan"
