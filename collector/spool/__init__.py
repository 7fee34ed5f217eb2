"""The durable ingest spool: bursts the writer cannot take yet wait on disk, not in memory.

Receivers hand every decoded export to `Ingest.submit`. While the writer's in-memory queue
(`--max-queue-spans`) has room and nothing is spooled, the export goes straight to the writer
and is acknowledged after its commit, as before. Otherwise the raw request (its bytes as
received, protocol, Content-Type and Content-Encoding) is appended to the spool and
acknowledged once the append is fsynced, so an acknowledged span survives `kill -9` and a power
cut. A drain thread reads the spool in order, decodes each request again and feeds the writer
as it makes room; a segment file is deleted only once every request in it is committed. At
start-up whatever the last process left is replayed first. Only when the spool's disk budget
(`--spool-max-mb`) is spent is an export refused (429 / RESOURCE_EXHAUSTED with RetryInfo).
Exporters that never retry (the OpenTelemetry JS gRPC exporter) lose nothing short of that.

On disk (the OTel Collector's file_storage queue and Kafka's log have the same shape): a
directory of segment files `<sequence>.seg`, each a magic header then length-prefixed records
with a CRC-32, appended by one thread that writes every waiting record and then fsyncs once
(group commit). A record whose length runs past the end of its file or whose checksum fails is
a torn tail (the process died mid-append, before the acknowledgement): it and whatever follows
in that segment are ignored. A process that finds segments at start-up never appends to them
again.

| module | what it holds |
|---|---|
| `record` | one request as received, its record's bytes and checksum |
| `segments` | segment files: their header, scanning one left by the last process, the directory lock, durable writes |
| `disk` | `Spool`: the appending thread (group commit), reading in order, deleting what is committed |
| `drain` | the thread that feeds spooled requests to the writer and marks them committed |
| `ingest` | `Ingest`: the receivers' way in, the writer's queue or the spool |

Why a format of our own and not SQLite: on the request stream of `bench/ingest.py`'s spilling
lines (72 OTLP/HTTP requests, 49 MiB, from 6 exporter threads), appended, fsynced, read back
and committed, this spool takes 0.125 s and one table in SQLite (WAL, synchronous=FULL, the
same group commit) 0.350 s: 2.80x (median of 5; 4.81x with 4x the requests), past the 1.2x
that would justify keeping it (`.venv/bin/python bench/spool_sqlite.py`, 2026-11-27).
"""
from tracefix.collector.spool.disk import Spool, SpoolFull
from tracefix.collector.spool.ingest import Ingest
from tracefix.collector.spool.record import SpooledRequest

__all__ = ["Ingest", "Spool", "SpoolFull", "SpooledRequest"]
