"""No secret reaches the DuckDB file or a webhook, whichever place it was written in (issue 35).

A real `tracefix serve` receives, from a plain OpenTelemetry SDK (no tracefix redaction on
the way) over OTLP/HTTP, spans carrying secrets in every place a span has: attributes, event
names and attributes, tool arguments and results, LLM messages, the span's name, its status
message, its resource's attributes and its scope's name; then an imported session
(`POST /api/v1/import`) and negative feedback whose alerts go to a real webhook receiver on
loopback; then, as a worker would, an analysis, a replay result and a job's error. The secrets are the forms issue 35 found stored in clear: a bare AWS secret key
beside its key id, the key alone under an `aws_secret_access_key`-like name (any spelling,
nested in tool arguments too), and the password of a `scheme://user:PASSWORD@host` URL.
After shutdown every table of the file is read whole, and the webhook bodies are searched."""
from __future__ import annotations

import base64
import json
import secrets
import string
import uuid

import procs
from collector_support import TOKEN, WebhookReceiver
from test_alerts import wait_until

REDACTED = "[REDACTED]"


class Secrets:
    """A fresh secret per place it is written, so a leak names its place."""

    def __init__(self) -> None:
        self.by_place: dict[str, str] = {}

    def aws(self, place: str) -> tuple[str, str]:
        """(access key id, secret access key) as AWS issues them."""
        key_id = "AKIA" + "".join(secrets.choice(string.ascii_uppercase + "234567") for _ in range(16))
        while True:  # 30 random bytes in base64; an AWS key has both cases (this is ~always true)
            secret = base64.b64encode(secrets.token_bytes(30)).decode()
            if secret.lower() != secret != secret.upper():
                break
        self.by_place[f"{place} (key id)"] = key_id
        self.by_place[place] = secret
        return key_id, secret

    def aws_secret(self, place: str) -> str:
        """A secret access key alone (its key id written nowhere)."""
        key_id, secret = self.aws(place)
        del self.by_place[f"{place} (key id)"]
        return secret

    def password(self, place: str) -> str:
        pw = "Pw" + secrets.token_urlsafe(12).replace("-", "x").replace("_", "y") + "!9"
        self.by_place[place] = pw
        return pw

    def leaks(self, text: str) -> list[str]:
        return [place for place, secret in self.by_place.items() if secret in text]


