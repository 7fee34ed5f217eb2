"""The secret rules: which attribute keys and which pieces of text are credentials.

One rule set for both sides: the SDK redacts with it before export
(`tracefix.redaction`) and the collector before storing spans from any instrumentation
(`tracefix.collector.redact`). Only `re` at import time: the bare `tracefix` package uses it.

Attribute keys: a key whose last part names a credential (``authorization``, ``api_key``,
``x-api-key``, ``password``, ``secret``, ``token``, ``cookie``, ``aws_secret_access_key``, ...)
has its whole value replaced; ``.``, ``-``, ``_`` and camelCase separate the words alike
(``aws.secret.access.key``, ``awsSecretAccessKey``). ``input_tokens`` or ``token_count`` are
not such names.

Text (any string value, JSON text included): OpenAI/Anthropic keys (``sk-…``), AWS access
key ids (``AKIA…``/``ASIA…``), Google API keys (``AIza…``), GitHub tokens (``ghp_`` ``gho_``
``ghu_`` ``ghs_`` ``ghr_`` ``github_pat_``), GitLab tokens (``glpat-``), JWTs, Slack tokens
(``xoxb-``/``xoxp-``/``xapp-``…) and webhook URLs, PEM private-key blocks, ``Bearer``/``Basic``
credentials, the password of a URL (``postgres://user:…@host``: the rest of the URL
stays), an AWS secret access key written near its key id (40 characters of mixed case),
and the value written after a credential's name (``"api_key": "…"``, ``password=…``,
``Authorization: Bearer …``, ``aws_secret_access_key = …``, ``AWS.Secret.Access.Key: …``). A replacement
never swallows a quote or a backslash, so JSON text stays valid JSON. Ordinary prose
("a basic question", "the token: each word") and ids (``task-1234``, ``chatcmpl-…``) stay.

Speed: every match of a rule contains one of its hints, lowercase literals. One pass over
the lowercased text looks for all hints at once (Hyperscan where the collector extra
installed it, else Aho-Corasick, a base dependency; substring searches only where neither
imports), and only the rules whose
hints are present run their regex: text without any hint costs that one pass.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Callable

REDACTED = "[REDACTED]"

# Shorter text cannot hold any rule's match (the shortest, "passwd=x", is 8 characters).
MIN_SECRET_CHARS = 8

_TOKEN = r"A-Za-z0-9_\-"  # a generated token's characters: never a quote, a backslash or a space
# Where a token starts: a word boundary, or after an escaped newline or tab in JSON text
# ("...\\nAKIA...": no boundary between the escape's letter and the token)
_START = r"(?:\b|(?<=\\[nrt]))"
# A scheme's credential: 8+ characters with a digit, or 24+ without ("Bearer of bad news"
# and "a basic question" are prose; "Bearer abc123..." is not).
_CREDENTIAL = r"(?:(?=[A-Za-z0-9._~+/\-]*[0-9])[A-Za-z0-9._~+/\-]{8,}|[A-Za-z0-9._~+/\-]{24,})=*"
# What follows a credential's name when a value is written after it: JSON and Python dicts
# (quote, possibly escaped), headers and YAML (":"), env files and URLs ("=").
_AFTER_NAME = (":", "=", '"', "'", "\\")
_SEPARATOR = r"""(?:\\*["'][ \t]*)?[:=][ \t]*(?P<q>\\*["'])?"""
# The value: up to the closing quote when quoted, else up to a space or a delimiter.
_VALUE = r"""(?(q)[^"'\\\n]+|[^\s"',;}&\\]+)"""

# Names that always stand for a credential, whatever their value looks like.
_FIELD_NAMES = (r"x[_-]api[_-]key|api[_-]?key|x[_-]auth[_-]token"
                r"|(?:access|refresh|auth|id|session|bearer|api|private|bot|github|gitlab|slack|csrf)[_-]?token"
                r"|client[_-]?secret|secret[_-]?key|passwd|passphrase|private[_-]?key")
_FIELD_WORDS = ("api_key", "api-key", "apikey", "token", "secret", "passwd", "passphrase", "private_key",
                "private-key", "privatekey", "secret_key", "secret-key", "secretkey")
# English words that are also credential names: a value only when written as a field (a
# quoted name, or "="), or after ":" when the value looks generated (a digit or a symbol).
_PLAIN_WORDS = ("password", "secret", "token")


@dataclass(frozen=True)
class SecretRule:
    """One kind of secret in text: `pattern` finds it, `replace` is what stays in its place,
    and every match contains one of `hints` (lowercase)."""

    name: str
    hints: tuple[str, ...]
    pattern: re.Pattern
    replace: str | Callable[[re.Match], str] = REDACTED


def _followed(words: tuple[str, ...], separators: tuple[str, ...] = _AFTER_NAME) -> tuple[str, ...]:
    return tuple(w + s for w in words for s in separators)


def _ascii_regex(pattern: str) -> re.Pattern:
    # ASCII case folding and classes, as the hint scan's (Hyperscan folds ASCII only)
    return re.compile(pattern, re.ASCII)


def _keep_name(match: re.Match) -> str:
    return match.group("name") + REDACTED


def _keep_name_if_any(match: re.Match) -> str:
    return (match.group("name") or "") + REDACTED


# An AWS secret access key is 40 characters of base64 (no padding) with no marker of its
# own: it is taken for one only within _AWS_NEAR characters of an access key id, and only
# with both cases in it, so hex (git SHAs, trace ids) stays even there.
_AWS_KEY_ID = _START + r"(?:AKIA|ASIA)[A-Z0-9]{16}\b"
_AWS_NEAR = 100
_AWS_SECRET = (r"(?:(?<![A-Za-z0-9/+=_\-])|(?<=\\[nrt]))(?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[A-Z])"
               r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=_\-])")


TEXT_RULES: tuple[SecretRule, ...] = (
    SecretRule("pem-private-key", ("private key-----",), _ascii_regex(
        r"-----BEGIN (?P<kind>[A-Z0-9 ]*)PRIVATE KEY-----(?:[^\"]*?-----END (?P=kind)PRIVATE KEY-----"
        r"|(?:\\+[nrt]|[A-Za-z0-9+/=\s:,.\-])*)")),  # a cut block: up to the end of its body
    # OpenAI (sk-proj-, sk-svcacct-, sk-admin-) and Anthropic (sk-ant-) keys; any other sk-
    # key must look generated (a digit or a capital), so "sk-learn-compatible" stays.
    SecretRule("sk-api-key", ("sk-",), _ascii_regex(
        rf"{_START}sk-(?:(?:proj|svcacct|admin|ant)-[{_TOKEN}]{{8,}}|(?=[{_TOKEN}]*[0-9A-Z])[{_TOKEN}]{{16,}})")),
    # before the id's own rule, which would hide the id this one looks for
    SecretRule("aws-secret-beside-key-id", ("akia", "asia"), _ascii_regex(
        rf"(?P<name>{_AWS_KEY_ID}(?s:.){{0,{_AWS_NEAR}}}?){_AWS_SECRET}"
        rf"|{_AWS_SECRET}(?=(?s:.){{0,{_AWS_NEAR}}}?{_AWS_KEY_ID})"), _keep_name_if_any),
    SecretRule("aws-access-key-id", ("akia", "asia"), _ascii_regex(_AWS_KEY_ID)),
    SecretRule("google-api-key", ("aiza",), _ascii_regex(rf"{_START}AIza[{_TOKEN}]{{35}}")),
    SecretRule("github-token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), _ascii_regex(
        _START + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    SecretRule("gitlab-token", ("glpat-",), _ascii_regex(rf"{_START}glpat-[{_TOKEN}]{{20,}}")),
    SecretRule("jwt", ("eyj",), _ascii_regex(rf"{_START}eyJ[{_TOKEN}]{{8,}}\.eyJ[{_TOKEN}]{{8,}}\.[{_TOKEN}+/=]*")),
    SecretRule("slack-token", ("xox", "xapp-"), _ascii_regex(
        _START + r"(?:xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-[0-9]+-[A-Za-z0-9\-]{10,})")),
    SecretRule("slack-webhook", ("hooks.slack.com/",), _ascii_regex(
        r"(?P<name>hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9_/\-]+"), _keep_name),
    SecretRule("bearer-or-basic", _followed(("bearer", "basic"), (" ", "\t")), _ascii_regex(
        rf"(?P<name>\b(?i:bearer|basic)[ \t]+){_CREDENTIAL}"), _keep_name),
    # "Authorization: Bearer x" keeps the scheme and goes on past its space
    SecretRule("authorization-field", _followed(("authorization",)), _ascii_regex(
        rf"(?P<name>(?i:(?<![a-z0-9])(?:proxy[_-]?)?authorization){_SEPARATOR}"
        r"(?:(?i:bearer|basic|token|digest|negotiate)[ \t]+)?)" + _VALUE), _keep_name),
    # the AWS credentials file writes "aws_secret_access_key = ...", spaces around "="
    SecretRule("aws-secret-access-key", ("secret_access", "secret-access", "secret.access", "secretaccess"), _ascii_regex(
        rf"(?P<name>(?i:secret[_.\-]?access[_.\-]?key)(?:\\*[\"'])?[ \t]*[:=][ \t]*(?P<q>\\*[\"'])?){_VALUE}"),
        _keep_name),
    # scheme://user:PASSWORD@host (JSON may escape the slashes): the password alone goes
    SecretRule("url-password", ("://", ":\\/\\/"), _ascii_regex(
        r"(?P<name>:(?:\\?/){2}[^\s/\\?#@:\"'<>]*:)[^\s/\\?#\"'<>]+(?=@[^\s@/\\?#\"'<>])"), _keep_name),
    SecretRule("credential-field", _followed(_FIELD_WORDS), _ascii_regex(
        rf"(?P<name>(?i:(?<![a-z0-9])(?:{_FIELD_NAMES})){_SEPARATOR}){_VALUE}"), _keep_name),
    SecretRule("credential-word-field", _followed(_PLAIN_WORDS, ('"', "'", "\\", "=")), _ascii_regex(
        r"(?P<name>(?i:(?<![a-z0-9])(?:(?:password|secret)(?:\\*[\"'][ \t]*[:=]|=)|token=))[ \t]*"
        rf"(?P<q>\\*[\"'])?){_VALUE}"), _keep_name),
    # "token" as a quoted field is also the API's own vocabulary: logprobs are
    # {"token": "Hello", "logprob": ...} for every generated token. A credential is long.
    SecretRule("token-field", _followed(("token",), ('"', "'", "\\")), _ascii_regex(
        r"(?P<name>(?i:(?<![a-z0-9])token)\\*[\"'][ \t]*[:=][ \t]*(?P<q>\\*[\"'])?)"
        rf"(?=[^\s\"',;}}&\\]{{16}}){_VALUE}"), _keep_name),
    SecretRule("credential-word-colon", _followed(_PLAIN_WORDS, (":",)), _ascii_regex(
        rf"(?P<name>(?i:(?<![a-z0-9])(?:{'|'.join(_PLAIN_WORDS)})):[ \t]*)"
        rf"(?=[^\s\"',;}}&\\]*[0-9!@#$%^*+/=~_.\-])[^\s\"',;}}&\\]{{6,}}"), _keep_name),
)

# Attribute keys that name a credential: the key's last part (after ".", "_" or "-").
_SECRET_KEY = re.compile(
    r"(?:^|[._\-\s])(?:(?:proxy[_-]?)?authorization|(?:x[_-])?api[_-]?key|passw(?:or)?d|passphrase|secret"
    r"|(?:client|shared)[_-]?secret|secret[_-]?(?:access[_-]?)?key|private[_-]?key|token"
    r"|(?:access|refresh|auth|id|session|bearer|api|private|csrf|security)[_-]?token|(?:set[_-])?cookie"
    r"|credentials?)$")
_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")  # awsSecretAccessKey: a word starts at each capital
_key_verdicts: dict[str, bool] = {}  # attribute names repeat on every span: decide each once


def is_secret_key(key: str) -> bool:
    """Does the attribute `key` name a credential (its whole value is then a secret)?"""
    verdict = _key_verdicts.get(key)
    if verdict is None:
        words = _CAMEL_HUMP.sub("_", key).lower().replace(".", "_")  # aws.secret.access.key too
        verdict = _SECRET_KEY.search(words) is not None
        if len(_key_verdicts) < 65536:  # keys with ids in them must not grow this forever
            _key_verdicts[key] = verdict
    return verdict


# --- which rules can match: one pass over the text --------------------------------------

HINTS = [hint for rule in TEXT_RULES for hint in rule.hints]
_HINT_RULE = [rule for rule in TEXT_RULES for _ in rule.hints]


HintFinder = tuple[Callable[[str], bool], Callable[[str], set[int]]]  # (any hint in a text?, the hints' indexes)


def substring_hint_finder() -> HintFinder:
    """Substring searches over the lowercased text: first each distinct word, then its
    separators, so the ~100 hints cost about one search per word."""
    by_word: dict[str, list[tuple[int, str]]] = {}
    for index, hint in enumerate(HINTS):
        by_word.setdefault(hint.rstrip(" \t:=\"'\\") or hint, []).append((index, hint))
    groups = list(by_word.items())

    def indexes(text: str) -> set[int]:
        lowered = text.lower()
        return {i for word, hints in groups if word in lowered for i, hint in hints if hint in lowered}

    def any_hint(text: str) -> bool:
        lowered = text.lower()
        return any(word in lowered and any(hint in lowered for _, hint in hints) for word, hints in groups)

    return any_hint, indexes


def automaton_hint_finder() -> HintFinder:
    """Aho-Corasick (`ahocorasick_rs`): all hints in one pass over the lowercased text."""
    import ahocorasick_rs

    # leftmost-first finds a match whenever there is one, faster than listing them all
    first = ahocorasick_rs.AhoCorasick(HINTS, matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST,
                                       implementation=ahocorasick_rs.Implementation.DFA)
    every = ahocorasick_rs.AhoCorasick(HINTS)

    def any_hint(text: str) -> bool:
        return bool(first.find_matches_as_indexes(text.lower()))

    def indexes(text: str) -> set[int]:
        return {i for i, _, _ in every.find_matches_as_indexes(text.lower(), overlapping=True)}

    return any_hint, indexes


def hyperscan_hint_finder() -> HintFinder:
    """Hyperscan (x86-64): all hints in one SIMD pass, ASCII case folded by the engine."""
    return _hyperscan_finders()[0]


@functools.cache  # one compiled database for texts and bytes
def _hyperscan_finders() -> tuple[HintFinder, Callable[[bytes], bool]]:
    """Hyperscan's hint finder, and its any-hint answer for UTF-8 bytes as they are."""
    import threading

    import hyperscan

    database = hyperscan.Database()
    database.compile(expressions=[re.escape(h).encode() for h in HINTS], ids=list(range(len(HINTS))),
                     elements=len(HINTS),
                     flags=[hyperscan.HS_FLAG_CASELESS | hyperscan.HS_FLAG_SINGLEMATCH] * len(HINTS))
    per_thread = threading.local()  # a scan runs without the GIL: one scratch space per thread

    def scan(text: str, on_match: Callable, context: Any = None) -> None:
        scan_utf8(text.encode("utf-8", "surrogatepass"), on_match, context)

    def scan_utf8(data: bytes, on_match: Callable, context: Any = None) -> None:
        scratch = getattr(per_thread, "scratch", None)
        if scratch is None:
            scratch = per_thread.scratch = hyperscan.Scratch(database)
        database.scan(data, match_event_handler=on_match, context=context, scratch=scratch)

    def add_index(index: int, start: int, end: int, flags: int, found: set[int]) -> None:
        found.add(index)

    def stop(index: int, start: int, end: int, flags: int, context: Any) -> bool:
        return True  # the first hint answers any_hint: stop scanning

    def indexes(text: str) -> set[int]:
        found: set[int] = set()
        scan(text, add_index, found)
        return found

    def any_utf8_hint(data: bytes) -> bool:
        try:
            scan_utf8(data, stop)
        except hyperscan.ScanTerminated:
            return True
        return False

    def any_hint(text: str) -> bool:
        return any_utf8_hint(text.encode("utf-8", "surrogatepass"))

    return (any_hint, indexes), any_utf8_hint


def _fastest_hint_finder() -> HintFinder:
    """Hyperscan where its wheel exists (the collector extra on x86-64), else Aho-Corasick
    (a base dependency: the bare SDK), else substring searches (a platform with no wheel)."""
    for finder in (hyperscan_hint_finder, automaton_hint_finder):
        try:
            return finder()
        except ImportError:
            pass
    return substring_hint_finder()


_any_hint, _hint_indexes = _fastest_hint_finder()


def _utf8_hint_finder() -> Callable[[bytes], bool] | None:
    try:
        return _hyperscan_finders()[1]
    except ImportError:
        return None


_any_utf8_hint = _utf8_hint_finder()


def utf8_may_hold_secret(data: bytes) -> bool:
    """Whether UTF-8 bytes (an OTLP protobuf body, whose strings are among its bytes as they
    are) may hold text with a secret: False only when Hyperscan finds no hint in them; True
    where it is missing, as the other finders lower text as Unicode, which bytes do not."""
    return _any_utf8_hint is None or _any_utf8_hint(data)


def may_hold_secret(text: str) -> bool:
    """False when no rule can match `text` (one pass): the fast answer for most text."""
    return len(text) >= MIN_SECRET_CHARS and _any_hint(text)


def rules_hit(text: str) -> list[SecretRule]:
    """The rules whose hints `text` contains (in TEXT_RULES order): the only ones that can match."""
    found = _hint_indexes(text)
    if not found:  # most text: no rule to try (and no walk over them all)
        return []
    hit = {id(_HINT_RULE[i]) for i in found}
    return [rule for rule in TEXT_RULES if id(rule) in hit]


def redact_text(text: str) -> str:
    """`text` with every secret the rules know replaced."""
    if len(text) < MIN_SECRET_CHARS:
        return text
    for rule in rules_hit(text):
        text = rule.pattern.sub(rule.replace, text)
    return text


def redact_value(key: str, value: Any) -> Any:
    """An attribute's value with its secrets replaced: all of it when `key` names a
    credential; else the secrets in its text, in the strings of a list or tuple (same type
    back) and in the values of a mapping (each under its own key). Unchanged: the same object."""
    if value is None or value is True or value is False:
        return value
    if is_secret_key(key):
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, (list, tuple)):
        items = [redact_value(key, v) if isinstance(v, (str, list, tuple, dict)) else v for v in value]
        return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
    if isinstance(value, dict):
        out = {k: redact_value(str(k), v) for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) else out
    return value
