"""Nothing named by ingested data is ever run: the collector never runs agent code, and a
`tracefix worker` imports only the modules its operator allowed.

The attack: one OTLP export whose session records `subprocess:run` with shell inputs, and
an evaluation event scored -1 (a thumbs-down), sent to a collector with default flags
(`--diagnose full`). Before workers existed it ran the shell command as the collector's user.
"""
from __future__ import annotations

import json
import os
import socket
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
REPLAY_KEY = "5f0c2b8e9d4a7c1e3b6f8a2d4c6e8f0a1b3c5d7e9f1a3b5c7d9e1f3a5b7c9d1e"  # the app's and its workers'


def export_rce_payload(url: str, marker, session_id: str, headers: dict | None = None,
                       entrypoint: str = "subprocess:run") -> None:
    """What an attacker holding (at most) the ingest token sends: a real OTLP/HTTP export."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers=headers)))
    # the instrumentation scope is whatever the sender says: "tracefix" passes for tracefix's own
    tracer = provider.get_tracer("tracefix")
    with tracer.start_as_current_span("invoke_agent evil") as span:
        span.set_attributes({sc.SESSION_ID: session_id, sc.ENTRYPOINT: entrypoint, sc.REPLAYABLE: True,
                             sc.INPUTS: json.dumps({"args": f"touch {marker}", "shell": True})})
        # one recorded LLM step, so the session reads as replayable and a replay job is queued
        with tracer.start_as_current_span("chat evil") as step:
            step.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                                 "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                                     {"type": "text", "content": "done"}]}])})
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
                                    *(["--token", API_TOKEN] if with_tokens else []),
                                    env={"TRACEFIX_REPLAY_KEY": REPLAY_KEY})
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
                             capture_output=True, text=True, timeout=60,
                             env={**os.environ, "TRACEFIX_REPLAY_KEY": REPLAY_KEY})
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
    ("tracefix.demo.__init__:click", "private or special module"),  # importing it is importing the package
    ("tracefix.demo.__main__:main", "private or special module"),  # a __main__ runs a program when imported
    ("tracefix.demo._internal:run", "private or special module"),
    ("_private.mod:run", "private or special module"),
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


# --- the ingest token must not drive the worker (issue 35, item 3) ------------------------------
# A worker allowed to run the demo, holding the app's replay key; the attacker holds only the
# ingest token, so what they record is unsigned, and they choose entrypoint and inputs.

# the attacker's own app: a session naming a click command's callback, with one real LLM call
# (against the attacker's listener) so that it has a step to replay
CALLBACK_SESSION = """
import json, sys, openai, tracefix
serve, sim, inputs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
tracefix.init(endpoint=serve)
with tracefix.session(entrypoint="tracefix.demo.cli:sim.callback", inputs=inputs) as s:
    openai.OpenAI(base_url=sim, api_key="x", max_retries=0).chat.completions.create(
        model="plan-agent", messages=[{"role": "user", "content": "hello"}])
print(s.id)
"""


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """A collector with an API and an ingest token, and the attacker's listener (a scripted LLM
    server: its request counter says whether anything reached it)."""
    d = tmp_path_factory.mktemp("attack")
    serve = procs.start_serve(d / "store.duckdb", "--token", API_TOKEN, "--ingest-token", INGEST_TOKEN,
                              "--diagnose", "off")
    listener = None
    try:
        listener = procs.start_sim("--seed", "1")
        yield serve.match["http"], listener.match["base_url"]
    finally:
        if listener is not None:
            listener.stop()
        serve.stop()


def _attacker_env() -> dict:
    """The attacker's process: the ingest token on its exports, no replay key."""
    env = {k: v for k, v in os.environ.items() if k != "TRACEFIX_REPLAY_KEY"}
    return {**env, "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{INGEST_TOKEN}"}


def _requests(listener_url: str) -> int:
    with urllib.request.urlopen(listener_url.rsplit("/v1", 1)[0] + "/_sim/stats", timeout=5) as r:
        return json.load(r)["requests"]


def _run_worker_once(url: str, *extra: str) -> str:
    """A worker of the app's operator: the app's replay key, the demo allowed, a configured LLM
    API key the attacker would like to receive; it takes what is queued and stops."""
    out = subprocess.run([sys.executable, "-m", "tracefix.cli", "worker", "--server", url, "--token", API_TOKEN,
                          "--allow-module", "tracefix.demo", "--runs", "1", "--once", "--poll", "0.2", *extra],
                         capture_output=True, text=True, timeout=180,
                         env={**os.environ, "TRACEFIX_REPLAY_KEY": REPLAY_KEY,
                              "TRACEFIX_DEMO_API_KEY": "sk-operator-secret-0123456789"})
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _replay_job(access, session_id: str, step: int) -> dict:
    job = access.enqueue_job(session_id, reason="attack", kind="replay", options={"steps": [step]})
    return job


