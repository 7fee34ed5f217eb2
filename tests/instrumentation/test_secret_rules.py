"""The shared secret rules (tracefix.secret_rules), rule by rule, and the SDK applying them
to a real OpenAI call's spans before export."""
from __future__ import annotations

import base64
import json
import random
import string
import time

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


# --- AWS secret keys without their name, URL passwords, credential keys however spelled --------
# Written from how these are pasted (the AWS console's CSV, `aws configure`, connection strings),
# not from the rules' regexes; each with the near misses that must stay.

_rng = random.Random(35)


def _aws_pair() -> tuple[str, str]:
    """An access key id and its secret: 30 random bytes in base64, as AWS draws them."""
    key_id = "AKIA" + "".join(_rng.choice(string.ascii_uppercase + "234567") for _ in range(16))
    secret = base64.b64encode(_rng.randbytes(30)).decode()
    assert len(secret) == 40 and secret != secret.lower() and secret != secret.upper()
    return key_id, secret


AWS_CONTEXTS = (
    "AWS Access Key ID [None]: {id}\nAWS Secret Access Key [None]: {secret}\nDefault region name [None]: eu-west-1",
    "Access key ID,Secret access key\n{id},{secret}\n",
    "use {id}:{secret} for the upload",
    "| deploy-bot | {id} | {secret} | active |",
    "{secret} <- that one goes with {id}",
    '{{"k": "{id}", "v": "{secret}"}}',
    "creds = ('{id}',\n         '{secret}')",
    "{id}\n{secret}",
)


@pytest.mark.parametrize("context", AWS_CONTEXTS)
def test_a_bare_aws_secret_key_beside_its_key_id_is_removed(context):
    key_id, secret = _aws_pair()
    text = context.format(id=key_id, secret=secret)
    for written in (text, json.dumps({"content": text}), json.dumps({"arguments": json.dumps({"note": text})})):
        redacted = redact_text(written)
        assert secret not in redacted and key_id not in redacted, redacted
        assert secret not in redact_text(written.replace(key_id, "ASIA" + key_id[4:]))  # temporary credentials


AWS_KEY_NAMES = ("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", "aws.secret.access.key", "aws-secret-access-key",
                 "awsSecretAccessKey", "AwsSecretAccessKey", "Aws.Secret_Access-Key", "secretAccessKey",
                 "tool.args.aws_secret_access_key", "boto.credentials.aws_secret_access_key")


@pytest.mark.parametrize("name", AWS_KEY_NAMES)
def test_an_aws_secret_key_alone_under_its_name_is_removed(name):
    _, secret = _aws_pair()
    assert redact_value(name, secret) == REDACTED
    arguments = {"bucket": "reports", "profile": {"region": "eu-west-1", name: secret}}
    assert redact_value("gen_ai.tool.call.arguments", arguments) == \
        {"bucket": "reports", "profile": {"region": "eu-west-1", name: REDACTED}}
    as_text = json.dumps(arguments)
    assert secret not in redact_text(as_text) and "eu-west-1" in redact_text(as_text)
    assert secret not in redact_text(json.dumps({"arguments": as_text}))  # tool call arguments in a message list
    assert secret not in redact_text(f"{name}: {secret}") and secret not in redact_text(f"{name}={secret}")


URL_PASSWORDS = ("Zx9-pass.word", "p%40ss%3Aw0rd", "we@kpass1", "a:b:c9", "tr0ub4dor&3", "hunter2!$*")
URLS = ("postgres://bank_app:{pw}@db.internal:5432/ledger", "postgresql+psycopg2://u:{pw}@10.1.2.3/app?sslmode=require",
        "mysql://root:{pw}@localhost:3306/shop", "redis://:{pw}@cache:6379/0", "rediss://default:{pw}@r.example:6380",
        "amqp://guest:{pw}@rabbit/%2F", "amqps://svc:{pw}@mq.example:5671/vh",
        "mongodb+srv://reader:{pw}@cluster0.ab1cd.mongodb.net/db?retryWrites=true",
        "https://deployer:{pw}@git.example.com/org/repo.git", "ftp://anon:{pw}@files.example.com/pub/")


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("password", URL_PASSWORDS)
def test_a_password_in_a_url_is_removed_and_the_rest_of_the_url_stays(url, password):
    written = url.format(pw=password)
    user_and_scheme, host_and_rest = url.split("{pw}")
    for text in (f"connecting to {written} now", json.dumps({"dsn": written}), written.replace("/", "\\/")):
        redacted = redact_text(text)
        assert password not in redacted, redacted
        assert REDACTED in redacted
        assert host_and_rest.lstrip("@").replace("/", "\\/" if "\\/" in text else "/") in redacted, "the host stays"
    assert password not in redact_value("db.connection_string", written)
    assert redact_text(written) == user_and_scheme + REDACTED + host_and_rest


