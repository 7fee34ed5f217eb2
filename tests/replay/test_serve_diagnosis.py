"""A thumbs-down on a failed session makes `tracefix serve` analyze it and queue its replay,
which a `tracefix worker` allowed to run the demo's modules claims and runs (DoVer); the
result is served at /api/v1/sessions/{id}/replay."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import procs

from tracefix.replay.verdicts import VERDICTS


def test_thumbs_down_queues_a_replay_that_a_worker_runs(lab, tmp_path):
    from tracefix.collector.access import connect

    serve = procs.start_serve(tmp_path / "diag.duckdb", "--diagnose", "full")
    worker = None
    try:
        url = serve.match["http"]
        worker = procs.start_worker(url, "--allow-module", "tracefix.demo", "--name", "w1", env=lab.env)
        subprocess.run([sys.executable, "-m", "tracefix.cli", "demo-run", "--base-url", lab.follow_url, "--tasks", "t01",
                        "--otlp-endpoint", url], check=True, timeout=120, capture_output=True, env=lab.env)
        with connect(server=url) as access:
            failed = access.list_sessions(outcome="failure")
            assert len(failed) == 1
            sid = failed[0]["session_id"]
            access.add_feedback(sid, -1.0, "it said everything was done but nothing happened")
            deadline, result = time.monotonic() + 240, None
            while result is None and time.monotonic() < deadline:
                result = access.get_replay(sid)
                time.sleep(0.5)
            assert result is not None, serve.output()[-3000:]
            assert result["session_id"] == sid and result["stages"]["segmentation"] == "fallback"
            assert result["hypotheses"] and all(h["verdict"] in VERDICTS for h in result["hypotheses"])
            runs = [r for h in result["hypotheses"] for r in h["runs"]]
            assert len(runs) == 3 * len(result["hypotheses"])
            child = access.get_session(runs[0]["child_session_id"])
            assert child["parent_session_id"] == sid and child["steps"]
            assert access.get_analysis(sid)["session_id"] == sid
            jobs = {j["kind"]: j for j in access.list_jobs(session_id=sid)}
            assert jobs["diagnosis"]["state"] == "done" and jobs["diagnosis"]["worker"] is None
            deadline = time.monotonic() + 30
            while access.list_jobs(session_id=sid, kind="replay")[0]["state"] == "running":
                assert time.monotonic() < deadline
                time.sleep(0.2)
            replay_job = access.list_jobs(session_id=sid, kind="replay")[0]
            assert replay_job["state"] == "done" and replay_job["worker"] == "w1", replay_job
        # The served report sets each replay beside the original: its child sessions are read too.
        with urllib.request.urlopen(f"{url}/api/v1/sessions/{sid}/report", timeout=60) as resp:
            html = resp.read().decode()
        assert runs[0]["child_session_id"] in html and "is not available" not in html
        with urllib.request.urlopen(f"{url}/api/v1/sessions/{sid}/report?format=md", timeout=60) as resp:
            assert resp.headers["content-type"].startswith("text/markdown") and b"## " in resp.read()
    finally:
        if worker is not None:
            worker.stop()
        serve.stop()

    # With no server running, `tracefix replay --db` starts a collector on the file for its
    # children, replays, and stores the result there.
    out = subprocess.run([sys.executable, "-m", "tracefix.cli", "replay", sid, "--db", str(tmp_path / "diag.duckdb"),
                          "--step", "1", "--runs", "1", "--json", "--allow-module", "tracefix.demo"], capture_output=True, text=True, timeout=180,
                         env=lab.env)
    assert out.returncode == 0, out.stderr
    offline = json.loads(out.stdout)
    assert offline["hypotheses"][0]["step"] == 1 and len(offline["hypotheses"][0]["runs"]) == 1
    assert offline["hypotheses"][0]["runs"][0]["error"] is None