def _send_spans(http_url: str, sid: str, found: Secrets) -> None:
    """One session's spans, secrets in every place, through the OTel SDK's OTLP/HTTP exporter."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import Status, StatusCode

    pw = found.password
    resource_id, resource_secret = found.aws("resource attribute, named")
    provider = TracerProvider(resource=Resource.create({
        "service.name": "secrets-svc", "deployment.dsn": f"redis://:{pw('resource attribute')}@cache/0",
        "aws_secret_access_key": resource_secret, "aws.access_key_id": resource_id}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
        endpoint=http_url + "/v1/traces", headers={"authorization": f"Bearer {TOKEN}"}, timeout=10)))
    tracer = provider.get_tracer(f"lib via https://bot:{pw('scope name')}@pkgs.example/simple")

    task_id, task_secret = found.aws("task in the session metadata")
    root_id, root_secret = found.aws("span attribute, bare beside its id")
    with tracer.start_as_current_span(f"GET https://svc:{pw('span name')}@api.internal/v1", attributes={
            "tracefix.session.id": sid,
            "tracefix.session.metadata": json.dumps({"task": f"Check the balance with {task_id} {task_secret} please"}),
            "note": f"rotated {root_id} / {root_secret} today",
            "Aws.Secret.Access.Key": found.aws_secret("span attribute, named"),
            "db.connection_string": f"postgres://bank_app:{pw('db.connection_string')}@db.internal:5432/ledger",
    }) as root:
        event_id, event_secret = found.aws("event attribute")
        root.add_event(f"retry amqp://guest:{pw('event name')}@rabbit/%2F", {
            "url": f"mysql://root:{pw('event attribute URL')}@db/x", "creds": f"{event_id},{event_secret}"})
        msg_id, msg_secret = found.aws("LLM input message")
        question = f"My keys:\n{msg_id}\n{msg_secret}\nDB: postgres://u:{pw('LLM input message URL')}@h/db"
        answer = f"Stored awsSecretAccessKey: {found.aws_secret('LLM output message')}"
        with tracer.start_as_current_span("chat bank-agent", attributes={
                "gen_ai.operation.name": "chat", "tracefix.session.id": sid, "tracefix.step": 0,
                "gen_ai.input.messages": json.dumps([{"role": "system", "content": "You are the Orchestrator of a bank."},
                                                     {"role": "user", "content": question}]),
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": answer}]),
        }):
            pass
        arguments = {"account": "ACC-1001", "dsn": f"amqp://svc:{pw('tool arguments URL')}@mq/vh", "profile": {
            "region": "eu-west-1", "awsSecretAccessKey": found.aws_secret("tool arguments, nested name")}}
        result_id, result_secret = found.aws("tool result")
        with tracer.start_as_current_span("execute_tool fetch_statement", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch_statement",
                "tracefix.session.id": sid, "gen_ai.tool.call.arguments": json.dumps(arguments),
                "gen_ai.tool.call.result": json.dumps({"balance": 1200, "log": f"signed with {result_id} {result_secret}"}),
        }) as tool:
            tool.set_status(Status(StatusCode.ERROR,
                                   f"ConnectionError: could not reach postgres://app:{pw('status message')}@db:5432/x"))
    provider.shutdown()


def _imported_session(sid: str, found: Secrets) -> dict:
    pw = found.password
    task_id, task_secret = found.aws("imported task")
    call_id, call_secret = found.aws("imported tool call")
    tool_call = {"id": "call_1", "type": "function", "function": {
        "name": "s3_list", "arguments": json.dumps({"creds": f"{call_id} {call_secret}"})}}
    return {
        "session_id": sid, "task": f"Audit the bucket using {task_id} {task_secret}",
        "metadata": {"owner": "ops", "aws": {"aws.secret.access.key": found.aws_secret("imported metadata, named")},
                     "dsn": f"postgresql://ops:{pw('imported metadata URL')}@db/ops"},
        "messages": [
            {"role": "user", "content": f"Here: postgres://admin:{pw('imported message URL')}@db:5432/prod"},
            {"role": "assistant", "content": None, "tool_calls": [tool_call]},
            {"role": "tool", "tool_call_id": "call_1",
             "content": f"AWS_SECRET_ACCESS_KEY={found.aws_secret('imported tool result')}"},
            {"role": "assistant", "content": "Done auditing."}],
    }


def _results(sid: str, found: Secrets) -> tuple[dict, dict]:
    """An analysis and a replay result (contracts §3 and §5) quoting secrets, as a worker posts them."""
    pw = found.password
    edit_id, edit_secret = found.aws("replay edit text")
    analysis = {"session_id": sid, "created_at": "2026-11-27T08:00:00Z", "model_version": None,
                "ranker_version": None, "detectors": ["tool_error"], "notes": [], "llm_used": False, "scores": [],
                "frontier": {}, "graph": {"nodes": [], "edges": []}, "hypotheses": [{
                    "rank": 1, "step": 1, "agent": "assistant", "score": 0.9, "source": "detectors",
                    "rationale": f"the tool got redis://:{pw('analysis rationale')}@cache and failed", "evidence": {}}]}
    replay = {"session_id": sid, "created_at": "2026-11-27T08:00:00Z", "rounds": 1, "stages": {}, "trials": [],
              "notes": [], "hypotheses": [{
                  "step": 1, "reason": "a tool error", "verdict": "refuted",
                  "intervention": {"id": "i1", "step": 1, "kind": "replace_output",
                                   "text": f"use {edit_id} {edit_secret} instead"},
                  "runs": [{"output": f"connected to mysql://root:{pw('replay run output')}@db/x", "error": None}]}]}
    return analysis, replay


def _dump(db) -> tuple[list[str], str]:
    """Every table of the DuckDB file, every column of every row, as text."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        return tables, repr([(t, con.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables])
    finally:
        con.close()


