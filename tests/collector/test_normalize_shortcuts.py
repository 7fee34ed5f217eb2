"""The shortcuts of normalization's hot path answer what the long way answers: the nesting
`attributes_and_nesting` reports is what redaction's own `_nested` finds (so a span it calls
flat skips no value redaction would judge), and a message `canonical_message` returns at
once is the message the full check returns. bench/normalize.py --check compares whole
batches with an older revision's; these pin the two shortcuts value by value."""
from __future__ import annotations

import itertools

from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from test_normalize_parity import _value

from tracefix.collector import document
from tracefix.collector.normalize.dialects import CANONICAL_KEYS, canonical_message
from tracefix.collector.normalize.otlp_values import attributes_and_nesting
from tracefix.collector.redact import _nested


VALUES = ["text", "", 7, 0, 2.5, True, False, None, b"\x00\x01", [], ["a", "b"], ["a", ""], ["a", 1], [1, 2],
          [None], [["a"]], [{"k": "v"}], {}, {"k": "v"}, {"k": ["a"]}, [b"\x01"]]


def test_the_nesting_read_with_the_attributes_is_redactions_own():
    for first, second in itertools.product(VALUES, repeat=2):
        kvs = [KeyValue(key="one", value=_value(first)), KeyValue(key="two", value=_value(second)),
               KeyValue(key="name", value=_value("plain"))]
        attrs, nested = attributes_and_nesting(kvs)
        assert nested == _nested(attrs), (first, second)


def _full_check(msg):
    """`canonical_message`'s answer for a message in canonical shape before its shortcut."""
    if (type(msg) is dict and type(msg.get("content")) is str and msg.get("role") and msg.get("name", True)
            and msg.get("tool_calls", True) and msg.get("tool_call_id", True) and msg.keys() <= CANONICAL_KEYS):
        return document.typed_message(msg)
    return None


def test_messages_taken_at_once_are_what_the_full_check_returns():
    roles = ["user", "", None, 3, ["user"]]
    contents = ["hello", "", None, 5, [{"type": "text", "text": "hi"}], {"text": "hi"}]
    extras = [{}, {"tool_call_id": "call_1"}, {"tool_call_id": ""}, {"tool_call_id": 12}, {"tool_call_id": None},
              {"name": "bob"}, {"name": ""}, {"lang": "en"}, {"tool_calls": []}]
    taken = 0
    for role, content, extra in itertools.product(roles, contents, extras):
        msg = {"role": role, "content": content, **extra}
        got = canonical_message(dict(msg))
        want = _full_check(dict(msg))
        if want is not None:
            assert got == want and type(got["role"]) is str, msg
            taken += 1
    assert taken >= 4  # plain messages and tool results with each role that is text
