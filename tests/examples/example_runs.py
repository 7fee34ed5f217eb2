"""Run an example agent of examples/ the way its README line says: `python examples/X.py`
against a real `tracefix sim` (with a plan fault, so the run fails) exporting to a real
`tracefix serve`; then diagnose it with a real `tracefix worker` replaying it."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import procs

from tracefix.collector.access import HttpAccess

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# the model sends a refund of 200 instead of the task's 20: the refund tool fails
FAULT = "refund.amount=200"


@contextmanager
def recorded_failure(tmp_path, example: str, *, diagnose: str = "off"):
    """Yields (collector URL, env the example ran with, the stored session's summary)."""
    sim = procs.start_sim("--plan-fault", FAULT)
    serve = procs.start_serve(tmp_path / "store.duckdb", "--diagnose", diagnose)
    try:
        url = serve.match["http"]
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("TRACEFIX_LLM_")},
               "OPENAI_BASE_URL": sim.match["base_url"], "OPENAI_API_KEY": "sim",
               "OTEL_EXPORTER_OTLP_ENDPOINT": url, "PYTHONPATH": str(EXAMPLES)}
        run = subprocess.run([sys.executable, str(EXAMPLES / f"{example}.py")], env=env, timeout=120,
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
        [summary] = wait_for(lambda: HttpAccess(url).list_sessions(), "the example's session")
        yield url, env, summary
    finally:
        serve.stop()
        sim.stop()


def wait_for(read, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after {timeout:.0f} s")
        time.sleep(0.2)


def tool_steps(session: dict) -> list[tuple[str, str, dict, object, str | None]]:
    """(agent, tool, arguments, result, error) of every tool call, in step order."""
    out = []
    for step in session["steps"]:
        for call in step.get("tool_calls") or []:
            out.append((step.get("agent"), call.get("name"), call.get("arguments"), call.get("result"),
                        call.get("error")))
    return out


def diagnose_with_worker(url: str, env: dict, session_id: str, example: str, timeout: float = 120.0) -> dict:
    """Thumbs-down the session, let the collector diagnose it and a real worker replay the
    hypotheses; returns the finished replay result."""
    worker = procs.start_worker(url, "--allow-module", example, "--name", "example-worker", env=env,
                                cwd=EXAMPLES)
    try:
        access = HttpAccess(url)
        access.add_feedback(session_id, -1.0, "the order was not refunded")
        return wait_for(lambda: access.get_replay(session_id), "replay result", timeout)
    finally:
        worker.stop()
