"""Nothing named by ingested data is ever run: the collector never runs agent code, and a
`tracefix worker` imports only the modules its operator allowed.

The attack: one OTLP export whose session records `subprocess:run` with shell inputs, and
an evaluation event scored -1 (a thumbs-down), sent to a collector with default flags
(`--diagnose full`). Before workers existed it ran the shell command as the collector's user.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

import procs
import pytest

from tracefix import semconv as sc
from tracefix.collector.access import HttpAccess
from tracefix.entrypoints import EntrypointRefused, check, resolve

API_TOKEN, INGEST_TOKEN = "api-secret-1", "ingest-secret-2"


def export_rce_payload(url: str, marker, session_id: str, headers: dict | None = None,
                       entrypoint: str = "subprocess:run") -> None:
    """What an attacker holding (at most) the ingest token sends: a real OTLP/HTTP export."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers=headers)))
    with provider.get_tracer("attacker").start_as_current_span("invoke_agent evil") as span:
        span.set_attributes({sc.SESSION_ID: session_id, sc.ENTRYPOINT: entrypoint, sc.REPLAYABLE: True,
                             sc.INPUTS: json.dumps({"args": f"touch {marker}", "shell": True})})
        span.add_event(sc.EVALUATION_EVENT, {sc.EVALUATION_SCORE: -1.0, sc.EVALUATION_EXPLANATION: "thumbs down"})
    provider.shutdown()


