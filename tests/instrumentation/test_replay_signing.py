"""Signed replay records (tracefix.replay_signing) and marked entrypoints (tracefix.entrypoints):
a replay runs only an entrypoint the app marked, with what the app itself recorded."""
from __future__ import annotations

import json
import sys

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracefix
from tracefix import replay_signing, semconv as sc
from tracefix.entrypoints import EntrypointRefused, resolve

KEY = b"0123456789abcdef0123456789abcdef-app"
OTHER_KEY = b"fedcba9876543210fedcba9876543210-other"


@tracefix.session
def answer(question: str, api_key: str, note: str = "") -> str:
    return f"{question} {note}"


def _exported(replay_key, redact=None) -> list:
    exporter = InMemorySpanExporter()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter), replay_key=replay_key, redact=redact)
    try:
        with tracefix.agent("Helper"):
            answer("what is the balance?", api_key="sk-proj-abcdefghijklmnop0123456789", note="tell Bob")
    finally:
        handle.shutdown()
    return exporter.get_finished_spans()


def _root(spans) -> dict:
    (root,) = [s for s in spans if s.attributes.get(sc.SESSION_SPAN)]
    return dict(root.attributes)


def test_the_app_signs_what_leaves_the_process_after_its_redaction():
    spans = _exported(KEY, redact=lambda key, value: value.replace("Bob", "B.") if isinstance(value, str) else value)
    root = _root(spans)
    inputs = json.loads(root[sc.INPUTS])
    assert inputs["api_key"] == "[REDACTED]" and inputs["note"] == "tell B."  # the SDK's rules, then the user's
    assert root[sc.REPLAY_KEY_ID] == replay_signing.key_id(KEY) and len(root[sc.REPLAY_SIGNATURE]) == 64
    signed = replay_signing.records([{"attributes": root}])
    sid, entrypoint = root[sc.SESSION_ID], root[sc.ENTRYPOINT]
    assert replay_signing.why_unverified(signed, KEY, sid, entrypoint, inputs) is None
    # what the app held before redaction is not what it signed
    raw = {**inputs, "api_key": "sk-proj-abcdefghijklmnop0123456789", "note": "tell Bob"}
    assert "not what the app signed" in replay_signing.why_unverified(signed, KEY, sid, entrypoint, raw)
    # only the session's root span carries a record
    assert all(sc.REPLAY_SIGNATURE not in s.attributes for s in spans if not s.attributes.get(sc.SESSION_SPAN))


def test_without_a_replay_key_nothing_is_signed(monkeypatch):
    monkeypatch.delenv(replay_signing.ENV_VAR, raising=False)
    assert all(sc.REPLAY_SIGNATURE not in s.attributes for s in _exported(None))
    monkeypatch.setenv(replay_signing.ENV_VAR, KEY.decode())  # the variable is the default key
    assert _root(_exported(None))[sc.REPLAY_KEY_ID] == replay_signing.key_id(KEY)


SIGNED = {"session_id": "s-1", "entrypoint": "app.agent:run", "inputs": {"task": "refund order 7", "limit": 2}}


def _why(stored: dict, key: bytes | None = KEY, signed_with: bytes = KEY) -> str | None:
    record = {"signature": replay_signing.sign(signed_with, SIGNED["session_id"], SIGNED["entrypoint"],
                                               SIGNED["inputs"]),
              "key_id": replay_signing.key_id(signed_with)}
    return replay_signing.why_unverified([record], key, stored["session_id"], stored["entrypoint"], stored["inputs"])


