"""Secrets sent by other instrumentations never reach the store: the real OpenInference and
OpenLLMetry openai instrumentors call the scripted LLM server with every secret sample in
the messages, under a parent span carrying credential attributes and an event, and export
to a real `tracefix serve`; its API and then its DuckDB file are searched for them."""
from __future__ import annotations

import time
import uuid

from collector_support import TOKEN, tracer_provider
from secret_samples import SAMPLES, all_secrets_text
from test_instrumentations import instrumented

import procs

SYSTEM = "You are the Orchestrator of a bank."
HEADER_TOKEN = "hdr-" + uuid.uuid4().hex  # under credential-named keys: redacted by key name alone
CREDENTIAL_ATTRIBUTES = {
    "authorization": f"Bearer {HEADER_TOKEN}", "api_key": HEADER_TOKEN, "x-api-key": HEADER_TOKEN,
    "password": HEADER_TOKEN, "secret": HEADER_TOKEN, "token": HEADER_TOKEN, "cookie": f"sid={HEADER_TOKEN}",
    "http.request.header.authorization": [f"Basic {HEADER_TOKEN}"],
}


def _chat_with_secrets(sim_url: str, provider, session_id: str) -> None:
    """One chat call inside an app span with credential attributes and an event."""
    import openai

    with provider.get_tracer("app").start_as_current_span("handle request", attributes={
            "session.id": session_id, **CREDENTIAL_ATTRIBUTES}) as span:
        span.add_event("request.received", {"api_key": HEADER_TOKEN, "note": SAMPLES[0].text})
        client = openai.OpenAI(base_url=sim_url, api_key="sim", max_retries=0)
        client.chat.completions.create(model="bank-agent", messages=[
            {"role": "system", "content": SYSTEM}, {"role": "user", "content": all_secrets_text()}])
        client.close()


def _stored(api, session_id: str, want_llm_spans: int = 1) -> str:
    """Everything the API gives back about the session, once its LLM span is stored."""
    deadline = time.monotonic() + 30
    while True:
        spans = api.get_spans(session_id)
        if sum(s["kind"] == "llm" for s in spans) >= want_llm_spans or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return repr((api.get_session(session_id), spans))


def _assert_no_secret(text: str, where: str) -> None:
    leaked = [str(s) for s in SAMPLES if s.secret in text]
    assert not leaked, f"{where} holds secrets of: {leaked}"
    assert HEADER_TOKEN not in text, f"{where} holds a credential attribute's value"


def test_openinference_and_openllmetry_secrets_are_redacted_before_storage(tmp_path, sim_url):
    """A serve of its own: it is stopped to read its DuckDB file."""
    from tracefix.collector.access import HttpAccess

    db = tmp_path / "tracefix.duckdb"
    serve = procs.start_serve(db, "--token", TOKEN, env={"TRACEFIX_TOKEN": ""})
    try:
        _export_and_check(serve, HttpAccess(serve.match["http"], TOKEN), sim_url)
    finally:
        serve.stop()  # the collector is the only one who opens its file while it runs
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        dump = repr([con.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables])
    finally:
        con.close()
    assert "messages" in tables and SYSTEM in dump
    _assert_no_secret(dump, "the DuckDB file")


def _export_and_check(serve, api, sim_url: str) -> None:
    """Both instrumentations export to `serve`; what its API gives back holds no secret."""
    from openinference.instrumentation import using_metadata
    from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceOpenAI
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetryOpenAI

    oi_session, ol_session = f"oi-secrets-{uuid.uuid4().hex[:8]}", f"ol-secrets-{uuid.uuid4().hex[:8]}"
    provider = tracer_provider(serve, "grpc", service="oi-secrets")
    with instrumented(OpenInferenceOpenAI(), provider), using_metadata({"api_key": HEADER_TOKEN}):
        _chat_with_secrets(sim_url, provider, oi_session)
    provider = tracer_provider(serve, "http", service="ol-secrets")
    with instrumented(OpenLLMetryOpenAI(), provider):
        _chat_with_secrets(sim_url, provider, ol_session)

    for session_id, scope in ((oi_session, "openinference"), (ol_session, "opentelemetry.instrumentation.openai")):
        stored = _stored(api, session_id)
        assert scope in stored and SYSTEM in stored, "the instrumentation's LLM span and its messages are stored"
        assert "[REDACTED]" in stored
        _assert_no_secret(stored, f"the API's view of {session_id}")
        first_user = next(m for m in api.get_session(session_id)["steps"][0]["input_messages"] if m["role"] == "user")
        assert "[REDACTED]" in first_user["content"] and "my OpenAI key is" in first_user["content"]
