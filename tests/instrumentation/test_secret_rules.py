"""The shared secret rules (tracefix.secret_rules), rule by rule, and the SDK applying them
to a real OpenAI call's spans before export."""
from __future__ import annotations

import json

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from secret_samples import HARMLESS_KEYS, ORDINARY, SAMPLES, SECRET_KEYS, all_secrets_text

import tracefix
from tracefix import secret_rules
from tracefix.secret_rules import REDACTED, TEXT_RULES, is_secret_key, redact_text, redact_value, rules_hit

RULES = {rule.name: rule for rule in TEXT_RULES}


def test_every_rule_has_samples():
    assert {s.rule for s in SAMPLES} == set(RULES)


@pytest.mark.parametrize("sample", SAMPLES, ids=str)
def test_each_rule_removes_its_secret(sample):
    rule = RULES[sample.rule]
    assert rule in rules_hit(sample.text), "its hints are found"
    alone = rule.pattern.sub(rule.replace, sample.text)
    assert sample.secret not in alone and REDACTED in alone, "the rule on its own removes it"
    assert sample.secret not in redact_text(sample.text)


@pytest.mark.parametrize("sample", SAMPLES, ids=str)
def test_secrets_in_json_text_are_removed_and_the_json_stays_valid(sample):
    messages = json.dumps([{"role": "user", "content": sample.text}])
    redacted = redact_text(messages)
    assert sample.secret not in redacted
    assert REDACTED in json.loads(redacted)[0]["content"]
    # JSON inside JSON (tool arguments inside a message list): escaped quotes stay escapes
    nested = json.dumps({"arguments": json.dumps({"note": sample.text})})
    inner = json.loads(json.loads(redact_text(nested))["arguments"])
    assert sample.secret not in inner["note"]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_and_ids_are_left_alone(text):
    assert redact_text(text) == text
    assert redact_text(json.dumps({"content": text})) == json.dumps({"content": text})


def test_attribute_keys_that_name_credentials_lose_their_whole_value():
    for key in SECRET_KEYS:
        assert is_secret_key(key), key
        assert redact_value(key, "anything at all") == REDACTED
        assert redact_value(key, ("Bearer", "x")) == REDACTED
    for key in HARMLESS_KEYS:
        assert not is_secret_key(key), key
        assert redact_value(key, 42) == 42


def test_lists_and_mappings_are_redacted_inside_and_keep_their_type():
    key = SAMPLES[0].secret
    assert redact_value("http.headers", ("ok", f"key {key}")) == ("ok", f"key {REDACTED}")
    assert redact_value("meta", {"api_key": "abc", "note": f"key {key}", "n": 1}) == \
        {"api_key": REDACTED, "note": f"key {REDACTED}", "n": 1}
    untouched = ["plain", "words"]
    assert redact_value("tags", untouched) is untouched


def test_redaction_is_idempotent():
    once = redact_text(all_secrets_text())
    assert redact_text(once) == once


# non-ASCII characters that lowercase to ASCII (the Kelvin sign) are left out: the
# Hyperscan pass folds ASCII only, like the rules' regexes, so only its superset gates differ
_letters = st.characters(codec="utf-8").filter(lambda c: c.isascii() or not any(x.isascii() for x in c.lower()))
corpus = st.one_of(st.sampled_from([s.text for s in SAMPLES] + list(ORDINARY)),
                   st.text(alphabet=_letters, max_size=80),
                   st.lists(st.sampled_from(["token", "secret", "api_key", "Bearer", "basic", "sk-", "AKIA", ":",
                                             "=", '"', "'", "\\", " ", "\t", "x1", "password", "eyJ", "xox", "é"]),
                            max_size=12).map("".join))


def _finders() -> list:
    finders = [secret_rules.substring_hint_finder()]
    for name in ("automaton_hint_finder", "hyperscan_hint_finder"):  # each where its package is installed
        try:
            finders.append(getattr(secret_rules, name)())
        except ImportError:
            pass
    return finders


FINDERS = _finders()


@settings(max_examples=300)
@given(corpus)
def test_every_hint_finder_agrees(text):
    """The collector's one-pass scans (Hyperscan, Aho-Corasick) and the bare SDK's substring
    searches find the same hints, so they pick the same rules."""
    results = [(any_hint(text), indexes(text)) for any_hint, indexes in FINDERS]
    assert all(r == results[0] for r in results) and results[0][0] == bool(results[0][1])


def test_the_sdk_redacts_every_rule_before_export(sim_url):
    """A real OpenAI call (scripted server) carrying every sample in its messages, a tracked
    state and session metadata with credentials: the exported spans hold none of them."""
    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))
    client = openai.OpenAI(base_url=sim_url, api_key="sim-key", max_retries=0)

    class Vault:
        def snapshot(self):
            return {"api_key": SAMPLES[1].secret, "notes": SAMPLES[10].text}

        def restore(self, state):
            pass

    try:
        with tracefix.session("secrets", metadata={"password": "hunter2", "token": SAMPLES[4].secret}):
            tracefix.track("vault", Vault())
            client.chat.completions.create(model="bank-agent", messages=[
                {"role": "system", "content": "You are the Orchestrator of a bank."},
                {"role": "user", "content": all_secrets_text()}])
    finally:
        client.close()
        handle.shutdown()
    exported = repr([(s.attributes, [e.attributes for e in s.events]) for s in exporter.get_finished_spans()])
    assert "You are the Orchestrator of a bank." in exported
    for sample in SAMPLES:
        assert sample.secret not in exported, sample
    assert "hunter2" not in exported
