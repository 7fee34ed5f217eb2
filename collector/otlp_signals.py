"""The three OTLP signals the receivers take, each on the same path (decode beside the writer,
the writer's queue or the spool, partial success): traces, logs and metrics. A `Signal`
names what differs: its OTLP/HTTP path, its gRPC service, its request and response
messages, what its records are called and the partial-success field that counts the
rejected ones. What each is normalized into: `tracefix.collector.decoding`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class Signal:
    name: str  # "traces", "logs", "metrics": the spool's record and the decoder name it so
    noun: str  # what its records are called in error messages
    path: str  # OTLP/HTTP
    service: str  # OTLP/gRPC: its Export method is /<service>/Export
    request: Any  # the Export*ServiceRequest message type
    response: Any  # the Export*ServiceResponse message type
    rejected_field: str  # partial_success's count of rejected records
    top_field: str  # the request's one field, as OTLP/JSON names it

    @property
    def grpc_method(self) -> str:
        return f"/{self.service}/Export"


TRACES = Signal("traces", "spans", "/v1/traces", "opentelemetry.proto.collector.trace.v1.TraceService",
                ExportTraceServiceRequest, ExportTraceServiceResponse, "rejected_spans", "resourceSpans")
LOGS = Signal("logs", "log records", "/v1/logs", "opentelemetry.proto.collector.logs.v1.LogsService",
              ExportLogsServiceRequest, ExportLogsServiceResponse, "rejected_log_records", "resourceLogs")
METRICS = Signal("metrics", "data points", "/v1/metrics", "opentelemetry.proto.collector.metrics.v1.MetricsService",
                 ExportMetricsServiceRequest, ExportMetricsServiceResponse, "rejected_data_points", "resourceMetrics")
SIGNALS = (TRACES, LOGS, METRICS)
BY_NAME = {s.name: s for s in SIGNALS}
BY_GRPC_METHOD = {s.grpc_method: s for s in SIGNALS}
