"""Fuzzing one real `tracefix serve` over OTLP/HTTP (protobuf, JSON, gzip) and OTLP/gRPC.

Valid requests in every dialect (tracefix's own spans and the OpenInference / OpenLLMetry /
GenAI-parts spans of the normalize golden cases) are mutated at random with a seeded RNG:
attribute values swapped for hostile ones (the cases an outside check found among them),
the JSON inside message attributes bent, events, ids, times and statuses spoiled, and, for
some, the encoded bytes themselves flipped or cut. Every request also carries one valid
"anchor" span of its own session.

Asserts, for every request: no 5xx (gRPC: neither UNKNOWN nor INTERNAL) and no exception in
the server's log; `/healthz` answers; a request that still decodes is accepted and its
anchor span is readable through the API afterwards (the valid spans of a mixed request are
stored). Bounded: FUZZ_REQUESTS requests or FUZZ_SECONDS, whichever comes first; the seed is
printed on failure (TRACEFIX_FUZZ_SEED replays one)."""
from __future__ import annotations

import copy
import json
import math
import os
import random
import time
import urllib.request
import uuid

import grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from test_normalize_parity import _other_dialects, _tracefix_session, _value
from test_partial_success import export, good_chat, make_request, nested_messages, otlp_json

FUZZ_REQUESTS = 150
FUZZ_SECONDS = 45.0
SEED = int(os.environ.get("TRACEFIX_FUZZ_SEED", "20240611"))

# keys whose values normalization interprets (the rest it only stores)
KEYS = ["gen_ai.operation.name", "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
        "gen_ai.tool.definitions", "gen_ai.response.finish_reasons", "gen_ai.usage.input_tokens",
        "gen_ai.agent.name", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "tracefix.session.id",
        "tracefix.session.root", "tracefix.session.score", "tracefix.session.inputs", "tracefix.session.output",
        "tracefix.session.replayable", "tracefix.step", "tracefix.call.seq", "tracefix.truncated", "session.id",
        "openinference.span.kind", "llm.input_messages.0.message.role",
        "llm.input_messages.0.message.contents.0.message_content.text", "llm.input_messages.0.message.content",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments", "gen_ai.prompt.0.content",
        "gen_ai.completion.0.tool_calls.0.arguments", "input.value", "error.type"]

HOSTILE_JSON = [
    None, 0, -1, 2 ** 70, 1.5, True, "", "text", [], {}, [None], {"type": "text", "text": None},
    [{"type": "text", "text": None}], [{"role": "user", "content": [{"type": "text", "text": None}]}],
    [{"role": "user", "parts": [{"type": "text", "content": None}, {"type": "tool_call", "arguments": [1]}]}],
    [{"role": ["user"], "content": {"a": 1}, "tool_calls": "nope", "name": 5}], [{"type": "text", "content": 7}, 3],
    [[[[]]]], {"role": "assistant"}, [{"role": "user", "content": "ok"}, "stray", 9],
]


def hostile_value(rng: random.Random):
    """A Python value for an attribute (`_value` turns it into an AnyValue)."""
    pick = rng.randrange(12)
    if pick == 0:
        return json.dumps(rng.choice(HOSTILE_JSON))
    if pick == 1:
        return nested_messages(rng.choice([50, 900, 1100, 5000]))
    if pick == 2:
        return rng.choice([math.nan, math.inf, -math.inf, -0.0, 1e308])
    if pick == 3:
        return rng.choice(['[{"role":"user","content":"\\ud800"}]', '{"a": NaN}', "[Infinity]", "[1, 2", "\x00"])
    if pick == 4:
        return [rng.choice(["chat", 1, 2.5, True, b"\x00"]) for _ in range(rng.randrange(4))]
    if pick == 5:
        return {"k": [1, {"x": "y"}], "chat": None} if rng.random() < 0.5 else list(range(10_001))
    if pick == 6:
        return rng.choice([-(1 << 63), (1 << 63) - 1, 0, -1, 1 << 31])
    if pick == 7:
        return rng.choice([True, False])
    if pick == 8:
        return rng.choice([b"", b"\xff\xfe", bytes(range(256))])
    if pick == 9:
        return "x" * rng.choice([0, 1, 100_000])
    if pick == 10:
        return rng.choice(["chat", "execute_tool", "invoke_agent", "LLM", "TOOL", "AGENT", "é ✓", "\u202e"])
    return rng.choice(["", " ", "null", "[]", "{}", "0"])


