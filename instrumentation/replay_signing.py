"""Signed replay records: a replay runs only what the app itself recorded.

A session's entrypoint and inputs travel as span attributes, and anyone holding the
collector's ingest token can write spans. A replay imports that entrypoint and calls it
with those inputs, so the app signs them: HMAC-SHA256 under a replay key that the app and
the replay worker hold and the collector never needs (``TRACEFIX_REPLAY_KEY``, or
``tracefix.init(replay_key=...)``), over the canonical JSON (sorted keys, compact) of
``{"entrypoint", "inputs", "session_id"}``. The record is signed as it leaves the process,
after the SDK's redaction and truncation (`tracefix.redaction` calls the `Signer` last), so
the signature covers exactly what the collector receives. The session's root span carries
``tracefix.replay.signature`` and ``tracefix.replay.key_id``: a tag derived from the key,
so a record signed with another key is told apart from a forged or altered one.

The reader (`tracefix.replay.pipeline`, in a worker or ``tracefix replay``) checks the
signature against what the collector stored (:func:`why_unverified`). When the collector's
own redaction or truncation changed a signed field, the check fails and says which field
reads ``[REDACTED]`` or was cut.
"""
from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any, Iterable, Mapping

from . import semconv as sc
from .attributes import TRUNCATION_MARKER, canonical_json, from_json_text, warn_once
from .secret_rules import REDACTED

ENV_VAR = "TRACEFIX_REPLAY_KEY"
# shorter keys are accepted with a warning: an HMAC is only as strong as its key
MIN_KEY_CHARS = 32
ALLOW_HINT = (f"give this process the app's replay key in {ENV_VAR}, or pass --allow-unsigned to replay it "
              "anyway")


def as_key(key: str | bytes | None) -> bytes | None:
    """The key as bytes; None or empty text means no key."""
    if not key:
        return None
    if isinstance(key, str):
        key = key.strip().encode("utf-8")
    if len(key) < MIN_KEY_CHARS:
        warn_once("replay-key-short", "tracefix: the replay key has fewer than %d characters; generate one "
                  "with `python -c 'import secrets; print(secrets.token_hex(32))'`", MIN_KEY_CHARS)
    return key or None


def key_from_env() -> bytes | None:
    return as_key(os.environ.get(ENV_VAR))


def key_id(key: bytes) -> str:
    """A short public tag of the key: the same key gives the same id, and it reveals nothing of the key."""
    return hmac.new(key, b"tracefix replay key id", hashlib.sha256).hexdigest()[:16]


def sign(key: bytes, session_id: Any, entrypoint: Any, inputs: Any) -> str:
    text = canonical_json({"entrypoint": entrypoint, "inputs": inputs, "session_id": session_id})
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


class Signer:
    """Called on each exported span's final attributes: the signature attributes to add to a
    session's root span that records an entrypoint and inputs, else None."""

    def __init__(self, key: bytes):
        self.key = key
        self.key_id = key_id(key)

    def __call__(self, attributes: Mapping[str, Any]) -> dict[str, str] | None:
        entrypoint = attributes.get(sc.ENTRYPOINT)
        if attributes.get(sc.SESSION_SPAN) is not True or not isinstance(entrypoint, str) or sc.INPUTS not in attributes:
            return None
        signature = sign(self.key, attributes.get(sc.SESSION_ID), entrypoint, from_json_text(attributes[sc.INPUTS]))
        return {sc.REPLAY_SIGNATURE: signature, sc.REPLAY_KEY_ID: self.key_id}


def signer(key: str | bytes | None) -> Signer | None:
    """The signer of `key`, else of TRACEFIX_REPLAY_KEY; None when there is no key."""
    key = as_key(key) if key is not None else key_from_env()
    return Signer(key) if key else None


def records(spans: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The signature records on a session's stored spans (span dicts, `attributes` a dict)."""
    out = []
    for span in spans:
        attributes = span.get("attributes") or {}
        signature, kid = attributes.get(sc.REPLAY_SIGNATURE), attributes.get(sc.REPLAY_KEY_ID)
        if isinstance(signature, str) and isinstance(kid, str):
            out.append({"signature": signature, "key_id": kid})
    return out


def _changed_by_collector(entrypoint: Any, inputs: Any) -> list[str]:
    """The stored fields that read as the collector's redaction or truncation left them."""
    marker = TRUNCATION_MARKER.split("{", 1)[0]
    found: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{path}.{k}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")
        elif isinstance(value, str):
            if REDACTED in value:
                found.append(f"{path} (it reads {REDACTED})")
            elif marker in value:
                found.append(f"{path} (it was truncated)")

    walk(entrypoint, "entrypoint")
    walk(inputs, "inputs")
    return found


def why_unverified(signed: list[dict[str, str]], key: bytes | None, session_id: str, entrypoint: Any,
                   inputs: Any) -> str | None:
    """None when one of the `signed` records signs exactly this session id, entrypoint and
    inputs under `key`; otherwise why the session cannot be trusted."""
    if not signed:
        return (f"session {session_id} carries no replay signature: the app that recorded it held no replay key "
                f"({ENV_VAR}), or the session was written by someone else with the ingest token")
    if key is None:
        return f"session {session_id} is signed (key id {signed[0]['key_id']}) but this process holds no replay key"
    expected, kid = sign(key, session_id, entrypoint, inputs), key_id(key)
    if any(hmac.compare_digest(r["signature"], expected) for r in signed if r["key_id"] == kid):
        return None
    if all(r["key_id"] != kid for r in signed):
        others = ", ".join(sorted({r["key_id"] for r in signed}))
        return (f"session {session_id} was signed with another replay key (key id {others}; this process holds key "
                f"id {kid}): the key does not match the app's")
    changed = _changed_by_collector(entrypoint, inputs)
    if changed:
        return (f"session {session_id}: the signature does not match what was stored: the collector's redaction "
                f"changed {', '.join(changed)} after the app signed it, so the session is not replayable as stored")
    return (f"session {session_id}: the signature does not match what was stored: its entrypoint, inputs or id "
            "are not what the app signed (forged, or altered on the way)")
