"""The per-call fast paths give what the plain code gave: a recorded fingerprint must never
change (a cassette recorded before would stop matching), nor an attribute."""
from __future__ import annotations

import hashlib
import json
from enum import Enum
from typing import Any

from hypothesis import given, settings, strategies as st
from opentelemetry.sdk.trace import TracerProvider

from tracefix.attributes import set_attributes
from tracefix.fingerprints import fingerprint_request, normalize_messages


class Color(str, Enum):
    RED = "red"


def reference_plain(value: Any) -> Any:
    """The normalization of JSON-like data as it was written before its fast path (one call
    per value; the values drawn below are all JSON-like)."""
    if isinstance(value, dict):
        return {str(k): reference_plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [reference_plain(v) for v in value]
    assert value is None or isinstance(value, (str, int, float, bool)), value
    return value


leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8),
                   st.just(Color.RED))
keys = st.one_of(st.text(max_size=6), st.integers(0, 9), st.just(Color.RED))
values = st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                                                      st.dictionaries(keys, inner, max_size=4)), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.lists(values, max_size=4))
def test_normalized_messages_are_what_they_were(messages):
    assert normalize_messages(messages) == [reference_plain(m) for m in messages]
    text = json.dumps([reference_plain(m) for m in messages], ensure_ascii=False, sort_keys=True,
                      separators=(",", ":"), default=repr)
    expected = hashlib.sha256(f"m\n{text}\n[]".encode()).hexdigest()
    assert fingerprint_request("m", messages) == expected


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=5), st.one_of(
    leaves, st.lists(st.text(max_size=5), max_size=3), st.tuples(st.text(max_size=3)),
    st.lists(st.integers(), min_size=1, max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
    max_size=6))
def test_attributes_are_set_as_they_were(attributes):
    span = TracerProvider().get_tracer("t").start_span("s")
    set_attributes(span, attributes)
    expected = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, (bool, int, float)):
            expected[key] = value
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            expected[key] = tuple(value)
        else:
            expected[key] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                                             separators=(",", ":"))
    assert dict(span.attributes) == expected


# credentials the rules know, written here, and near misses they must leave alone
SECRETS = ["sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2", "Bearer eyJhbGciOi.eyJzdWIiOiIx.c2lnbmF0dXJl",
           "AKIA" + "ABCDEFGHIJKLMNOP", "ghp_" + "x" * 36, "password=hunter2hunter2"]
NEAR_MISSES = ["sk-", "a bearer of news", "AKIA", "the password policy", "token"]
texts = st.one_of(st.text(max_size=12), st.sampled_from(SECRETS + NEAR_MISSES),
                  st.builds(lambda a, s, b: f"{a} {s} {b}", st.text(max_size=6), st.sampled_from(SECRETS),
                            st.text(max_size=6)))
attribute_values = st.one_of(st.integers(), st.booleans(), st.floats(allow_nan=False), texts,
                             st.lists(texts, max_size=3).map(tuple))
attribute_keys = st.one_of(st.sampled_from(["gen_ai.input.messages", "http.request.header.authorization",
                                            "api_key", "tracefix.step", "app.token", "session.id"]),
                           st.text(min_size=1, max_size=8))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(attribute_keys, attribute_values, min_size=1, max_size=6))
def test_a_span_scanned_in_one_pass_is_redacted_as_value_by_value(attributes):
    from tracefix.redaction import RedactionChain
    from tracefix.secret_rules import redact_value

    redacted, changed = RedactionChain().attributes(attributes)
    expected = {key: redact_value(key, value) for key, value in attributes.items()}
    assert redacted == expected
    assert changed == (expected != attributes)


# JSON values whose text orjson and the standard library write differently (floats below 1e-4,
# NaN, infinities, integers beyond 64 bits, lone surrogates) or that look like such text
TRICKY = st.one_of(st.sampled_from([1e-05, 1.5e-09, 1e-4, 9.99e-10, 1e16, -0.0, 2 ** 70, float("nan"), float("inf"),
                                    "1e-5", "re-run 3e-7", "0.00001", "null", "\ud800", "e-", Color.RED]),
                   st.floats(), st.integers(), st.text(max_size=8))
request_values = st.recursive(st.one_of(leaves, TRICKY), lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(keys, inner, max_size=4)), max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(st.lists(request_values, max_size=4))
def test_the_fast_canonical_json_is_the_standard_librarys_byte_for_byte(request_list):
    """A fingerprint hashes this text: written by orjson where it can be, it must still be the
    standard library's text exactly, or every cassette recorded before stops matching."""
    from tracefix.attributes import canonical_json, canonical_plain_json
    from tracefix.fingerprints import _plain, canonical_normalized_json

    expected = canonical_json(_plain(request_list))
    assert canonical_plain_json(_plain(request_list)) == expected
    assert canonical_normalized_json(request_list) == expected


@settings(max_examples=200, deadline=None)
@given(request_values)
def test_attribute_json_reads_back_as_the_standard_librarys(value):
    from tracefix.attributes import dumps

    def stdlib(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"), default=repr)

    text = dumps(value)
    if "NaN" in stdlib(value) or "Infinity" in stdlib(value):  # not JSON: orjson writes null
        return
    assert json.loads(text) == json.loads(stdlib(value))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(attribute_keys, attribute_values, min_size=1, max_size=6), texts)
def test_a_whole_span_is_redacted_as_value_by_value(attributes, name):
    """The span's scan reads the SDK's own attribute dict and takes its name into the same
    pass: a secret in either still leaves redacted."""
    from tracefix.redaction import RedactionChain
    from tracefix.secret_rules import redact_text, redact_value

    span = TracerProvider().get_tracer("t").start_span(name, attributes=attributes)
    span.end()
    out = RedactionChain().span(span)
    assert out.name == redact_text(name)
    assert dict(out.attributes) == {key: redact_value(key, value) for key, value in span.attributes.items()}
