"""The C reader of OTLP trace bodies (collector/normalize/otlp_wire/, `wire_spans.read_traces`)
against protobuf's own parser as the oracle: every request it reads normalizes to exactly the
batch the protobuf request gives, every shape it does not take is left to protobuf (None),
and no body, however broken, makes it crash or accept what protobuf refuses.

The requests are built with the protobuf classes, never with the reader's code; the broken
bodies are seeded mutations of real ones."""
from __future__ import annotations

import random
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tracefix.collector.decoding import decode_body
from tracefix.collector.normalize import normalize_request
from tracefix.collector.normalize import wire_spans
from tracefix.collector.normalize.wire_spans import read_traces

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
from agent_spans import request, session_spans  # noqa: E402
from test_normalize_parity import _bad_request, _request, _span, _tracefix_session, cases, observed  # noqa: E402

NO_LIMIT = 8 << 20

needs_reader = pytest.mark.skipif(not wire_spans.ENABLED, reason="the C reader is not built (no C compiler) or is off")


def test_the_reader_is_built_where_a_compiler_is() -> None:
    """`pip install` builds it optionally: a machine with a C compiler and Python's headers
    that ends up without it has lost the decode worker's fast path silently."""
    headers = Path(sysconfig.get_paths()["include"], "Python.h").exists()
    if not (shutil.which("cc") or shutil.which("gcc")) or not headers:
        pytest.skip("no C compiler or no Python headers here")
    assert wire_spans.BUILT, "a C compiler is here but tracefix.collector.normalize._otlp_wire was not built"


@needs_reader
def test_an_operator_can_turn_the_reader_off() -> None:
    """TRACEFIX_OTLP_C_READER=off: every body goes to protobuf, as in a process without the reader."""
    body = request(session_spans("off", 1, random.Random(1))).SerializeToString()
    probe = ("import sys; from tracefix.collector.normalize.wire_spans import read_traces; "
             "print(read_traces(sys.stdin.buffer.read(), 1 << 20) is None)")
    answers = [subprocess.run([sys.executable, "-c", probe], input=body, capture_output=True, check=True,
                              env={"PATH": "/usr/bin:/bin", "TRACEFIX_OTLP_C_READER": value}).stdout.strip()
               for value in ("off", "on")]
    assert answers == [b"True", b"False"]


def same_batch(req: ExportTraceServiceRequest, **kw) -> bool:
    """Normalize `req` from the C reader's form and from protobuf's, with and without the
    secret scan; assert the batches are equal. False if the reader left the body to protobuf."""
    body = req.SerializeToString()
    for scan in (True, False):
        wire = read_traces(body, kw.get("max_attribute_chars", NO_LIMIT))  # normalizing consumes it: read anew
        if wire is None:
            return False
        got = observed(normalize_request(wire, **kw, wire_may_hold_secret=scan))
        want = observed(normalize_request(ExportTraceServiceRequest.FromString(body), **kw,
                                          wire_may_hold_secret=scan))
        assert got == want, f"secret scan {scan}: the batches differ"
    return True


@needs_reader
def test_agent_sessions_are_read_as_protobuf_reads_them() -> None:
    rng = random.Random(7)
    for i, growing in enumerate((False, True)):
        assert same_batch(request(session_spans(f"wire-{i}", 12, rng, growing=growing, window=4)))


@needs_reader
def test_the_pinned_requests_read_the_same() -> None:
    taken = [name for name, (req, kw) in cases().items() if same_batch(req, **kw)]
    # "dialects" holds key-value lists and "bad-spans" strings over its limit: protobuf's path
    assert set(taken) == {"tracefix", "two-sessions", "otlp-json"}


@needs_reader
def test_spans_rejected_for_their_ids_and_times_are_rejected_alike() -> None:
    req = _bad_request()
    assert not same_batch(req, max_attribute_chars=4000)  # its long strings: protobuf's path
    spans = req.resource_spans[0].scope_spans[0].spans
    for span in spans:  # without them, the ids and the time beyond 2262 go through the C reader
        kept = [kv for kv in span.attributes if kv.key != "huge"]
        del span.attributes[:]
        span.attributes.extend(kept)
        for ev in span.events:
            del ev.attributes[:]
    assert same_batch(req, max_attribute_chars=4000)
    assert normalize_request(read_traces(req.SerializeToString(), 4000)).rejected == 3


@needs_reader
def test_values_of_every_scalar_kind_and_arrays_of_them() -> None:
    attrs = {"s": "text", "empty": "", "t": True, "f": False, "i": -(1 << 63), "big": (1 << 63) - 1, "d": -2.5,
             "nan": float("nan"), "strings": ["a", "b"], "mixed": ["a", 1, 2.0, False], "none": [],
             "unicode": "héllo wörld ✓ 𝄞", "tracefix.session.id": "wire-kinds"}
    spans = [_span(1, 0xA1, "kinds", attrs, events=[("e", 5, {"k": ["x", 3]}), ("plain", 6, {})],
                   status=Status(code=2, message="ValueError: bad"), kind=3),
             _span(2, 0xA1, "", {}, parent=1001)]
    req = _request(spans)
    unset = req.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="unset")  # no value at all
    assert unset.key == "unset"
    assert same_batch(req)
    read = read_traces(req.SerializeToString(), NO_LIMIT)
    span = read[0][1][0][1][0]
    assert span.attributes["unset"] is None and span.attributes["mixed"] == ["a", 1, 2.0, False]
    assert span.nested and not read[0][1][0][1][1].nested
    assert span.events[0] == {"name": "e", "time_ns": 5, "attributes": {"k": ["x", 3]}}
    assert (span.status_code, span.status_message, span.kind) == (2, "ValueError: bad", 3)


