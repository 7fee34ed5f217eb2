"""The collector's own telemetry: `GET /metrics` in the Prometheus text format.

Every `Collector` has a registry of its own (not prometheus_client's global one), so several
collectors in one process count apart. Counters move once per export request (or writer
transaction, or webhook delivery), never once per span: the ingest hot path pays a few
dictionary look-ups per request.

Counted, by protocol (`http`, `grpc`):
- spans acknowledged (`tracefix_spans_accepted_total`: stored, or fsynced to the spool),
  spans rejected one by one inside an
  otherwise answered request (`tracefix_spans_rejected_total`, reason `invalid`: normalize
  refused them; `database`: the store did);
- whole requests refused (`tracefix_export_requests_refused_total`, reason from the answer:
  `invalid`, `unauthorized`, `too_large`, `unavailable`, ...), and those answered 429 /
  RESOURCE_EXHAUSTED, which exporters retry after backing off
  (`tracefix_export_requests_backpressured_total`);
- requests and spans the writer's queue could not take and the spool did
  (`tracefix_spooled_requests_total`, `tracefix_spooled_spans_total`), beside gauges of what
  the spool holds (`tracefix_spool_bytes` of `tracefix_spool_budget_bytes`,
  `tracefix_spool_pending_requests`, `tracefix_spool_pending_spans`).
On a DuckLake store, the seconds its locks were held and waited for (`LakeLocks`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import grpc
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from tracefix.collector.jobs import JOB_KINDS

if TYPE_CHECKING:
    from tracefix.collector.normalize import Batch
    from tracefix.collector.server import Collector
    from tracefix.collector.writer import Refused

# A whole request's refusal, named by the answer it got
HTTP_REFUSAL_REASONS = {400: "invalid", 401: "unauthorized", 408: "too_slow", 413: "too_large",
                        415: "unsupported_media_type", 503: "unavailable"}
GRPC_REFUSAL_REASONS = {grpc.StatusCode.INVALID_ARGUMENT: "invalid", grpc.StatusCode.UNAUTHENTICATED: "unauthorized",
                        grpc.StatusCode.UNAVAILABLE: "unavailable"}
# job states a dashboard watches; each is reported for every kind, 0 included, so a series
# does not vanish when its last job leaves the state
WATCHED_JOB_STATES = ("queued", "running", "failed")
# writer transactions take ~1 ms (a small export) to seconds (20,000 merged spans, a checkpoint stall)
COMMIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class CollectorMetrics:
    def __init__(self, collector: "Collector"):
        self.collector = collector
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.spans_accepted = Counter("tracefix_spans_accepted",
                                      "Spans acknowledged (stored, or fsynced to the spool), by receiving protocol",
                                      ["protocol"], registry=r)
        self.spans_rejected = Counter("tracefix_spans_rejected",
                                      "Spans rejected one by one (OTLP partial success), by protocol and reason",
                                      ["protocol", "reason"], registry=r)
        self.requests_refused = Counter("tracefix_export_requests_refused",
                                        "Export requests refused whole, by protocol and reason",
                                        ["protocol", "reason"], registry=r)
        self.requests_backpressured = Counter(
            "tracefix_export_requests_backpressured",
            "Export requests answered 429 / RESOURCE_EXHAUSTED (the exporter retries later), by protocol",
            ["protocol"], registry=r)
        Gauge("tracefix_writer_pending_spans", "Spans queued for the writer, not yet committed",
              registry=r).set_function(lambda: collector.writer.pending_spans)
        self.spooled_requests = Counter("tracefix_spooled_requests",
                                        "Export requests the writer's queue could not take, acknowledged once "
                                        "fsynced to the spool, by protocol", ["protocol"], registry=r)
        self.spooled_spans = Counter("tracefix_spooled_spans", "Spans of the spooled export requests, by protocol",
                                     ["protocol"], registry=r)
        spool = collector.spool
        Gauge("tracefix_spool_bytes", "Disk the spool holds (its budget: tracefix_spool_budget_bytes)",
              registry=r).set_function(lambda: spool.bytes if spool else 0)
        Gauge("tracefix_spool_budget_bytes", "The spool's disk budget (--spool-max-mb; 0: no spool)",
              registry=r).set(spool.max_bytes if spool else 0)
        Gauge("tracefix_spool_pending_requests", "Spooled export requests not yet committed to the store",
              registry=r).set_function(lambda: spool.pending_requests if spool else 0)
        Gauge("tracefix_spool_pending_spans", "Spans of the spooled requests not yet committed to the store",
              registry=r).set_function(lambda: spool.pending_spans if spool else 0)
        self.commit_seconds = Histogram("tracefix_writer_commit_seconds",
                                        "Time of one writer transaction storing span batches",
                                        buckets=COMMIT_BUCKETS, registry=r)
        self.webhook_deliveries = Counter("tracefix_webhook_deliveries",
                                          "Alert webhook delivery attempts, by outcome (delivered, failed)",
                                          ["outcome"], registry=r)
        r.register(JobGauges(collector))
        r.register(LakeLocks(collector))

    # --- hooks ---------------------------------------------------------------------------------
    def exported(self, protocol: str, batch: "Batch", refused: "list[Refused]") -> None:
        """An export request was written: its spans stored, rejected by normalize, refused by the store."""
        by_store = sum(n for n, _ in refused)
        if batch.span_count > by_store:
            self.spans_accepted.labels(protocol).inc(batch.span_count - by_store)
        if batch.rejected:
            self.spans_rejected.labels(protocol, "invalid").inc(batch.rejected)
        if by_store:
            self.spans_rejected.labels(protocol, "database").inc(by_store)

    def spooled(self, protocol: str, spans: int) -> None:
        self.spooled_requests.labels(protocol).inc()
        self.spooled_spans.labels(protocol).inc(spans)

    def webhook_delivery(self, delivered: bool) -> None:
        self.webhook_deliveries.labels("delivered" if delivered else "failed").inc()

    def count_http_exports(self, handler):
        """`handler` (the guarded OTLP/HTTP route) with its refusals counted by their status."""
        async def counted(request):
            response = await handler(request)
            status = response.status_code
            if status == 429:
                self.requests_backpressured.labels("http").inc()
            elif status != 200:
                self.requests_refused.labels("http", HTTP_REFUSAL_REASONS.get(status, str(status))).inc()
            return response
        return counted

    def count_grpc_exports(self, export: Callable):
        """`export` (the gRPC method) with its refusals counted by the code it aborted with."""
        def counted(request, context):
            try:
                return export(request, context)
            finally:
                code = context.code()
                if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    self.requests_backpressured.labels("grpc").inc()
                elif code not in (None, grpc.StatusCode.OK):
                    self.requests_refused.labels("grpc", GRPC_REFUSAL_REASONS.get(code, code.name.lower())).inc()
        return counted

    def render(self) -> tuple[bytes, str]:
        """The scrape's body and media type (reads the store: call it off the event loop)."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class JobGauges:
    """Jobs by kind and state, counted in the store when scraped.

    Gauges read at scrape time rather than counters kept in this process: jobs change state
    outside it (`tracefix feedback` on the file, a worker's lease running out, jobs re-queued
    at start), so only the store knows how many are queued or running now. The query is one
    GROUP BY over the jobs table (a few rows per thumbs-down), `Store.job_counts`."""

    def __init__(self, collector: "Collector"):
        self.collector = collector

    def describe(self):
        return [GaugeMetricFamily("tracefix_jobs", "Jobs in the store, by kind and state", labels=["kind", "state"])]

    def collect(self):
        counts = {(kind, state): 0 for kind in JOB_KINDS for state in WATCHED_JOB_STATES}
        counts.update(self.collector.store.job_counts())
        family = GaugeMetricFamily("tracefix_jobs", "Jobs in the store, by kind and state", labels=["kind", "state"])
        for (kind, state), n in sorted(counts.items()):
            family.add_metric([kind, state], n)
        yield family



class LakeLocks:
    """On a DuckLake store: seconds this collector held the lake-wide lock (every collector's
    other writes wait) and the locks of sessions, traces and queues (`lock` = lake, keys),
    and waited for either (`lock` = any, `state` = waited); and the DuckLake conflicts that
    ran a transaction again (tracefix.collector.store.lake). Nothing on a DuckDB file."""

    def __init__(self, collector: "Collector"):
        self.collector = collector

    def describe(self):
        return [*self._families()]

    def _families(self) -> tuple[CounterMetricFamily, CounterMetricFamily]:
        return (CounterMetricFamily("tracefix_lake_lock_seconds", "Seconds the lake's locks were held or waited for",
                                    labels=["lock", "state"]),
                CounterMetricFamily("tracefix_lake_conflicts", "Lake transactions DuckLake refused and ran again"))

    def collect(self):
        lock = self.collector.store.lock
        if lock is None:
            return
        seconds, conflicts = self._families()
        for (name, state), key in {("lake", "held"): "lake_held", ("keys", "held"): "keys_held",
                                   ("any", "waited"): "waited"}.items():
            seconds.add_metric([name, state], lock.seconds[key])
        conflicts.add_metric([], lock.conflicts)
        yield seconds
        yield conflicts
