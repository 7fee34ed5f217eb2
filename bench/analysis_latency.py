"""Analysis latency vs session length (CPU): 50, 200, 1000 steps, timed after the model is loaded.

    .venv/bin/python bench/analysis_latency.py [--sizes 50,200,1000] [--repeats 3] [--single-agent]

Sessions are long banking-style runs (plan, instruct, look up, transfer, report, with an
error now and then; each step's prompt carries the last 120 messages, as a long-running
agent's would) built here so the length is exact; a model is trained on short
successful runs of the same shape first and loaded from its file, as the diagnosis worker
does. Prints the median wall time per size, the per-step cost, and growth ratios against the
smallest size (linear growth = ratio equal to the size ratio). Target: <= 1 s at 1000 steps.
With --single-agent every step is one agent's (the readings of a lone agent's own words as
its hand-overs then run instead of the team's).

Side by side: the same analysis with Python's cycle collector left running
(`pipeline.cycle_collection_paused` swapped for a no-op, as before it paused the collector),
and the ratio of the two medians and of the two means (a full collection falls in some runs
only, so the mean is the fairer one). Each way runs in blocks of --repeats analyses one after
another, three blocks each, alternated: a full collection that one analysis's objects set
off may fall in the next analysis, so alternating single runs would charge one way's
collections to the other. The full (generation 2) collections each way ran are printed too.
"""
from __future__ import annotations

import argparse
import gc
import random
import statistics
import tempfile
import time


# A long-running agent's prompt holds its recent conversation, not all of it (context window).
PROMPT_MESSAGES = 120
BLOCKS = 3  # alternated blocks of --repeats analyses per way of running the cycle collector


def long_session(n_steps: int, seed: int = 0, single_agent: bool = False) -> dict:
    rng = random.Random(seed)
    steps: list[dict] = []
    accounts = [f"ACC-{rng.randint(1000, 9999)}" for _ in range(40)]

    conversation: list[dict] = []  # what the agents have said so far: the growing prompt

    def add(agent, text="", calls=()):
        idx = len(steps)
        prompt = [{"role": "system", "content": f"You are {agent}. " + "Follow the bank's rules. " * 20},
                  *conversation[-PROMPT_MESSAGES:]]
        conversation.append({"role": "assistant", "content": text or f"{agent} calls {calls[0][0]}"})
        for _, _, result, error in calls:
            conversation.append({"role": "tool", "content": str(error or result)})
        steps.append({
            "index": idx, "kind": "llm", "agent": agent, "duration_ms": rng.uniform(3, 30),
            "input_messages": prompt,
            "output_message": {"role": "assistant", "content": text},
            "input_tokens": 100 + 12 * idx, "output_tokens": rng.randint(10, 60),
            "tool_calls": [{"id": f"call_{idx}_{i}", "name": nm, "arguments": a, "result": r, "error": e}
                           for i, (nm, a, r, e) in enumerate(calls)],
            "error": None,
        })

    while len(steps) < n_steps:
        src, dst = rng.sample(accounts, 2)
        amount = rng.randint(10, 900)
        add("Orchestrator", f"Plan:\n1. look up {src}\n2. transfer {amount} from {src} to {dst}")
        add("Orchestrator", f"AccountAgent: look up {src}")
        add("AccountAgent", calls=[("get_account", {"id": src}, {"id": src, "balance": rng.randint(100, 5000)}, None)])
        fail = rng.random() < 0.15
        add("PaymentAgent", calls=[("transfer", {"src": src, "dst": dst, "amount": amount},
                                     None if fail else {"ok": True, "tx": f"TX-{rng.randint(10000, 99999)}"},
                                     "ValueError: insufficient funds" if fail else None)])
        add("PaymentAgent", f"Transfer of {amount} {'failed' if fail else 'done'}")
    steps = steps[:n_steps]
    steps[-1]["output_message"]["content"] = "Final answer: all transfers processed"
    if single_agent:
        for step in steps:
            step["agent"] = "Assistant"
    return {"session_id": f"s-long-{n_steps}", "task": "Process the transfer queue", "outcome": "failure",
            "steps": steps}


def main() -> None:
    import contextlib

    from tracefix.analysis import pipeline
    from tracefix.analysis.detectors import HGTDetector
    from tracefix.analysis.pipeline import analyze_document, train_on_documents

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,200,1000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--single-agent", action="store_true", help="one agent takes every step")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    with tempfile.TemporaryDirectory() as tmp:
        train_docs = [long_session(30, seed=100 + i, single_agent=args.single_agent) for i in range(16)]
        for d in train_docs:
            d["outcome"] = "success"
        _, path = train_on_documents(train_docs, epochs=5, out=tmp, device=args.device)
        model = HGTDetector.load(path, device=args.device)
    analyze_document(long_session(20, seed=1, single_agent=args.single_agent), model, llm=None)  # warm up torch and sklearn

    paused = pipeline.cycle_collection_paused
    full_collections = 0

    def count_full_collections(phase: str, info: dict) -> None:
        nonlocal full_collections
        full_collections += phase == "start" and info["generation"] == 2

    gc.callbacks.append(count_full_collections)

    def block(doc: dict, pause: bool) -> list[float]:
        pipeline.cycle_collection_paused = paused if pause else contextlib.nullcontext
        try:
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                result = analyze_document(doc, model, llm=None)
                times.append(time.perf_counter() - t0)
                assert len(result["scores"]) == len(doc["steps"])
            return times
        finally:
            pipeline.cycle_collection_paused = paused

    rows = []
    for n in sizes:
        doc = long_session(n, seed=n, single_agent=args.single_agent)
        times: dict[bool, list[float]] = {True: [], False: []}
        fulls = {True: 0, False: 0}
        for _ in range(BLOCKS):
            for pause in (True, False):
                before = full_collections
                times[pause] += block(doc, pause)
                fulls[pause] += full_collections - before
        # a full collection falls in some runs only: the mean charges its cost to every run
        mean_ratio = statistics.fmean(times[True]) / statistics.fmean(times[False])
        rows.append((n, statistics.median(times[True]), statistics.median(times[False]), mean_ratio, fulls))

    base_n, base_t, *_ = rows[0]
    shape = "one agent" if args.single_agent else "a team"
    runs = BLOCKS * args.repeats
    print(f"analysis latency ({args.device}, {shape}, median of {runs}, model {model.version})")
    print(f"{'steps':>6} {'seconds':>9} {'ms/step':>8} {'time ratio':>11} {'size ratio':>11} "
          f"{'collector on':>13} {'paused/on':>10} {'mean ratio':>11} {'full collections (paused / on)':>31}")
    for n, t, on, mean_ratio, fulls in rows:
        print(f"{n:>6} {t:>9.3f} {1000 * t / n:>8.2f} {t / base_t:>11.2f} {n / base_n:>11.2f} "
              f"{on:>13.3f} {t / on:>10.2f} {mean_ratio:>11.2f} {fulls[True]:>15} / {fulls[False]:<3} of {runs}")
    last_n, last_t, *_ = rows[-1]
    print(f"target <= 1 s at {last_n} steps: {'met' if last_t <= 1.0 else 'MISSED'} ({last_t:.3f} s)")


if __name__ == "__main__":
    main()
