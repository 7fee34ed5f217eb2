"""What a new user's first commands meet (issue 38 §1): the verbs find the collector or say
where they looked, an explicit --server that does not answer is an error naming it, a
worker needs no --server beside a collector on the default port, and a replay job whose
every run errored ends `failed` with why."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import urllib.request
from pathlib import Path

import procs
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEFAULT_PORT = 4318


def tracefix(args: list[str], cwd: Path, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEFIX_", "OPENAI_", "OTEL_"))}
    return subprocess.run(procs.TRACEFIX + args, cwd=cwd, env={**clean, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def nothing_on_the_default_port():
    import socket

    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", DEFAULT_PORT)) == 0:
            pytest.skip(f"something runs on the default port {DEFAULT_PORT} here: this test is about its absence")


@pytest.mark.parametrize("verb", [["sessions"], ["show", "abc"], ["jobs"], ["feedback", "abc", "--down"]])
def test_a_reading_verb_in_a_folder_without_a_store_says_where_it_looked_and_makes_none(tmp_path, verb,
                                                                                         nothing_on_the_default_port):
    out = tracefix(verb, tmp_path)
    assert out.returncode != 0, out.stdout
    said = out.stderr
    assert "Traceback" not in said, said
    assert str(tmp_path / ".tracefix" / "tracefix.duckdb") in said and "http://127.0.0.1:4318" in said, said
    assert "--server" in said and "--db" in said and "TRACEFIX_SERVER" in said, said
    assert not (tmp_path / ".tracefix").exists(), list(tmp_path.rglob("*"))


@pytest.mark.parametrize("server, named", [("http://127.0.0.1:9", "no tracefix serve answers at http://127.0.0.1:9"),
                                            ("127.0.0.1:4318", "'127.0.0.1:4318' is not a URL"),
                                            ("localhost", "'localhost' is not a URL")])
def test_an_explicit_server_that_does_not_answer_is_an_error_naming_it(tmp_path, server, named):
    store = tmp_path / "s.duckdb"  # a store file beside it: still no fall back to it
    subprocess.run([sys.executable, "-c", "import sys; from tracefix.collector.store import Store; Store(sys.argv[1]).close()",
                    str(store)], check=True, timeout=60)
    for args in (["sessions"], ["replay", "abc", "--allow-module", "app"]):
        for how in (["--server", server], None):
            env = {"TRACEFIX_DB": str(store), **({"TRACEFIX_SERVER": server} if how is None else {})}
            out = tracefix([*args, *(how or [])], tmp_path, env)
            assert out.returncode != 0 and named in out.stderr, (args, how, out.stdout, out.stderr)
            assert "Traceback" not in out.stderr and "using the file" not in out.stderr, out.stderr


def test_a_worker_without_server_takes_the_default_port_and_a_bad_one_is_named(tmp_path, nothing_on_the_default_port):
    env = {"TRACEFIX_REPLAY_KEY": secrets.token_hex(32)}
    out = tracefix(["worker", "--allow-module", "app", "--once"], tmp_path, env)
    assert "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    assert out.returncode == 1 and "http://127.0.0.1:4318" in out.stdout + out.stderr, out.stdout + out.stderr
    out = tracefix(["worker", "--allow-module", "app", "--once", "--server", "127.0.0.1:4318"], tmp_path, env)
    assert out.returncode == 2 and "'127.0.0.1:4318' is not a URL" in out.stderr, out.stderr


def test_a_replay_job_whose_every_run_errored_is_failed_and_says_why(tmp_path):
    """The worker is started without the app's environment (no OPENAI_API_KEY): every
    replay of the example fails to run, so the job is failed, not done."""
    key = secrets.token_hex(32)
    sim = procs.start_sim("--plan-fault", "refund.amount=200")
    serve = procs.start_serve(tmp_path / "store.duckdb", "--diagnose", "off")
    worker = None
    try:
        url = serve.match["http"]
        app_env = {"OPENAI_BASE_URL": sim.match["base_url"], "OPENAI_API_KEY": "sim", "TRACEFIX_REPLAY_KEY": key,
                   "OTEL_EXPORTER_OTLP_ENDPOINT": url}
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEFIX_", "OPENAI_", "OTEL_"))}
        run = subprocess.run([sys.executable, "openai_sdk_refund.py"], cwd=EXAMPLES, env={**clean, **app_env},
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-3000:]
        worker = procs.start_worker(url, "--allow-module", "openai_sdk_refund", env={**clean, "TRACEFIX_REPLAY_KEY": key},
                                    cwd=EXAMPLES)
        session = procs.wait_for(lambda: next((s["session_id"] for s in _get(url, "/api/v1/sessions")["sessions"]
                                               if s.get("outcome") == "failure"), None), "the example's failed session")
        request = urllib.request.Request(url + "/api/v1/jobs", method="POST", headers={"Content-Type": "application/json"},
                                         data=json.dumps({"session_id": session, "kind": "replay", "steps": [1],
                                                          "edit": "Check amount against the task."}).encode())
        with urllib.request.urlopen(request, timeout=10) as resp:
            job_id = json.loads(resp.read())["job_id"]
        job = procs.wait_for(lambda: next((j for j in _get(url, "/api/v1/jobs")["jobs"]
                                           if j["job_id"] == job_id and j["state"] not in ("queued", "running")), None),
                             "the replay job to end", timeout=120)
        assert job["state"] == "failed", job
        assert job["error"].startswith("no replay ran through: step 1:") and "api_key" in job["error"], job["error"]
    finally:
        for proc in (worker, serve, sim):
            if proc is not None:
                proc.stop()


def _get(url: str, path: str) -> dict:
    with urllib.request.urlopen(url + path, timeout=10) as resp:
        return json.loads(resp.read())

