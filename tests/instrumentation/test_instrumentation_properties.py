"""Properties of the pure parts: fingerprints, redaction, truncation, stream accumulation."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tracefix.attributes import truncate
from tracefix.openai_chat import OpenAIChat
from tracefix.redaction import redact_text
from tracefix.fingerprints import fingerprint_request, normalize_messages

text = st.text(min_size=0, max_size=60)
message = st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant", "tool"]),
                                 "content": st.one_of(st.none(), text)},
                                optional={"name": st.one_of(st.none(), st.text(min_size=1, max_size=8))})


@given(st.lists(message, max_size=5), st.text(min_size=1, max_size=10))
def test_fingerprint_ignores_none_fields_and_is_stable_under_normalization(messages, model):
    without_none = [{k: v for k, v in m.items() if v is not None} for m in messages]
    assert fingerprint_request(model, messages) == fingerprint_request(model, without_none)
    assert fingerprint_request(model, normalize_messages(messages)) == fingerprint_request(model, messages)


@given(st.lists(message, min_size=1, max_size=4), st.text(min_size=1, max_size=10))
def test_fingerprint_changes_when_a_message_changes(messages, model):
    changed = json.loads(json.dumps(messages))
    changed[-1]["content"] = (changed[-1]["content"] or "") + "!"
    assert fingerprint_request(model, messages) != fingerprint_request(model, changed)


secret = st.from_regex(r"sk-[A-Za-z0-9]{16,40}[0-9]", fullmatch=True)  # generated keys have digits


@given(text, secret, text)
def test_api_keys_never_survive_redaction(before, key, after):
    assert key not in redact_text(f"{before} {key} {after}")
    assert key not in redact_text(json.dumps({"headers": {"Authorization": f"Bearer {key}"}}))


@given(st.text(max_size=400), st.integers(min_value=40, max_value=300))
def test_truncation_respects_the_byte_limit_and_says_so(value, limit):
    out, cut = truncate(value, limit)
    if len(value.encode()) <= limit:
        assert (out, cut) == (value, False)
    else:
        assert cut and len(out.encode()) <= limit and "tracefix: truncated" in out


tool_call = st.fixed_dictionaries({
    "id": st.from_regex(r"call_[a-z0-9]{4,10}", fullmatch=True), "type": st.just("function"),
    "function": st.fixed_dictionaries({"name": st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
                                       "arguments": st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True),
                                                                    st.integers(), max_size=3).map(json.dumps)})})
completion = st.builds(
    lambda content, calls, finish: {
        "id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": finish,
                     "message": {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}},
    st.one_of(st.none(), st.text(min_size=1, max_size=50)), st.lists(tool_call, max_size=3),
    st.sampled_from(["stop", "tool_calls", "length"]))


@settings(max_examples=60, deadline=None)
@given(completion)
def test_a_recorded_completion_streams_back_to_the_same_completion(raw):
    """Replay's fake stream and the stream accumulator are inverse: what a recorded
    completion streams back accumulates to the same messages, finish reasons and usage."""
    adapter = OpenAIChat()
    accumulator = adapter.new_accumulator()
    for chunk in adapter.fake_stream(raw, {"stream_options": {"include_usage": True}}, is_async=False):
        accumulator.add(chunk)
    assert adapter.summarize(accumulator.raw()) == adapter.summarize(raw)