def _job(access, job: dict) -> dict:
    return next(j for j in access.list_jobs(session_id=job["session_id"], kind="replay") if j["job_id"] == job["job_id"])


def test_a_forged_session_cannot_send_the_workers_llm_calls_to_the_attacker(attacked):
    """`tracefix.demo.bank:run_task` is the app's own marked entrypoint: only the signature
    stops a session that points its `base_url` at the attacker."""
    url, listener = attacked
    api = HttpAccess(url, API_TOKEN)
    subprocess.run([sys.executable, "-m", "tracefix.cli", "demo-run", "--base-url", listener, "--tasks", "t01",
                    "--otlp-endpoint", url], check=True, timeout=120, capture_output=True, env=_attacker_env())
    (session,) = [s for s in api.list_sessions() if s["entrypoint"] == "tracefix.demo.bank:run_task"]
    assert api.get_session(session["session_id"])["inputs"]["base_url"] == listener
    before = _requests(listener)

    job = _replay_job(api, session["session_id"], 1)
    _run_worker_once(url)
    refused = _job(api, job)
    assert refused["state"] == "refused", refused
    assert "carries no replay signature" in refused["error"], refused["error"]
    assert "TRACEFIX_REPLAY_KEY" in refused["error"] and "--allow-unsigned" in refused["error"]
    assert _requests(listener) == before  # nothing reached the attacker's URL
    assert api.get_replay(session["session_id"]) is None
    req = urllib.request.Request(f"{url}/api/v1/sessions/{session['session_id']}/report?format=md",
                                 headers={"Authorization": f"Bearer {API_TOKEN}"})
    with urllib.request.urlopen(req, timeout=60) as resp:  # the report says why there is no replay
        assert "Not replayed: the replay job was refused: session" in (text := resp.read().decode())
    assert "carries no replay signature" in text

    # The operator may choose to replay unsigned sessions: then the same job reaches that URL,
    # which is what the refusal above prevented.
    again = _replay_job(api, session["session_id"], 1)
    _run_worker_once(url, "--allow-unsigned")
    done = _job(api, again)
    assert done["state"] == "done", done
    assert _requests(listener) > before
    notes = api.get_replay(session["session_id"])["notes"]
    assert any("--allow-unsigned" in note and "carries no replay signature" in note for note in notes), notes


def test_a_click_commands_callback_is_not_an_entrypoint_even_unsigned_sessions_may_name(attacked):
    url, listener = attacked
    api = HttpAccess(url, API_TOKEN)
    with socket.socket() as probe:  # a free port the callback would start a server on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    inputs = {"host": "127.0.0.1", "port": port, "seed": 0, "faults": None, "fault_rate": 0.0, "fault_kinds": None,
              "follow_prob": 1.0, "ground_truth": None, "latency_ms": 0.0, "transcripts": False, "plan_faults": [],
              "default_model": None}
    out = subprocess.run([sys.executable, "-c", CALLBACK_SESSION, url, listener, json.dumps(inputs)],
                         check=True, timeout=120, capture_output=True, text=True, env=_attacker_env())
    session_id = out.stdout.strip().splitlines()[-1]
    assert api.get_session(session_id)["entrypoint"] == "tracefix.demo.cli:sim.callback"

    job = _replay_job(api, session_id, 0)
    _run_worker_once(url, "--allow-unsigned")  # only the app's mark stands in the way
    refused = _job(api, job)
    assert refused["state"] == "refused", refused
    assert "not marked replayable by the app" in refused["error"], refused["error"]
    assert "--allow-entrypoint tracefix.demo.cli:sim.callback" in refused["error"]
    with socket.socket() as probe:  # no server was started on the attacker's port
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    assert api.get_replay(session_id) is None


def test_a_dunder_module_is_refused_before_it_is_imported(attacked, tmp_path):
    url, _ = attacked
    api = HttpAccess(url, API_TOKEN)
    export_rce_payload(url, tmp_path / "never", "s-dunder", {"authorization": f"Bearer {INGEST_TOKEN}"},
                       entrypoint="tracefix.demo.__init__:click")
    job = _replay_job(api, "s-dunder", 0)
    _run_worker_once(url, "--allow-unsigned")
    refused = _job(api, job)
    assert refused["state"] == "refused", refused
    assert "private or special module (tracefix.demo.__init__)" in refused["error"], refused["error"]


def test_a_worker_without_the_replay_key_says_how_to_start(tmp_path):
    out = subprocess.run([sys.executable, "-m", "tracefix.cli", "worker", "--server", "http://127.0.0.1:9",
                          "--allow-module", "tracefix.demo", "--once"], capture_output=True, text=True, timeout=60,
                         env={k: v for k, v in os.environ.items() if k != "TRACEFIX_REPLAY_KEY"})
    assert out.returncode == 2
    assert "set TRACEFIX_REPLAY_KEY to the app's replay key" in out.stderr and "--allow-unsigned" in out.stderr