def bend_json(rng: random.Random, text: str) -> str:
    """`text` (JSON) with one node replaced by a hostile one."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than we can bend
        return text
    nodes = [(None, None)]
    stack = [doc]
    while stack and len(nodes) < 200:
        node = stack.pop()
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in children:
            nodes.append((node, key))
            stack.append(child)
    parent, key = rng.choice(nodes)
    new = rng.choice(HOSTILE_JSON + [math.nan, "\ud800"])
    if parent is None:
        doc = new
    else:
        parent[key] = copy.deepcopy(new)
    return json.dumps(doc)


def set_attribute(span: Span, key: str, value) -> None:
    for kv in span.attributes:
        if kv.key == key:
            kv.value.CopyFrom(_value(value))
            return
    span.attributes.append(KeyValue(key=key, value=_value(value)))


def mutate_span(rng: random.Random, span: Span) -> None:
    op = rng.randrange(7)
    if op <= 1:
        set_attribute(span, rng.choice(KEYS), hostile_value(rng))
    elif op == 2:
        texts = [kv for kv in span.attributes if kv.value.string_value[:1] in ("[", "{")]
        if texts:
            kv = rng.choice(texts)
            bent = bend_json(rng, kv.value.string_value)
            kv.value.CopyFrom(AnyValue(string_value=bent.encode("utf-8", "replace").decode("utf-8")))
    elif op == 3:
        name = rng.choice(["gen_ai.evaluation.result", "tracefix.snapshot", "exception", ""])
        attrs = {rng.choice(["gen_ai.evaluation.score.value", "tracefix.snapshot.key", "tracefix.snapshot.state",
                             "exception.type", "tracefix.step"]): hostile_value(rng) for _ in range(3)}
        span.events.append(Span.Event(name=name, time_unix_nano=rng.choice([0, span.start_time_unix_nano, 1 << 63]),
                                      attributes=[KeyValue(key=k, value=_value(v)) for k, v in attrs.items()]))
    elif op == 4:
        field = rng.choice(["trace_id", "span_id", "parent_span_id"])
        setattr(span, field, rng.choice([b"", b"\x00" * 16, b"\x01" * 8, b"\x02" * 3]))
    elif op == 5:
        span.start_time_unix_nano = rng.choice([0, (1 << 64) - 1, 1 << 63])
        span.end_time_unix_nano = rng.choice([0, span.start_time_unix_nano, 1])
        span.status.code = rng.choice([0, 1, 2, 7])
        span.status.message = rng.choice(["", "boom", "x" * 1000])
    elif span.attributes:
        del span.attributes[rng.randrange(len(span.attributes))]


def base_spans(rng: random.Random, i: int) -> list[Span]:
    trace = uuid.uuid4().int >> 8
    spans = _tracefix_session(f"fuzz-{i}", trace, rng.randint(1, 3)) if rng.random() < 0.6 else _other_dialects()
    for span in spans:  # new spans each time, not retries of the last request's
        if len(span.trace_id) == 16:
            span.trace_id = (int.from_bytes(span.trace_id, "big") ^ trace).to_bytes(16, "big")
    return spans


def mutate_bytes(rng: random.Random, body: bytes) -> bytes:
    data = bytearray(body)
    if rng.random() < 0.3:
        return bytes(data[:rng.randrange(len(data))])
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


def healthz(http: str) -> int:
    with urllib.request.urlopen(http + "/healthz", timeout=10) as resp:
        return resp.status


def test_fuzzed_exports_never_get_a_5xx_and_keep_the_valid_spans(collector, api):
    rng = random.Random(SEED)
    http = collector.match["http"]
    log_start = len(collector.lines)
    deadline = time.monotonic() + FUZZ_SECONDS
    sent = anchors = 0
    while sent < FUZZ_REQUESTS and time.monotonic() < deadline:
        spans = base_spans(rng, sent)
        for span in rng.sample(spans, min(len(spans), rng.randint(1, 3))):
            for _ in range(rng.randint(1, 3)):
                mutate_span(rng, span)
        anchor_sid = f"anchor-{SEED}-{sent}-{uuid.uuid4().hex[:6]}"
        spans.insert(rng.randrange(len(spans) + 1), good_chat(anchor_sid, uuid.uuid4().bytes, 0))
        request = make_request(spans)
        via = rng.choice(["protobuf", "json", "gzip", "grpc"])
        spoil_bytes = rng.random() < 0.15
        body = otlp_json(request) if via == "json" else request.SerializeToString()
        if spoil_bytes:
            body = mutate_bytes(rng, body)
        status, answer = export(collector, body, via)
        sent += 1
        where = f"seed {SEED}, request {sent} via {via}{' (bytes spoiled)' if spoil_bytes else ''}: {answer!r:.300}"
        if via == "grpc":
            assert status not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL), where
        else:
            assert status < 500, where
        assert healthz(http) == 200, where
        if spoil_bytes:
            continue
        assert status in (200, grpc.StatusCode.OK), where
        assert [s["name"] for s in api.get_spans(anchor_sid)] == ["chat good-0"], where
        anchors += 1
    crashes = [line for line in collector.lines[log_start:]
               if "Exception in ASGI application" in line or "Exception calling application" in line]
    assert not crashes, f"seed {SEED}: {crashes[:3]}"
    assert sent >= 30 and anchors >= 20, (sent, anchors)  # the time bound left a meaningful run