def wait_for_job(access, session_id: str, kind: str, states=("done", "failed", "refused"), timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        jobs = access.list_jobs(session_id=session_id, kind=kind)
        if jobs and jobs[0]["state"] in states:
            return jobs[0]
        assert time.monotonic() < deadline, f"no {kind} job of {session_id} reached {states}: {jobs}"
        time.sleep(0.2)


@pytest.mark.parametrize("with_tokens", [False, True], ids=["open", "tokens"])
def test_an_entrypoint_from_the_wire_is_never_run(tmp_path, with_tokens):
    marker = tmp_path / "pwned"
    token_args = ["--token", API_TOKEN, "--ingest-token", INGEST_TOKEN] if with_tokens else []
    serve = procs.start_serve(tmp_path / "store.duckdb", *token_args)  # default flags: --diagnose full
    worker = None
    try:
        url = serve.match["http"]
        access = HttpAccess(url, API_TOKEN if with_tokens else None)
        export_rce_payload(url, marker, "s-evil", {"authorization": f"Bearer {INGEST_TOKEN}"} if with_tokens else None)

        # The collector analyzes and queues the replay, and runs nothing of the session's.
        diagnosis = wait_for_job(access, "s-evil", "diagnosis")
        assert diagnosis["state"] == "done", diagnosis
        assert access.list_jobs(session_id="s-evil", kind="replay")[0]["state"] == "queued"
        assert not marker.exists()

        # A worker allowed to run the demo claims the job and refuses it, saying why.
        worker = procs.start_worker(url, "--allow-module", "tracefix.demo", "--name", "w-demo",
                                    *(["--token", API_TOKEN] if with_tokens else []))
        job = wait_for_job(access, "s-evil", "replay")
        assert job["state"] == "refused" and job["worker"] == "w-demo", job
        assert "'subprocess:run'" in job["error"] and "outside the modules allowed" in job["error"]
        assert "--allow-module subprocess" in job["error"]
        assert access.get_replay("s-evil") is None
        time.sleep(0.5)  # a child started by mistake would have had time to run
        assert not marker.exists()
    finally:
        if worker is not None:
            worker.stop()
        serve.stop()


def test_the_ingest_token_writes_spans_and_feedback_but_reads_nothing(tmp_path):
    serve = procs.start_serve(tmp_path / "store.duckdb", "--token", API_TOKEN, "--ingest-token", INGEST_TOKEN)
    try:
        url = serve.match["http"]
        export_rce_payload(url, tmp_path / "never", "s-1", {"authorization": f"Bearer {INGEST_TOKEN}"})
        api = HttpAccess(url, API_TOKEN)
        assert api.get_session("s-1") is not None  # the span was accepted with the ingest token

        def status(method: str, path: str, token: str, body: dict | None = None) -> int:
            req = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode() if body else None,
                                         headers={"Authorization": f"Bearer {token}",
                                                  "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    return resp.status
            except urllib.error.HTTPError as exc:
                return exc.code

        assert status("POST", "/api/v1/feedback", INGEST_TOKEN, {"session_id": "s-1", "score": 1}) == 201
        for method, path, body in [("GET", "/api/v1/sessions", None), ("GET", "/api/v1/sessions/s-1", None),
                                   ("GET", "/api/v1/sessions/s-1/spans", None), ("GET", "/api/v1/jobs", None),
                                   ("POST", "/api/v1/jobs", {"session_id": "s-1", "kind": "replay"}),
                                   ("POST", "/api/v1/jobs/claim", {"worker": "x", "lease_s": 30}),
                                   ("GET", "/api/v1/sessions/s-1/report", None), ("GET", "/api/v1/alerts", None)]:
            assert status(method, path, INGEST_TOKEN, body) == 401, path
            assert status(method, path, "wrong", body) == 401, path
        assert status("GET", "/api/v1/sessions", API_TOKEN) == 200
        assert status("POST", "/api/v1/feedback", API_TOKEN, {"session_id": "s-1", "score": 1}) == 201

        # A worker given the ingest token is refused at its first claim and says so.
        out = subprocess.run([sys.executable, "-m", "tracefix.cli", "worker", "--server", url, "--token",
                              INGEST_TOKEN, "--allow-module", "tracefix.demo", "--once"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode != 0 and "HTTP 401" in out.stderr
    finally:
        serve.stop()


def test_an_ingest_token_without_an_api_token_is_refused(tmp_path):
    out = subprocess.run([sys.executable, "-m", "tracefix.cli", "serve", "--db", str(tmp_path / "x.duckdb"),
                          "--ingest-token", INGEST_TOKEN, "--http-port", "0", "--grpc-port", "0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "--ingest-token needs --token" in out.stderr


def test_a_replay_job_is_leased_to_one_worker_and_requeued_when_its_lease_runs_out(tmp_path):
    serve = procs.start_serve(tmp_path / "store.duckdb", "--diagnose", "off")
    try:
        url = serve.match["http"]
        export_rce_payload(url, tmp_path / "never", "s-1")
        access = HttpAccess(url)
        queued = access.enqueue_job("s-1", reason="test", kind="replay")
        first = access.claim_job("replay", "worker-a", 5)
        assert first["job_id"] == queued["job_id"] and first["worker"] == "worker-a"
        assert access.claim_job("replay", "worker-b", 5) is None  # one job, one worker
        assert access.renew_lease(first["job_id"], "worker-a", 5)
        assert not access.renew_lease(first["job_id"], "worker-b", 5)  # not b's to renew
        assert not access.finish_job(first["job_id"], worker="worker-b", state="done")  # nor to finish
        time.sleep(5.5)  # worker-a died: nobody renews
        second = access.claim_job("replay", "worker-b", 30)
        assert second["job_id"] == queued["job_id"] and second["worker"] == "worker-b" and second["attempts"] == 2
        assert not access.finish_job(first["job_id"], worker="worker-a", state="done")  # a's claim is gone
        assert access.finish_job(second["job_id"], worker="worker-b", state="done")
        assert access.list_jobs(session_id="s-1", kind="replay")[0]["state"] == "done"
        assert access.claim_job("replay", "worker-a", 5) is None
        # the thumbs-down's diagnosis job waits: under --diagnose off no worker is handed one either
        assert access.list_jobs(session_id="s-1", kind="diagnosis")[0]["state"] == "queued"
        assert access.claim_job("diagnosis", "worker-a", 5) is None
    finally:
        serve.stop()


def test_the_replay_cli_refuses_an_entrypoint_that_was_not_allowed(tmp_path):
    marker = tmp_path / "pwned"
    serve = procs.start_serve(tmp_path / "store.duckdb", "--diagnose", "off")
    try:
        url = serve.match["http"]
        export_rce_payload(url, marker, "s-evil")
        for allow in ([], ["--allow-module", "tracefix.demo"]):
            out = subprocess.run([sys.executable, "-m", "tracefix.cli", "replay", "s-evil", "--server", url, *allow],
                                 capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
            assert out.returncode != 0, out.stdout
            assert "outside the modules allowed" in out.stderr and "at a terminal" in out.stderr
        assert not marker.exists()
    finally:
        serve.stop()


@pytest.mark.parametrize("entrypoint, why", [
    ("subprocess:run", "outside the modules allowed"),
    ("tracefix.demoextra:run", "outside the modules allowed"),  # a prefix is not a parent package
    ("tracefix.demo.bank:_private", "private attribute"),
    ("tracefix.demo.bank:run_task.__globals__", "private attribute"),
    ("tracefix.demo.bank:run_task:x", "is not of the form"),
    ("tracefix.demo.bank", "is not of the form"),
    ("os;rm -rf /:x", "is not of the form"),
    (None, "is not of the form"),
])
def test_entrypoints_outside_the_allowed_modules_are_refused_before_any_import(entrypoint, why):
    before = set(sys.modules)
    with pytest.raises(EntrypointRefused, match=why):
        check(entrypoint, ["tracefix.demo"])
    assert set(sys.modules) == before


def test_an_allowed_module_cannot_lend_out_what_it_imported():
    assert check("tracefix.demo.bank:run_task", ["tracefix.demo"]) == "tracefix.demo.bank"
    assert resolve("tracefix.demo.bank:run_task", ["tracefix.demo"]).__name__ == "run_task"
    # tracefix.demo.bank imports `uuid`: the module is allowed, the function is not its own
    with pytest.raises(EntrypointRefused, match="defined in .uuid."):
        resolve("tracefix.demo.bank:uuid.uuid4", ["tracefix.demo"])