def _left_to_protobuf() -> dict[str, tuple[bytes, int]]:
    """Bodies in shapes the reader must leave to protobuf, each with the limit it is read under."""
    def one(mutate, limit: int = NO_LIMIT) -> tuple[bytes, int]:
        req = _request(_tracefix_session("left", 0xD1, 1))
        mutate(req, req.resource_spans[0].scope_spans[0].spans[0])
        return req.SerializeToString(), limit

    kv = KeyValue(key="map", value=AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="a")])))
    bodies = {
        "a key-value list value": one(lambda r, s: s.attributes.append(kv)),
        "a bytes value": one(lambda r, s: s.attributes.add(key="b", value=AnyValue(bytes_value=b"\x00\xff"))),
        "an array in an array": one(lambda r, s: s.attributes.add(key="n", value=AnyValue(array_value=ArrayValue(
            values=[AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="x")]))])))),
        "a link": one(lambda r, s: s.links.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)),
        "scope attributes": one(lambda r, s: r.resource_spans[0].scope_spans[0].scope.attributes.add(key="k")),
        "a string over the limit": one(lambda r, s: s.attributes.add(key="long", value=AnyValue(
            string_value="é" * 11)), limit=10),
        "an array over 10,000 values": one(lambda r, s: s.attributes.add(key="many", value=AnyValue(
            array_value=ArrayValue(values=[AnyValue(int_value=1)] * 10_001)))),
    }
    good = request(session_spans("left-raw", 1, random.Random(3)))
    raw = good.SerializeToString()
    bodies["a truncated body"] = (raw[:-3], NO_LIMIT)
    bodies["an unknown field"] = (raw + b"\x10\x01", NO_LIMIT)  # field 2, varint
    name = good.resource_spans[0].scope_spans[0].spans[0].name.encode()
    bodies["invalid UTF-8 in a name"] = (raw.replace(name, b"\xff" * len(name), 1), NO_LIMIT)
    good.resource_spans[0].scope_spans[0].spans[0].status.message = "first"
    status = Status(code=1).SerializeToString()  # a second status: protobuf merges the two
    bodies["status given twice"] = (_with_span_field(good.SerializeToString(), b"\x7a" + bytes([len(status)])
                                                     + status), NO_LIMIT)
    return bodies


def _with_span_field(body: bytes, field: bytes) -> bytes:
    """`body` with `field` (its tag and value) added to its first span, by re-encoding the
    nesting (a field protobuf's classes would merge before it reached the wire)."""
    req = ExportTraceServiceRequest.FromString(body)
    span = req.resource_spans[0].scope_spans[0].spans[0]
    span_bytes = span.SerializeToString() + field
    scope = req.resource_spans[0].scope_spans[0]
    del scope.spans[0]
    scope_bytes = scope.SerializeToString() + _field(2, span_bytes)
    rs = req.resource_spans[0]
    del rs.scope_spans[:]
    rs_bytes = rs.SerializeToString() + _field(2, scope_bytes)
    return _field(1, rs_bytes)


def _field(number: int, value: bytes) -> bytes:
    out, n = bytearray([number << 3 | 2]), len(value)
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + value


@needs_reader
@pytest.mark.parametrize("shape", sorted(_left_to_protobuf()))
def test_other_shapes_are_left_to_protobuf(shape: str) -> None:
    body, limit = _left_to_protobuf()[shape]
    assert read_traces(body, limit) is None
    try:  # and the decode path still answers as protobuf's does: the same batch or the same refusal
        want = observed(normalize_request(ExportTraceServiceRequest.FromString(body), max_attribute_chars=limit,
                                          wire_bytes=len(body)))
    except DecodeError:
        with pytest.raises(Exception, match="protobuf|decode|parse"):
            decode_body(body, "application/x-protobuf", None, 64 << 20, limit)
        return
    assert observed(decode_body(body, "application/x-protobuf", None, 64 << 20, limit)) == want


@needs_reader
def test_a_mutated_body_is_read_as_protobuf_reads_it_or_left_to_it() -> None:
    """Seeded mutations of real bodies (bytes flipped, cut, repeated, inserted): the reader
    never crashes, never reads a body protobuf refuses, and what it reads normalizes to
    protobuf's batch."""
    rng = random.Random(39)
    seeds = [request(session_spans(f"fuzz-{i}", 2, rng, growing=True)).SerializeToString() for i in range(2)]
    seeds += [req.SerializeToString() for req, _ in cases().values()]  # every dialect, bad spans
    read = refused = 0
    for _ in range(20_000):  # ~1 s
        body = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 2)):
            at = rng.randrange(len(body))
            op = rng.randrange(4)
            if op == 0:
                body[at] = rng.randrange(256)
            elif op == 1:
                del body[at:at + rng.randint(1, 8)]
            elif op == 2:
                body[at:at] = body[at:at + rng.randint(1, 16)]
            else:
                body[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        body = bytes(body)
        wire = read_traces(body, 3000)
        try:
            parsed = ExportTraceServiceRequest.FromString(body)
        except DecodeError:
            refused += 1
            assert wire is None, "read a body protobuf refuses"
            continue
        if wire is not None:
            read += 1
            assert observed(normalize_request(wire, max_attribute_chars=3000)) == \
                observed(normalize_request(parsed, max_attribute_chars=3000))
    assert read > 100 and refused > 100, (read, refused)  # both sides of the property were tried
