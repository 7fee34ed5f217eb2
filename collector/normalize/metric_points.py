"""OTLP metrics to rows: `normalize_metrics` maps an `ExportMetricsServiceRequest` to a `Batch`
whose `metric_points` the writer inserts into the metric_points table.

What is kept: the GenAI metrics (names starting `gen_ai.`: the client's
`gen_ai.client.token.usage` and `gen_ai.client.operation.duration`, a server's own), one
row per data point, as sent: a histogram's count, sum, min, max and buckets, a sum's or a
gauge's value, with the point's aggregation temporality (1 delta, 2 cumulative: a cumulative
point repeats what the ones before it counted). The attributes readers filter by most
(model, operation, token type, provider) get columns of their own. Other metrics are
acknowledged and not stored.
"""
from __future__ import annotations

import hashlib

import pyarrow as pa

from tracefix import semconv as sc
from tracefix.collector.normalize.batch import Batch
from tracefix.collector.normalize.dialects import INT64_MAX, text_or_none
from tracefix.collector.normalize.json_text import dumps_compact
from tracefix.collector.normalize.otlp_values import NO_LIMIT, attributes
from tracefix.collector.normalize.rejections import SpanRejected, reason_of, reject
from tracefix.collector.redact import redact_label, redact_span

GENAI_METRIC_PREFIX = "gen_ai."
TOKEN_TYPE = "gen_ai.token.type"
POINT_SCHEMA = pa.schema([
    ("point_key", pa.int64()), ("name", pa.string()), ("unit", pa.string()), ("kind", pa.string()),
    ("service", pa.string()), ("scope", pa.string()), ("resource", pa.string()), ("attributes", pa.string()),
    ("model", pa.string()), ("operation", pa.string()), ("token_type", pa.string()), ("provider", pa.string()),
    ("start_ns", pa.int64()), ("time_ns", pa.int64()), ("temporality", pa.int32()), ("value", pa.float64()),
    ("count", pa.int64()), ("sum", pa.float64()), ("min", pa.float64()), ("max", pa.float64()),
    ("bounds", pa.list_(pa.float64())), ("bucket_counts", pa.list_(pa.int64()))])
POINT_COLUMNS = POINT_SCHEMA.names


def points_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=POINT_SCHEMA)


def normalize_metrics(request, *, max_attribute_chars: int = NO_LIMIT, wire_bytes: int | None = None) -> Batch:
    """The GenAI metrics' data points of an ExportMetricsServiceRequest (see the module)."""
    batch = Batch(wire_bytes=wire_bytes or 0)
    for rm in request.resource_metrics:
        wanted = [(sm, m) for sm in rm.scope_metrics for m in sm.metrics if m.name.startswith(GENAI_METRIC_PREFIX)]
        if not wanted:
            continue
        try:
            resource = attributes(rm.resource.attributes, max_attribute_chars)
            redact_span(resource, [])
            resource_json = dumps_compact(resource, sort_keys=True)
        except Exception as exc:
            for _, metric in wanted:
                for _ in _points(metric)[1]:
                    reject(batch, f"a point of {metric.name[:100]!r}", f"its resource: {reason_of(exc)}")
            continue
        where = {"service": text_or_none(resource.get("service.name")), "resource": resource_json}
        for sm, metric in wanted:
            kind, points = _points(metric)
            common = {**where, "name": metric.name, "unit": metric.unit or None, "kind": kind,
                      "scope": redact_label(sm.scope.name) or None,
                      "temporality": getattr(getattr(metric, kind, None), "aggregation_temporality", 0) or None}
            for point in points:
                try:
                    batch.metric_points.append(_point_row(common, kind, point, max_attribute_chars))
                except Exception as exc:
                    reject(batch, f"a point of {metric.name[:100]!r}", reason_of(exc))
    return batch


def _points(metric) -> tuple[str, list]:
    """(kind, data points) of a metric, whichever kind it is."""
    kind = metric.WhichOneof("data")
    return (kind or "none"), (list(getattr(metric, kind).data_points) if kind else [])


def _point_row(common: dict, kind: str, point, max_chars: int) -> dict:
    attrs = attributes(point.attributes, max_chars)
    redact_span(attrs, [])
    if point.time_unix_nano > INT64_MAX or point.start_time_unix_nano > INT64_MAX:
        raise SpanRejected("timestamps beyond the year 2262")
    row = {**common, "attributes": dumps_compact(attrs, sort_keys=True),
           "model": text_or_none(attrs.get(sc.GEN_AI_RESPONSE_MODEL) or attrs.get(sc.GEN_AI_REQUEST_MODEL)),
           "operation": text_or_none(attrs.get(sc.GEN_AI_OPERATION_NAME)),
           "token_type": text_or_none(attrs.get(TOKEN_TYPE)),
           "provider": text_or_none(attrs.get(sc.GEN_AI_PROVIDER_NAME) or attrs.get("gen_ai.system")),
           "start_ns": point.start_time_unix_nano or None, "time_ns": point.time_unix_nano or None,
           "value": None, "count": None, "sum": None, "min": None, "max": None, "bounds": None,
           "bucket_counts": None}
    if kind in ("gauge", "sum"):
        row["value"] = point.as_double if point.WhichOneof("value") == "as_double" else float(point.as_int)
    elif kind in ("histogram", "exponential_histogram"):
        row.update(count=point.count, sum=point.sum if point.HasField("sum") else None,
                   min=point.min if point.HasField("min") else None, max=point.max if point.HasField("max") else None)
        if kind == "histogram":
            row.update(bounds=list(point.explicit_bounds), bucket_counts=list(point.bucket_counts))
    elif kind == "summary":
        row.update(count=point.count, sum=point.sum)
    digest = hashlib.blake2b(digest_size=8)
    for part in (row["resource"], row["scope"] or "", row["name"], row["attributes"]):
        digest.update(part.encode() + b"\0")
    digest.update(point.SerializeToString(deterministic=True))
    row["point_key"] = int.from_bytes(digest.digest(), "big", signed=True)
    return row