def test_no_secret_reaches_the_store_or_a_webhook(tmp_path):
    from tracefix.collector.access import HttpAccess

    found = Secrets()
    receiver = WebhookReceiver()
    db = tmp_path / "tracefix.duckdb"
    serve = procs.start_serve(db, "--token", TOKEN, "--webhook", receiver.url, "--diagnose", "off",
                              env={"TRACEFIX_TOKEN": ""})
    span_sid, import_sid = f"sec-spans-{uuid.uuid4().hex[:8]}", f"sec-import-{uuid.uuid4().hex[:8]}"
    try:
        api = HttpAccess(serve.match["http"], TOKEN)
        _send_spans(serve.match["http"], span_sid, found)
        assert wait_until(lambda: len(api.get_spans(span_sid)) == 3), "the three spans are stored"
        assert api.import_sessions([_imported_session(import_sid, found)]) == [import_sid]
        comment_id, comment_secret = found.aws("feedback comment")
        api.add_feedback(span_sid, -1, f"leaked {comment_id} {comment_secret} and "
                                       f"redis://:{found.password('feedback comment URL')}@cache")
        api.add_feedback(import_sid, -1, "wrong bucket")
        analysis, replay = _results(import_sid, found)
        api.save_analysis(import_sid, analysis)
        api.save_replay(import_sid, replay)
        job = api.enqueue_job(import_sid, kind="replay")
        assert api.claim_job("replay", "w1", 30)["job_id"] == job["job_id"]
        assert api.finish_job(job["job_id"], worker="w1", state="failed", error=(
            f"OperationalError: postgres://app:{found.password('job error')}@db/x refused"))
        bodies = wait_until(lambda: len(receiver.received) >= 2 and receiver.received)
        assert bodies, "both alerts reach the webhook"
    finally:
        serve.stop()  # the collector is the only one who opens its file while it runs
        receiver.close()

    sent = "\n".join(r["body"].decode() for r in bodies)
    tables, dump = _dump(db)
    assert {"spans", "messages", "sessions", "feedback", "alerts", "analyses", "replays", "jobs"} <= set(tables)
    assert not found.leaks(sent) and not found.leaks(dump), \
        (f"of {len(found.by_place)} secrets, the webhook received those of: {found.leaks(sent)}; "
         f"the DuckDB file holds: {found.leaks(dump)}")
    alerts = {r["json"]["session_id"]: r["json"] for r in bodies}
    assert alerts[span_sid]["task"] == f"Check the balance with {REDACTED} {REDACTED} please"
    assert alerts[span_sid]["comment"] == f"leaked {REDACTED} {REDACTED} and redis://:{REDACTED}@cache"
    assert alerts[import_sid]["task"] == f"Audit the bucket using {REDACTED} {REDACTED}"

    # every place was stored, around its secret: the test would see a leak there
    for kept in ("GET https://svc:[REDACTED]@api.internal/v1", "lib via https://bot:[REDACTED]@pkgs.example/simple",
                 "ConnectionError: could not reach postgres://app:[REDACTED]@db:5432/x",
                 "deployment.dsn", "redis://:[REDACTED]@cache/0", "retry amqp://guest:[REDACTED]@rabbit/%2F",
                 "mysql://root:[REDACTED]@db/x", "postgres://bank_app:[REDACTED]@db.internal:5432/ledger",
                 "rotated [REDACTED] / [REDACTED] today", "You are the Orchestrator of a bank.",
                 "Stored awsSecretAccessKey: [REDACTED]", "ACC-1001", "eu-west-1", "signed with [REDACTED] [REDACTED]",
                 "Audit the bucket using [REDACTED] [REDACTED]", "postgres://admin:[REDACTED]@db:5432/prod", "s3_list",
                 "Done auditing.", "leaked [REDACTED] [REDACTED]", "the tool got redis://:[REDACTED]@cache",
                 "use [REDACTED] [REDACTED] instead", "connected to mysql://root:[REDACTED]@db/x",
                 "OperationalError: postgres://app:[REDACTED]@db/x refused"):
        assert kept in dump, kept


def test_an_alert_stored_before_the_rules_knew_its_secret_is_sent_redacted(tmp_path):
    """A store written by an older collector keeps an undelivered alert whose task holds a
    secret: the collector of today redacts the payload as it sends it."""
    import duckdb

    found = Secrets()
    receiver = WebhookReceiver()
    db = tmp_path / "tracefix.duckdb"
    procs.start_serve(db, "--diagnose", "off").stop()  # the store's tables
    key_id, secret = found.aws("stored alert task")
    comment = f"see mysql://root:{found.password('stored alert comment')}@db/x"
    payload = {"text": f"negative feedback: {comment}\nTask: deploy with {key_id} {secret}", "alert_id": "al-old",
               "session_id": "s-old", "score": -1.0, "task": f"deploy with {key_id} {secret}", "final_answer": None,
               "comment": comment, "link": "/api/v1/sessions/s-old/report"}
    con = duckdb.connect(str(db))
    try:
        con.execute("INSERT INTO alerts VALUES ('al-old', 'fb-old', 's-old', ?, true, 1)", [json.dumps(payload)])
        con.execute("INSERT INTO deliveries VALUES ('al-old', ?, 'pending', 0, 1, NULL, NULL)", [receiver.url])
    finally:
        con.close()
    serve = procs.start_serve(db, "--webhook", receiver.url, "--diagnose", "off")
    try:
        got = receiver.wait_for(lambda j: j.get("alert_id") == "al-old")
    finally:
        serve.stop()
        receiver.close()
    assert got, "the stored alert was delivered"
    body = got[0]["body"].decode()
    assert not found.leaks(body), f"the webhook received the secrets of: {found.leaks(body)}"
    assert got[0]["json"]["task"] == f"deploy with {REDACTED} {REDACTED}"
    assert got[0]["json"]["comment"] == f"see mysql://root:{REDACTED}@db/x"