def test_hex_and_base64_strings_away_from_a_key_id_are_left_alone():
    sha = "".join(_rng.choice("0123456789abcdef") for _ in range(40))
    blob = base64.b64encode(_rng.randbytes(30)).decode()  # 40 characters of mixed case, like a secret
    trace_id, span_id = "".join(_rng.choice("0123456789abcdef") for _ in range(48))[:32], "00f067aa0ba902b7"
    key_id, _ = _aws_pair()
    ordinary = (f"Merged {sha} into main", f"ETag: {blob}", f"traceparent: 00-{trace_id}-{span_id}-01",
                f"sha1 {sha.upper()} checked", f"cache key {blob}; see ASIAN markets and akia{sha[:16]}",
                f"aws_access_key_id: rotated. Token digest {blob}")
    for text in ordinary:
        assert redact_text(text) == text
    # beside a key id, hex is still no secret key (an AWS secret key has both cases)
    assert sha in redact_text(f"key {key_id} deployed from commit {sha}")
    # far from it, a secret-shaped string stays
    far = f"key {key_id} was rotated." + " Nothing else happened." * 30 + f" Build {blob}"
    assert blob in redact_text(far) and key_id not in redact_text(far)


@pytest.mark.parametrize("text", (
    "https://example.com:8443/health", "ssh://git@github.com:22/org/repo.git", "git@github.com:org/repo.git",
    "http://[::1]:8080/x?mail=ops@b.example", "mailto:ops@example.com", "https://user@example.com/login",
    "http://host:80/a:b@c", "see http://a.example, then ping me:bob@b.example", "s3://bucket/key:with@chars",
    "the meeting is at 10:30@home", "https://example.com/@handle:42", "file:///tmp/a:b@c"))
def test_urls_without_a_password_are_left_alone(text):
    assert redact_text(text) == text


@pytest.mark.parametrize("key", ("aws_access_key_id", "aws.region", "db.connection_string", "tokenizerName",
                                 "maxTokens", "inputTokenCount", "secretName", "aws.secret.name"))
def test_keys_near_credential_names_keep_their_value(key):
    assert not is_secret_key(key)
    assert redact_value(key, "postgres://app@db:5432/x") == "postgres://app@db:5432/x"


def test_the_new_rules_stay_fast_on_hostile_text():
    """Text made to make the AWS and URL rules backtrack: about a megabyte each (each takes
    0.01-0.15 s here), bounded time."""
    key_id, _ = _aws_pair()
    hostile = ((f"{key_id} " + "aB3/" * 9 + " ") * 20_000,  # ids, each beside a 36-character token
               (f"{key_id} " + "aB3/" * 10 + "-") * 17_000,  # 40 characters, then one a key cannot end on
               ("aB3/" * 10 + "- ") * 24_000 + key_id, key_id + "Ab1+" * 250_000,
               "://a:" * 200_000, ("x://" + "a" * 60 + ":" + "b@" * 30) * 8000, "https://u:" + "p" * 1_000_000)
    for text in hostile:
        started = time.perf_counter()
        redact_text(text)
        assert time.perf_counter() - started < 3.0, text[:40]


TOKEN_RULES = {"sk-api-key", "aws-access-key-id", "google-api-key", "github-token", "gitlab-token", "jwt", "slack-token"}


@pytest.mark.parametrize("sample", [s for s in SAMPLES if s.rule in TOKEN_RULES], ids=str)
def test_a_token_starting_a_line_of_json_text_is_removed(sample):
    """JSON writes a newline as a backslash and "n", right against the token."""
    text = json.dumps({"content": f"here it is:\n{sample.secret}\n\tand\t{sample.secret}"})
    assert sample.secret not in redact_text(text)


def test_the_sdk_redacts_span_and_event_names_and_status_descriptions():
    """An exception's message becomes the span's status description; a URL can name a span."""
    from opentelemetry.trace import Status, StatusCode

    from tracefix import runtime

    key_id, secret = _aws_pair()
    password = "s3cr" + "".join(_rng.choice(string.ascii_letters + string.digits) for _ in range(12))
    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))
    try:
        with runtime.tracer().start_as_current_span(f"GET https://bot:{password}@api.example/v1") as span:
            span.add_event(f"retry with {key_id} {secret}")
            span.set_status(Status(StatusCode.ERROR, f"ConnectionError: postgres://app:{password}@db/x refused"))
    finally:
        handle.shutdown()
    (exported,) = exporter.get_finished_spans()
    assert exported.name == f"GET https://bot:{REDACTED}@api.example/v1"
    assert exported.status.description == f"ConnectionError: postgres://app:{REDACTED}@db/x refused"
    assert exported.status.status_code is StatusCode.ERROR
    assert [e.name for e in exported.events] == [f"retry with {REDACTED} {REDACTED}"]


def test_the_bare_sdk_scans_in_one_pass_without_hyperscan(tmp_path):
    """Hyperscan comes with the collector extra only; a bare `pip install tracefix` must still
    scan a span's text in one pass (Aho-Corasick, a base dependency: 4 us a chat span against
    22 for substring searches), so the overhead benchmark holds for production agents."""
    import os
    import subprocess
    import sys
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    assert any(dep.startswith("ahocorasick-rs") for dep in project["dependencies"])
    blocker = tmp_path / "sitecustomize.py"  # the bare install: no hyperscan module to import
    blocker.write_text("import sys\nsys.modules['hyperscan'] = None\n")
    probe = ("from tracefix import secret_rules\n"
             "print(secret_rules._any_hint.__qualname__.split('.')[0])\n")
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONPATH": str(tmp_path)}).stdout.strip()
    assert found == "automaton_hint_finder"
