"""Run an example agent of examples/ the way its README line says: `python examples/X.py`
against a real `tracefix sim` (with a plan fault, so the run fails) exporting to a real
`tracefix serve`; then diagnose it with a real `tracefix worker` replaying it.

One sim, one serve and one worker serve every example of the module (`ExampleStack`): each
example's session, diagnosis and replay are its own, told apart by its entrypoint and
session id. The examples run at once (`start_recordings`): each is a cold Python process
importing its framework, seconds of CPU that a shared machine gives them side by side."""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import procs
from procs import wait_for

from tracefix.collector.access import HttpAccess

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# the model sends a refund of 200 instead of the task's 20: the refund tool fails
FAULT = "refund.amount=200"


@dataclass
class ExampleStack:
    url: str  # the collector
    env: dict  # what an example (and the worker's replays) run with: the same replay key
    procs: list[procs.Proc]

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()


def start_stack(db: Path, examples: list[str], *, diagnose: str = "full") -> ExampleStack:
    """A sim with the plan fault, a collector diagnosing thumbs-down sessions and a worker
    allowed to replay every one of `examples`, started in examples/ as its README says."""
    started: list[procs.Proc] = []
    try:
        sim = procs.start_sim("--plan-fault", FAULT)
        started.append(sim)
        serve = procs.start_serve(db, "--diagnose", diagnose)
        started.append(serve)
        url = serve.match["http"]
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("TRACEFIX_LLM_")},
               "OPENAI_BASE_URL": sim.match["base_url"], "OPENAI_API_KEY": "sim",
               "OTEL_EXPORTER_OTLP_ENDPOINT": url, "PYTHONPATH": str(EXAMPLES),
               "TRACEFIX_REPLAY_KEY": secrets.token_hex(32)}  # the examples sign what they record
        allow = [arg for example in examples for arg in ("--allow-module", example)]
        started.append(procs.start_worker(url, *allow, "--name", "example-worker", env=env, cwd=EXAMPLES))
    except BaseException:
        for proc in reversed(started):
            proc.stop()
        raise
    return ExampleStack(url, env, started)


def start_recordings(stack: ExampleStack, examples: list[str]) -> dict[str, subprocess.Popen]:
    """Start every example once (their sessions are recorded as they end)."""
    return {example: subprocess.Popen([sys.executable, str(EXAMPLES / f"{example}.py")], env=stack.env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for example in examples}


def record_failure(stack: ExampleStack, example: str, run: subprocess.Popen) -> dict:
    """Wait for the example's run; returns the summary of the session it stored."""
    try:
        out, err = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 0, out[-2000:] + err[-3000:]
    access = HttpAccess(stack.url)
    entrypoint = f"{example}:refund_order"
    [summary] = wait_for(lambda: [s for s in access.list_sessions(limit=500)
                                  if s.get("entrypoint") == entrypoint and not s.get("parent_session_id")],
                         f"session of {example}")
    return summary


def session_of_run(url: str, run: subprocess.Popen, tag: str, steps: int) -> dict:
    """Wait for a run of tests/examples/with_openinference.py (its task ends "(run TAG)");
    returns its session document once `steps` steps are stored (the last spans of a run may
    come in a later export)."""
    try:
        out, err = run.communicate(timeout=150)
    finally:
        run.kill()
    assert run.returncode == 0, out[-2000:] + err[-3000:]
    access = HttpAccess(url)
    [summary] = wait_for(lambda: [s for s in access.list_sessions(limit=200)
                                  if f"(run {tag})" in (s.get("task") or "")], f"session of {tag}")
    return wait_for(lambda: (lambda doc: doc if len(doc["steps"]) >= steps else None)(
        access.get_session(summary["session_id"])), f"steps of {tag}")


def diagnose_with_worker(stack: ExampleStack, session_id: str, timeout: float = 120.0) -> dict:
    """Thumbs-down the session, let the collector diagnose it and the worker replay the
    hypotheses; returns the finished replay result."""
    access = HttpAccess(stack.url)
    access.add_feedback(session_id, -1.0, "the order was not refunded")
    return wait_for(lambda: access.get_replay(session_id), "replay result", timeout)


def tool_steps(session: dict) -> list[tuple[str, str, dict, object, str | None]]:
    """(agent, tool, arguments, result, error) of every tool call, in step order."""
    out = []
    for step in session["steps"]:
        for call in step.get("tool_calls") or []:
            out.append((step.get("agent"), call.get("name"), call.get("arguments"), call.get("result"),
                        call.get("error")))
    return out
