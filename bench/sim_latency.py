"""How much the scripted model costs per request, side by side in one run.

Against one in-process `SimServer`, with the official openai client over loopback HTTP:
  * `echo`     — a registered model that returns a constant message (HTTP + client floor);
  * `bank-agent` on a worker request and on a late Orchestrator request (the policy reads
    the whole conversation, fault injection on);
  * the same bank-agent worker request streamed;
and whole banking tasks (median per task and per LLM step). Prints medians and ratios.

    .venv/bin/python bench/sim_latency.py [--repeat 200]
"""
from __future__ import annotations

import argparse
import statistics
import time

import openai

from tracefix.demo.bank import run_task
from tracefix.demo.faults import FaultConfig
from tracefix.demo.sim import SimConfig, SimServer
from tracefix.demo.sim_models import register_model
from tracefix.demo.team import system_prompt, tools_for


def median_ms(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()

    register_model("echo", lambda body, ctx: {"role": "assistant", "content": "ok"})
    server = SimServer(SimConfig(seed=1, faults=FaultConfig(seed=1, rate=0.3), record_transcripts=True))
    url = server.start()
    client = openai.OpenAI(base_url=url, api_key="bench", max_retries=0,
                           default_headers={"X-Demo-Task": "t21", "X-Demo-Session": "bench"})
    worker = [{"role": "system", "content": system_prompt("AccountAgent")},
              {"role": "user", "content": 'Look up the customer named "Alice Chen" with lookup_customer, then '
                                          "list their accounts with get_accounts."}]
    # a long Orchestrator context: the last request of a recorded 16-step task
    before = set(server.stats()["by_session"])
    run_task("t21", base_url=url)
    (session,) = set(server.stats()["by_session"]) - before
    late = server.transcript(session)[-1]["messages"]

    rows = {
        "echo (HTTP + client floor)": median_ms(
            lambda: client.chat.completions.create(model="echo", messages=worker), args.repeat),
        "bank-agent worker": median_ms(
            lambda: client.chat.completions.create(model="bank-agent", messages=worker, tools=tools_for("AccountAgent"),
                                                   extra_headers={"X-Demo-Step": "2"}), args.repeat),
        "bank-agent worker, streamed": median_ms(
            lambda: list(client.chat.completions.create(model="bank-agent", messages=worker, stream=True,
                                                        tools=tools_for("AccountAgent"),
                                                        extra_headers={"X-Demo-Step": "2"})), args.repeat),
        f"bank-agent orchestrator, {len(late)} messages": median_ms(
            lambda: client.chat.completions.create(model="bank-agent", messages=late,
                                                   extra_headers={"X-Demo-Step": "15"}), args.repeat),
    }
    floor = rows["echo (HTTP + client floor)"]
    print(f"{'request':45} {'median ms':>10} {'x echo':>8}")
    for name, ms in rows.items():
        print(f"{name:45} {ms:10.2f} {ms / floor:8.2f}")

    tasks = ["t01", "t05", "t13", "t21"]
    per_task, per_step = [], []
    for _ in range(max(1, args.repeat // 20)):
        for task in tasks:
            t = time.perf_counter()
            out = run_task(task, base_url=url)
            ms = (time.perf_counter() - t) * 1000
            per_task.append(ms)
            per_step.append(ms / out["llm_calls"])
    step = statistics.median(per_step)
    print(f"whole task: median {statistics.median(per_task):.1f} ms; per LLM step {step:.2f} ms "
          f"({step / floor:.2f} x echo)")
    server.stop()


if __name__ == "__main__":
    main()
