"""Realistic secrets, one or more per redaction rule, and ordinary text that must survive.

Shared by the SDK tests (tests/instrumentation) and the collector's end-to-end tests
(tests/collector). The secrets are generated here (seeded), so no token-shaped literal
sits in the repository.
"""
from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

_rng = random.Random(20251123)
_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGITS = string.ascii_uppercase + string.digits


def _draw(alphabet: str, n: int) -> str:
    """n characters that look generated: at least one digit and one capital in there."""
    body = [_rng.choice(alphabet) for _ in range(n - 2)]
    return "".join(body) + _rng.choice(string.digits) + _rng.choice(string.ascii_uppercase)


def _b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


@dataclass(frozen=True)
class Sample:
    rule: str  # the TEXT_RULES name that must catch it
    text: str  # where it is written (message text, a header, a config line)
    secret: str  # what must not survive

    def __str__(self) -> str:
        return f"{self.rule}: {self.text!r}"


def _sample(rule: str, template: str, secret: str) -> Sample:
    return Sample(rule, template.format(s=secret), secret)


_pem_body = "\n".join(_draw(string.ascii_letters + string.digits + "+/", 64) for _ in range(4))

SAMPLES: tuple[Sample, ...] = (
    _sample("sk-api-key", "my OpenAI key is {s}, keep it safe", "sk-proj-" + _draw(_ALNUM + "_-", 48)),
    _sample("sk-api-key", "anthropic={s}", "sk-ant-api03-" + _draw(_ALNUM + "_-", 80)),
    _sample("sk-api-key", "legacy key {s} rotated", "sk-" + _draw(_ALNUM, 48)),
    _sample("aws-access-key-id", "AWS key id {s} in us-east-1", "AKIA" + _draw(_UPPER_DIGITS, 16)),
    _sample("aws-access-key-id", "temporary credentials {s}.", "ASIA" + _draw(_UPPER_DIGITS, 16)),
    _sample("aws-secret-access-key", "[default]\naws_secret_access_key = {s}\nregion = eu-west-1",
            _draw(_ALNUM + "/+", 40)),
    _sample("aws-secret-access-key", '{{"SecretAccessKey": "{s}", "Expiration": "2026-01-01"}}',
            _draw(_ALNUM + "/+", 40)),
    _sample("google-api-key", "maps client with {s} loaded", "AIza" + _draw(_ALNUM + "_-", 35)),
    *(_sample("github-token", "git clone https://{s}@github.com/org/repo", prefix + _draw(_ALNUM, 36))
      for prefix in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    _sample("github-token", "fine-grained {s}", "github_pat_" + _draw(_ALNUM, 22) + "_" + _draw(_ALNUM, 59)),
    _sample("gitlab-token", "GitLab PAT {s} for CI", "glpat-" + _draw(_ALNUM + "_-", 20)),
    _sample("jwt", "the id token was {s} (expired)", ".".join((
        _b64url({"alg": "HS256", "typ": "JWT"}), _b64url({"sub": "user-42", "iat": 1700000000}),
        _draw(_ALNUM + "_-", 43)))),
    _sample("slack-token", "bot token {s}", "xoxb-" + _draw(string.digits, 12) + "-" + _draw(string.digits, 13)
            + "-" + _draw(_ALNUM, 24)),
    _sample("slack-token", "user token {s}", "xoxp-" + _draw(string.digits, 12) + "-" + _draw(_ALNUM, 32)),
    _sample("slack-token", "socket mode {s}", "xapp-1-" + _draw(_UPPER_DIGITS, 11) + "-" + _draw(string.digits, 13)
            + "-" + _draw(_ALNUM, 64)),
    _sample("slack-webhook", "alerts go to https://hooks.slack.com/services/{s} now",
            "T" + _draw(_UPPER_DIGITS, 8) + "/B" + _draw(_UPPER_DIGITS, 8) + "/" + _draw(_ALNUM, 24)),
    _sample("pem-private-key",
            "deploy key:\n-----BEGIN RSA PRIVATE KEY-----\n{s}\n-----END RSA PRIVATE KEY-----\nthanks", _pem_body),
    _sample("pem-private-key", "-----BEGIN OPENSSH PRIVATE KEY-----\n{s}", _pem_body[:100]),  # cut short
    _sample("bearer-or-basic", "call it with Bearer {s} please", _draw(_ALNUM + "._-", 32)),
    _sample("authorization-field", "Authorization: Basic {s}", "dXNlcjpodW50ZXIy" + _draw(_ALNUM, 8)),
    _sample("authorization-field", "{{'authorization': 'token {s}'}}", _draw(_ALNUM, 12)),
    _sample("credential-field", '{{"api_key": "{s}", "model": "gpt-x"}}', _draw(_ALNUM, 24)),
    _sample("credential-field", "x-api-key: {s}", _draw(_ALNUM, 24)),
    _sample("credential-field", "export OPENAI_API_KEY={s}", _draw(_ALNUM, 24)),
    _sample("credential-field", "POST /token?client_secret={s}&grant_type=client_credentials", _draw(_ALNUM, 24)),
    _sample("credential-field", '{{"access_token": "{s}", "expires_in": 3600}}', _draw(_ALNUM, 24)),
    _sample("credential-word-field", '{{"user": "bob", "password": "{s}"}}', "correct horse " + _draw(_ALNUM, 6)),
    _sample("credential-word-field", "db://app?password={s}&ssl=1", _draw(_ALNUM, 12)),
    _sample("credential-word-field", "GET /feed?token={s}&page=2", _draw(_ALNUM, 10)),
    _sample("token-field", '{{"user": "bob", "token": "{s}"}}', _draw(_ALNUM, 32)),
    _sample("credential-word-colon", "login bob, password: {s} (do not share)", "Tr0ub4dor!" + _draw(_ALNUM, 4)),
    # drawn after the samples above, so theirs stay the same
    *(_sample("aws-secret-beside-key-id", template.replace("{id}", "AKIA" + _draw(_UPPER_DIGITS, 16)),
              _draw(_ALNUM + "/+", 40))
      for template in ("Access key ID: {id}\nSecret access key: {s}\nkeep both in the vault",
                       "User name,Access key ID,Secret access key\ndeploy-bot,{id},{s}",
                       "boto3.client('s3', '{s}', '{id}')")),
    *(_sample("url-password", template, _draw(_ALNUM + "-._~!$*", 18)) for template in (
        "DATABASE_URL=postgres://bank_app:{s}@db.internal:5432/ledger?sslmode=require",
        '{{"broker": "amqp://guest:{s}@rabbit.local:5672/%2F"}}',
        "cache at redis://:{s}@10.0.0.7:6379/0, then retry",
        "mysql://root:{s}@[::1]:3306/app",
        "git remote add origin https://deployer:{s}@git.example.com/org/repo.git")),
)

# Ordinary text and ids that no rule may touch.
ORDINARY: tuple[str, ...] = (
    "Task: Alice Chen asks how much money is in her savings account.",
    "This is a basic question; the bearer of bad news arrived. Basic JavaScript, Bearer bonds.",
    "Use sk-learn-compatible estimators and a task-management board.",
    "ids: task-1234 ACC-1234 call_1_abc chatcmpl-9aB3cD4eF5gH6 0f3a9c2b4d5e6f708192a3b4c5d6e7f8 "
    "550e8400-e29b-41d4-a716-446655440000 span 1a2b3c4d5e6f7a8b",
    '{"max_tokens": 100, "input_tokens": 5, "token_count": 7, "usage": {"prompt_tokens": 12}}',
    "Reset your password: click the link below. The token: each word piece counts. The secret: never tell.",
    "Markets in ASIA and Asia-Pacific; AKIA is not a word; AIza is how Google keys start.",
    "xoxo, see you soon; eyJ is how base64 JSON starts; ghost_protocol and glpat are words here.",
    "Authorization required before any api key rotation; store PRIVATE KEY files in a vault.",
    "https://hooks.example.com/services/abc and https://slack.com/help",
    "The secret to good soup is time. Password policy: 12 characters.",
    # logprobs name each generated token "token"
    '{"logprobs": {"content": [{"token": "Hello", "bytes": [72], "logprob": -0.1, "top_logprobs": []}, '
    '{"token": " ACC-1001", "logprob": -0.2}, {"token": "bank-agent", "logprob": -0.3}]}}',
)

SECRET_KEYS = ("authorization", "http.request.header.authorization", "api_key", "openai.api_key", "x-api-key",
               "http.request.header.x-api-key", "password", "db.password", "secret", "client_secret", "token",
               "access_token", "app.accessToken", "cookie", "http.response.header.set-cookie",
               "AWS_SECRET_ACCESS_KEY", "private_key", "credentials")
HARMLESS_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "llm.token_count.prompt",
                 "gen_ai.request.max_tokens", "tracefix.snapshot.key", "session.id", "secret_name", "tokenizer",
                 "llm.input_messages.0.message.content", "gen_ai.openai.api_base", "input.value")


def all_secrets_text() -> str:
    """Every sample in one message, a paragraph each."""
    return "\n\n".join(s.text for s in SAMPLES)
