"""Replay beside OpenInference and OpenLLMetry: each example of examples/ recorded with the
other side's instrumentor active (tests/examples/with_openinference.py, `both`: tracefix.init()
and the instrumentor on one provider), then one real `tracefix replay` per cell.

The matrix {openai SDK, openai-agents, LangGraph, AG2} x {tracefix alone, + OpenInference,
+ OpenLLMetry}; "tracefix alone" is test_examples.py (a worker's replays, a verdict each).
Each cell states its TRACEFIX_DEFER_TO_OTHER_INSTRUMENTORS setting:
* the other side instruments the openai SDK: by default tracefix steps aside, so the session
  document says `replayable: false` and why (and `tracefix replay` refuses with that reason);
  with the setting 0 tracefix records the calls too and a replay gives a verdict;
* the other side instruments only the framework (agents, tools): tracefix records the SDK
  calls and a replay gives a verdict, from the span the document chose for each step (the
  other side's, stamped with the step before, once won: "the full response ... was not
  recorded"). openai-agents + OpenInference (the SDK's tracing on): the handoff's tool span
  is OpenInference's alone, so the document says live tools only, and the replay runs with
  --allow-live-tools as the reason says.
One sim, one serve; every recording, then every replay, runs at once."""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import procs
import pytest
from example_runs import EXAMPLES, FAULT, session_of_run

from tracefix.collector.access import HttpAccess

RUNNER = Path(__file__).with_name("with_openinference.py")
STEPS_ASIDE = "step {}'s LLM call was recorded by {} only"
AGENTS_TRACING = {"SDK_TRACING": "1"}  # OpenInference's trace processor records only with it on
OI, OLL = {}, {"INSTRUMENTATION": "openllmetry"}
DEFER_OFF = {"TRACEFIX_DEFER_TO_OTHER_INSTRUMENTORS": "0"}

# cell -> (example, environment (the defer setting stated: {} is the default, tracefix steps
# aside), the scope of the span tracefix left the calls to (None: it records them), replay options)
CELLS = {
    "sdk+openinference": ("openai_sdk_refund", OI, "openinference.instrumentation.openai", ()),
    "sdk+openinference defer=0": ("openai_sdk_refund", {**OI, **DEFER_OFF}, None, ()),
    "sdk+openllmetry": ("openai_sdk_refund", OLL, "opentelemetry.instrumentation.openai.v1", ()),
    "sdk+openllmetry defer=0": ("openai_sdk_refund", {**OLL, **DEFER_OFF}, None, ()),
    "agents+openinference": ("openai_agents_refund", {**OI, **AGENTS_TRACING}, None, ("--allow-live-tools",)),
    "agents+openllmetry": ("openai_agents_refund", OLL, "opentelemetry.instrumentation.openai.v1", ()),
    "agents+openllmetry defer=0": ("openai_agents_refund", {**OLL, **DEFER_OFF}, None, ()),
    "langgraph+openinference": ("langgraph_refund", OI, None, ()),
    "langgraph+openllmetry": ("langgraph_refund", OLL, None, ()),
    "ag2+openinference": ("ag2_refund", OI, None, ()),
    "ag2+openllmetry": ("ag2_refund", OLL, "opentelemetry.instrumentation.openai.v1", ()),
    "ag2+openllmetry defer=0": ("ag2_refund", {**OLL, **DEFER_OFF}, None, ()),
}
EDIT = "Refund the order's amount, 20, not 200."


def _run_id(cell: str) -> str:
    return "mx-" + cell.replace("+", "-").replace(" ", "-").replace("=", "")


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """Every cell recorded (at once), then every replayable cell replayed once (at once):
    cell -> (session document, the replay's process, its stored result)."""
    sim = procs.start_sim("--plan-fault", FAULT)
    serve = procs.start_serve(tmp_path_factory.mktemp("matrix") / "store.duckdb")
    try:
        url = serve.match["http"]
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("TRACEFIX_LLM_", "TRACEFIX_DEFER"))},
               "OPENAI_BASE_URL": sim.match["base_url"], "OPENAI_API_KEY": "sim", "OTEL_EXPORTER_OTLP_ENDPOINT": url,
               "PYTHONPATH": str(EXAMPLES), "TRACEFIX_REPLAY_KEY": secrets.token_hex(32)}  # app and replayer
        runs = {cell: subprocess.Popen([sys.executable, str(RUNNER), example, "both", _run_id(cell)],
                                       env={**env, **extra}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for cell, (example, extra, _, _) in CELLS.items()}
        # the answer after the refund: 3 steps of the SDK's one agent, 4 of two agents
        docs = {cell: session_of_run(url, run, _run_id(cell), 3 if CELLS[cell][0] == "openai_sdk_refund" else 4)
                for cell, run in runs.items()}
        replays = {cell: subprocess.Popen(
            [*procs.TRACEFIX, "replay", docs[cell]["session_id"], "--server", url, "--allow-module", example,
             "--runs", "1", "--step", str(_refund_step(docs[cell])), "--edit", EDIT, *options],
            env=env, cwd=EXAMPLES, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for cell, (example, _, _, options) in CELLS.items()}
        results = {}
        for cell, replay in replays.items():
            out, err = replay.communicate(timeout=180)
            results[cell] = (docs[cell], replay.returncode, out + err,
                             HttpAccess(url).get_replay(docs[cell]["session_id"]))
        yield results
    finally:
        serve.stop()
        sim.stop()


def _refund_step(doc: dict) -> int:
    """The step whose call asked for the wrong refund: where the fix goes."""
    return next(step["index"] for step in doc["steps"] for call in step["tool_calls"] if call["name"] == "refund")


@pytest.mark.parametrize("cell", list(CELLS))
def test_replayable_says_whether_replay_runs_and_a_replay_gives_a_verdict(matrix, cell):
    doc, code, output, result = matrix[cell]
    _, extra, aside_for, options = CELLS[cell]
    if aside_for is not None:  # tracefix left the SDK calls to the other side: nothing to replay
        assert doc["replayable"] is False, doc["replayable_reason"]
        assert doc["replayable_reason"].startswith(STEPS_ASIDE.format(0, aside_for)), doc["replayable_reason"]
        assert "TRACEFIX_DEFER_TO_OTHER_INSTRUMENTORS=0" in doc["replayable_reason"]
        assert code != 0 and doc["replayable_reason"] in " ".join(output.split()), output[-3000:]
        assert result is None
        return
    if options:  # replayable with --allow-live-tools only, and the document says so
        assert doc["replayable"] is False
        assert doc["replayable_reason"].startswith("it is replayable with live tools only: "), doc["replayable_reason"]
    else:
        assert doc["replayable"] is True and doc["replayable_reason"] is None, doc["replayable_reason"]
    assert code == 0, output[-3000:]
    [hypothesis] = result["hypotheses"]
    assert hypothesis["verdict"] in {"validated", "refuted", "inconclusive"}, hypothesis
    [run] = hypothesis["runs"]
    assert run["error"] is None and run["child_session_id"], run
