"""`tracefix regress` on an app without an evaluator: its runs report no outcome, so with an
LLM configured (the product's own client, the scripted `sim-analyst` here, over real HTTP)
the replay's judge scores each run against the recorded task and how the recorded run went,
and the verdict says the judge scored it; without one the item cannot be scored: verdict
error, exit 2, saying so.

Two thumbs-down sessions of one app, recorded by real processes: one asks about an order the
shop has (its runs answer with the order's status), one about an order it lacks (its runs
answer with the tool's error). A judge that reads the runs tells them apart: fixed, still failing.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import textwrap

import procs
import pytest

import tracefix

APP = textwrap.dedent('''
    import json, sys

    import openai
    import tracefix

    tracefix.init(service_name="no-evaluator-shop")
    ORDERS = {"1042": "shipped"}


    @tracefix.tool
    def lookup_order(order_id: str) -> dict:
        """Look an order up by its id."""
        if order_id not in ORDERS:
            return {"error": f"no order {order_id}"}
        return {"order_id": order_id, "status": ORDERS[order_id]}


    TOOLS = [{"type": "function", "function": {"name": "lookup_order", "description": lookup_order.__doc__,
              "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}}]


    @tracefix.session  # no @tracefix.evaluator: a run reports no outcome
    def answer(question: str) -> str:
        client, messages = openai.OpenAI(max_retries=0), [{"role": "user", "content": question}]
        with tracefix.agent("Support"):
            for _ in range(4):
                message = client.chat.completions.create(
                    model="plan-agent", messages=messages, tools=TOOLS).choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                if not message.tool_calls:
                    return message.content
                for call in message.tool_calls:
                    result = lookup_order(**json.loads(call.function.arguments))
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
        return "gave up"


    if __name__ == "__main__":
        print(answer(sys.argv[1]))
''')

QUESTION = 'Where is my order {id}?\n1. lookup_order {{"order_id": "{id}"}}'


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    d = tmp_path_factory.mktemp("regress-judge")
    (d / "judged_app.py").write_text(APP)
    started = []
    try:
        sim = procs.start_sim()
        started.append(sim)
        serve = procs.start_serve(d / "store.duckdb", "--diagnose", "off")
        started.append(serve)
        url, sim_url = serve.match["http"], sim.match["base_url"]
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("TRACEFIX_LLM_")},
               "OPENAI_BASE_URL": sim_url, "OPENAI_API_KEY": "sim", "OTEL_EXPORTER_OTLP_ENDPOINT": url,
               "TRACEFIX_REPLAY_KEY": secrets.token_hex(32), "PYTHONPATH": "", "TRACEFIX_TOKEN": ""}
        apps = {order: subprocess.Popen([sys.executable, "judged_app.py", QUESTION.format(id=order)], cwd=d, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for order in ("1042", "1099")}
        for app in apps.values():
            out, err = app.communicate(timeout=120)
            assert app.returncode == 0, err[-2000:]
        from tracefix.collector.access import connect

        access = connect(server=url)

        def recorded():
            ended = [s for s in access.list_sessions(limit=10) if s["ended_at"]]
            return ended if len(ended) == 2 else None

        sessions = procs.wait_for(recorded, "the two recorded sessions")
        by_order = {re.search(r"order (\d+)", s["task"]).group(1): s["session_id"] for s in sessions}
        assert set(by_order) == {"1042", "1099"}, sessions
        for sid in by_order.values():  # the thumbs-down makes the item
            tracefix.feedback(sid, -1.0, comment="did not help me", server=url)
        yield url, sim_url, env, by_order, d
    finally:
        for p in reversed(started):
            p.stop()


def regress(shop, *args: str, llm: bool) -> subprocess.CompletedProcess:
    url, sim_url, env, by_order, folder = shop
    judge = {"TRACEFIX_LLM_BASE_URL": sim_url, "TRACEFIX_LLM_MODEL": "sim-analyst"} if llm else {}
    return subprocess.run([sys.executable, "-m", "tracefix.cli", "regress", *by_order.values(), "--server", url,
                           "--allow-module", "judged_app", *args], cwd=folder, env={**env, **judge},
                          capture_output=True, text=True, timeout=180)


def test_the_llm_judge_scores_runs_of_an_app_without_an_evaluator(shop):
    url, sim_url, env, by_order, folder = shop
    done = regress(shop, "--runs", "2", llm=True)
    assert done.returncode == 1, done.stdout + done.stderr  # the unknown order is still failing
    assert "scored by the LLM judge (sim-analyst at" in done.stderr
    lines = {order: next(line for line in done.stdout.splitlines() if line.startswith(sid[:34]))
             for order, sid in by_order.items()}
    assert re.search(r"failure\s+2/2 .* FIXED +scored by the LLM judge \(no evaluator\): all 2 runs succeeded",
                     lines["1042"]), done.stdout
    assert re.search(r"failure\s+0/2 .* STILL FAILING +scored by the LLM judge \(no evaluator\)", lines["1099"]), \
        done.stdout
    from tracefix.collector.access import connect

    run_id = re.search(r"tracefix regress (rg-\S+):", done.stderr).group(1)
    with connect(server=url) as access:
        results = {r["session_id"]: r for r in access.regress_results(run_id)}
    runs = [run for r in results.values() for run in r["runs"]]
    assert len(runs) == 4 and {run["judged_by"] for run in runs} == {"llm"}
    assert all(run["error"] is None and run["llm_requests"] >= 2 for run in runs)  # the agent's own LLM ran live


def test_without_an_llm_an_item_without_an_evaluator_cannot_be_scored(shop):
    done = regress(shop, "--runs", "1", "--json", llm=False)
    assert done.returncode == 2, done.stdout + done.stderr
    results = json.loads(done.stdout)
    assert {r["verdict"] for r in results} == {"error"}
    assert all(r["reason"].startswith("could not be scored: no run reported an outcome")
               and "no LLM judge is configured" in r["reason"] for r in results), results
    assert all(run["judged_by"] is None and run["success"] is None for r in results for run in r["runs"])
    assert "LLM judge" not in done.stderr
