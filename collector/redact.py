"""Secrets are redacted in the collector too, before anything is stored or sent.

tracefix's SDK redacts before export, but OpenInference, OpenLLMetry or a hand-made
exporter send what they recorded as it is: an ``authorization`` attribute, an ``api_key``
in the metadata, a key pasted into a chat message. The same rules as the SDK's
(`tracefix.secret_rules`) run here on every decoded span's attributes, its events' names
and attributes, before normalization reads them: messages, tool arguments and results, the
stored attributes JSON and snapshots are all built from the redacted values. The span's
name and status message, its resource's attributes and its scope's name go through
`redact_label` / `redact_span`; sessions sent to ``POST /api/v1/import`` through
`redact_document`; feedback comments and alert payloads (stored, and sent to webhooks)
through `redact_text` / `redact_value`.

This runs for every span on the ingest path, so the common case (no secret) costs one
subset test of the span's keys against the keys already judged harmless and one hint scan
over all its text at once; only a span with a hint goes through the rules value by value.
"""
from __future__ import annotations

from typing import Any

from tracefix.secret_rules import REDACTED, is_secret_key, may_hold_secret, redact_text, redact_value

_harmless_keys: set[str] = set()  # attribute names judged not to name a credential
_MAX_HARMLESS_KEYS = 65536  # keys with ids in them (llm.input_messages.17....) must not grow it forever


def _redact_secret_keys(attrs: dict) -> None:
    """Replace the whole value of every attribute whose key names a credential."""
    for key in attrs.keys() - _harmless_keys:
        if not is_secret_key(key):
            if len(_harmless_keys) < _MAX_HARMLESS_KEYS:
                _harmless_keys.add(key)
        elif attrs[key] is not None and type(attrs[key]) is not bool:
            attrs[key] = REDACTED


def _redact_each_value(attrs: dict) -> None:
    for key, value in attrs.items():
        if type(value) is str:
            if value is not REDACTED:
                attrs[key] = redact_text(value)
        elif type(value) is list or type(value) is dict:
            attrs[key] = redact_value(key, value)


def _texts(attrs: dict, into: list[str]) -> bool:
    """Add the attributes' strings (those in lists too) to `into`; True when a value needs
    judging on its own (a list holding other things, a kvlist)."""
    values = attrs.values()
    into += [v for v in values if type(v) is str]
    nested = False
    for value in [v for v in values if type(v) is list or type(v) is dict]:
        if type(value) is list and all(type(v) is str for v in value):
            into += value  # finish reasons and the like: scanned with the rest
        else:
            nested = True
    return nested


def _nested(attrs: dict) -> bool:
    """True when a value needs judging on its own (as `_texts` says), its strings unread."""
    types = set(map(type, attrs.values()))  # in C: most spans hold no list and no dict
    if dict in types:
        return True
    return list in types and any(type(v) is list and not all(type(x) is str for x in v) for v in attrs.values())


def redact_span(attrs: dict, events: list[dict], texts_may_hold_secret: bool = True, flat: bool = False) -> None:
    """Replace the secrets in a span's decoded attributes and its events' names and
    attributes (values: str, int, float, bool, list, dict), in place. False
    `texts_may_hold_secret`: a scan of the bytes they came from found no hint, so their
    strings are not scanned again (their keys are still judged). True `flat`: the caller
    read that no value is a dict or a list holding other than strings (`_nested` is False)."""
    if flat and not texts_may_hold_secret:  # most spans: only their keys are judged
        for one in (attrs, *(event["attributes"] for event in events)) if events else (attrs,):
            if not one.keys() <= _harmless_keys:
                _redact_secret_keys(one)
        return
    every = [attrs, *(event["attributes"] for event in events)] if events else [attrs]
    texts: list[str] = [event["name"] for event in events]
    nested = False
    for one in every:
        if not one.keys() <= _harmless_keys:
            _redact_secret_keys(one)
        if texts_may_hold_secret:
            nested = _texts(one, texts) or nested
        elif not flat:
            nested = nested or _nested(one)
    # one scan over all of the span's text ("\0" is in no hint, so none spans two values)
    if nested or (texts_may_hold_secret and may_hold_secret("\0".join(texts))):
        for one in every:
            _redact_each_value(one)
        for event in events:
            event["name"] = redact_text(event["name"])


def redact_label(text: str) -> str:
    """A span's name, status message or scope name with its secrets replaced (one hint
    scan when it holds none: the common case costs about a microsecond)."""
    return redact_text(text) if may_hold_secret(text) else text


def redact_document(doc: dict[str, Any]) -> dict[str, Any]:
    """An imported session document (messages, steps, task, metadata, ...) with its secrets
    replaced, as a span's attributes would be, in a new dict; its session id is kept, since
    it names the session."""
    return {key: value if key == "session_id" else redact_value(key, value) for key, value in doc.items()}
