"""OTLP/HTTP ingest: `POST /v1/traces`, `/v1/logs` and `/v1/metrics` (protobuf or OTLP/JSON),
answered in the request's encoding, errors included. The body is decoded beside the writer
(tracefix.collector.decoding) and handed to the ingest path (tracefix.collector.spool), which
writes it or spools it; the three signals share the bytes in flight, the writer's queue and
the spool (tracefix.collector.otlp_signals)."""
from __future__ import annotations

import asyncio
import logging

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tracefix.collector import otlp
from tracefix.collector.api.bodies import read_body
from tracefix.collector.api.context import ApiContext
from tracefix.collector.api.errors import error, otlp_route
from tracefix.collector.auth import INGEST
from tracefix.collector.decoding import DecodeFailed
from tracefix.collector.otlp_signals import SIGNALS, TRACES, Signal
from tracefix.collector.spool import SpooledRequest
from tracefix.collector.writer import QueueFull

log = logging.getLogger("tracefix.collector")


def routes(api: ApiContext) -> list[Route]:
    collector, cfg = api.collector, api.cfg
    inflight = {"bytes": 0}  # request bodies being read or decoded right now

    def receiver(signal: Signal):
        return lambda request: export(signal, request)

    async def export(signal: Signal, request: Request) -> Response:
        ctype = request.headers.get("content-type", "")
        mt = otlp.media_type(ctype)
        if mt not in (otlp.PROTOBUF, otlp.JSON):
            raise otlp.OtlpError(415, f"unsupported Content-Type {ctype!r}: use {otlp.PROTOBUF} or {otlp.JSON}")
        # bytes held as they arrive, not as declared: an upload that declares 32 MiB and
        # stalls holds nothing (and read_body drops it), so it cannot starve the others
        held = 0

        def hold(n: int) -> None:
            nonlocal held
            if inflight["bytes"] > held and inflight["bytes"] + n > cfg.max_inflight_bytes:
                raise QueueFull(f"{inflight['bytes']} bytes of requests being read or decoded")
            inflight["bytes"] += n
            held += n

        encoding = request.headers.get("content-encoding")
        try:
            body = await read_body(request, cfg.max_body_bytes, on_chunk=hold)
            with collector.writer.expecting():  # the writer waits for this batch rather than commit without it
                batch = await collector.decoder.decode(body, ctype, encoding, signal.name)
                fut = collector.ingest.submit(batch, SpooledRequest("http", ctype, encoding, body, signal=signal.name)
                                              ) if batch.records else None
        except DecodeFailed as exc:
            return error(503, str(exc))
        finally:
            inflight["bytes"] -= held
        refused = []
        if fut is not None:
            try:
                refused = await asyncio.wrap_future(fut)
            except Exception as exc:  # records it refuses for their content are in `refused`
                log.warning("export failed to commit: %s", exc)
                return error(503, f"could not store the {signal.noun}: {exc}")
        if signal is TRACES:
            collector.metrics.exported("http", batch, refused)
        content, media = otlp.encode_response(otlp.export_response(batch, refused, signal), ctype)
        return Response(content, media_type=media)

    return [Route(signal.path, collector.metrics.count_http_exports(otlp_route(api.guarded(receiver(signal), INGEST))),
                  methods=["POST"]) for signal in SIGNALS]