def test_a_record_is_checked_against_what_the_collector_stored():
    assert _why(SIGNED) is None
    assert _why({**SIGNED, "inputs": {"limit": 2, "task": "refund order 7"}}) is None  # key order is not content
    forged = {**SIGNED, "inputs": {**SIGNED["inputs"], "base_url": "http://127.0.0.1:9/v1"}}
    assert "does not match what was stored" in _why(forged) and "not what the app signed" in _why(forged)
    assert "not what the app signed" in _why({**SIGNED, "session_id": "s-2"})  # one session's record on another
    assert "not what the app signed" in _why({**SIGNED, "entrypoint": "app.agent:other"})
    redacted = {**SIGNED, "inputs": {**SIGNED["inputs"], "task": "refund order [REDACTED]"}}
    assert ("the collector's redaction changed inputs.task (it reads [REDACTED]) after the app signed it"
            in _why(redacted))
    cut = {**SIGNED, "inputs": {"task": "refund…[tracefix: truncated 20 bytes]", "limit": 2}}
    assert "changed inputs.task (it was truncated)" in _why(cut)


def test_a_wrong_key_is_told_apart_from_a_forged_record():
    why = _why(SIGNED, key=OTHER_KEY)
    assert f"signed with another replay key (key id {replay_signing.key_id(KEY)}" in why
    assert f"this process holds key id {replay_signing.key_id(OTHER_KEY)}" in why
    assert "holds no replay key" in _why(SIGNED, key=None)
    no_record = replay_signing.why_unverified([], KEY, "s-1", SIGNED["entrypoint"], SIGNED["inputs"])
    assert "carries no replay signature" in no_record
    assert replay_signing.key_id(KEY) != replay_signing.key_id(OTHER_KEY)
    assert KEY.hex()[:8] not in replay_signing.key_id(KEY)


APP = '''
import functools

import tracefix


@tracefix.session
def run(task: str) -> str:
    return task


class Agent:
    @tracefix.session
    def act(self, task: str) -> str:
        return task

    def helper(self, task: str) -> str:
        return task


def opens_its_own(task: str) -> str:
    with tracefix.session(entrypoint=__name__ + ":opens_its_own", inputs={"task": task}):
        return task


def registered(task: str) -> str:
    with tracefix.session(entrypoint=__name__ + ":registered", inputs={"task": task}):
        return task


tracefix.replayable(registered)


def _logged(fn):
    @functools.wraps(fn)  # copies run's attributes, its mark included
    def logged(*args, **kwargs):
        return fn(*args, **kwargs)
    return logged


alias = _logged(run)
from json import dumps
'''


@pytest.fixture
def app(tmp_path, monkeypatch):
    (tmp_path / "marked_app.py").write_text(APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "marked_app"
    sys.modules.pop("marked_app", None)


@pytest.mark.parametrize("name", ["run", "Agent.act", "registered"])
def test_what_the_app_marked_is_replayable(app, name):
    assert callable(resolve(f"{app}:{name}", [app]))


@pytest.mark.parametrize("name, why", [
    ("opens_its_own", "not marked replayable"),  # named by `with tracefix.session(...)`, never registered
    ("Agent.helper", "not marked replayable"),
    ("Agent", "not marked replayable"),  # a class
    ("alias", "not marked replayable"),  # carries run's mark, for run's name
    ("dumps", "defined in 'json'"),  # an imported name
])
def test_any_other_public_attribute_of_an_allowed_module_is_refused(app, name, why):
    with pytest.raises(EntrypointRefused, match=why):
        resolve(f"{app}:{name}", [app])


def test_an_operator_may_list_an_entrypoint_the_app_did_not_mark(app):
    assert resolve(f"{app}:opens_its_own", [], [f"{app}:opens_its_own"])("x") == "x"
    with pytest.raises(EntrypointRefused, match="outside the modules allowed"):
        resolve(f"{app}:run", [], [f"{app}:opens_its_own"])  # one listed entrypoint allows no other


def test_a_click_commands_callback_is_not_marked():
    with pytest.raises(EntrypointRefused, match="not marked replayable"):
        resolve("tracefix.demo.cli:sim.callback", ["tracefix.demo"])
    assert resolve("tracefix.demo.bank:run_task", ["tracefix.demo"]).__name__ == "run_task"
