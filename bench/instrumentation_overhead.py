"""Added time per `chat.completions.create`: tracefix vs OpenInference vs OpenLLMetry over no
instrumentation, non-streaming and streaming, in one run.

The OpenAI client talks to an in-process `httpx.MockTransport` that returns a canned,
realistic response (a worker-agent turn with a tool call; the stream variant as SSE
chunks with a final usage chunk), so the network does not dominate. Each
(instrumentation, round) runs in a fresh subprocess — the three instrumentors wrap the
same SDK method and are not meant to coexist — in which blocks of uninstrumented and
instrumented calls alternate (instrument, measure, uninstrument), so the added time is
measured against the same process at the same moment; rounds interleave the
instrumentations in a shuffled order so machine noise hits all of them alike. All use
a TracerProvider + BatchSpanProcessor with an exporter that drops spans, and capture
message content (each one's default); tracefix's calls run inside a session.

    .venv/bin/python bench/instrumentation_overhead.py [--rounds 5] [--calls 200] [--blocks 3]

Prints the median time per call without instrumentation, each instrumentation's added
time (median over rounds of with-minus-without medians) and tracefix's added time as a
ratio of the others'.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys

MODES = ("none", "tracefix", "openinference", "openllmetry")  # "none" is measured inside each worker

SYSTEM = ("You are AccountAgent, a worker of the bank's support team with the tools lookup_customer, "
          "get_accounts, get_balance. Carry out the Orchestrator's instruction with your tools, one call at a "
          "time, then reply with a short REPORT of what you found or did. ") * 3
MESSAGES = [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": "AccountAgent: look up customer Alice Chen and get her accounts."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "lookup_customer", "arguments": "{\"name\": \"Alice Chen\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1",
             "content": json.dumps({"customer_id": "CUST-001", "name": "Alice Chen", "segment": "retail"})}]
TOOLS = [{"type": "function", "function": {"name": name, "description": f"{name} of the bank",
                                           "parameters": {"type": "object", "properties": {
                                               "customer_id": {"type": "string"}}}}}
         for name in ("lookup_customer", "get_accounts", "get_balance")]
COMPLETION = {
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 1700000000, "model": "bank-agent",
    "system_fingerprint": "fp_bench",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
        "role": "assistant", "content": None, "tool_calls": [{
            "id": "call_2", "type": "function",
            "function": {"name": "get_accounts", "arguments": "{\"customer_id\": \"CUST-001\"}"}}]}}],
    "usage": {"prompt_tokens": 412, "completion_tokens": 24, "total_tokens": 436}}


def _stream_body() -> bytes:
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000, "model": "bank-agent"}
    text = "REPORT from AccountAgent: customer Alice Chen is CUST-001 with checking ACC-1001 and savings ACC-1002."
    pieces = [text[i:i + 6] for i in range(0, len(text), 6)]
    chunks = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    chunks += [{**head, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    chunks.append({**head, "choices": [], "usage": {"prompt_tokens": 412, "completion_tokens": 30,
                                                    "total_tokens": 442}})
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()


def worker(mode: str, calls: int, blocks: int) -> dict:
    """Runs in the subprocess: alternate blocks uninstrumented / instrumented with `mode`
    (instrument, measure, uninstrument), so both sides see the same process and moment."""
    import time

    import httpx
    import openai
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Discard(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    completion, stream_body = json.dumps(COMPLETION).encode(), _stream_body()

    def handler(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            return httpx.Response(200, content=stream_body, headers={"content-type": "text/event-stream"})
        return httpx.Response(200, content=completion, headers={"content-type": "application/json"})

    client = openai.OpenAI(api_key="sk-bench", base_url="http://bench.invalid/v1", max_retries=0,
                           http_client=httpx.Client(transport=httpx.MockTransport(handler)))

    def plain() -> None:
        client.chat.completions.create(model="bank-agent", messages=MESSAGES, tools=TOOLS, temperature=0)

    def streamed() -> None:
        for _ in client.chat.completions.create(model="bank-agent", messages=MESSAGES, stream=True,
                                                stream_options={"include_usage": True}):
            pass

    def instrument():
        """Turn `mode` on; returns the function that turns it off again."""
        provider = TracerProvider()
        if mode == "tracefix":
            import tracefix

            handle = tracefix.init(tracer_provider=provider, exporter=Discard())
            session = tracefix.session("bench", entrypoint="bench:run", inputs={})
            session.__enter__()  # realistic: calls inside a session get steps and fingerprints

            def off():
                session.__exit__(None, None, None)
                handle.shutdown()
            return off
        provider.add_span_processor(BatchSpanProcessor(Discard()))
        if mode == "openinference":
            from openinference.instrumentation.openai import OpenAIInstrumentor
        else:
            from opentelemetry.instrumentation.openai import OpenAIInstrumentor
        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=provider)

        def off():
            instrumentor.uninstrument()
            provider.shutdown()
        return off

    def measure(fn) -> list[int]:
        for _ in range(max(10, calls // 10)):  # warm-up
            fn()
        times = []
        for _ in range(calls):
            start = time.perf_counter_ns()
            fn()
            times.append(time.perf_counter_ns() - start)
        return times

    results: dict[str, dict[str, list[int]]] = {k: {"none": [], "with": []} for k in ("plain", "stream")}
    for _ in range(blocks):
        for kind, fn in (("plain", plain), ("stream", streamed)):
            results[kind]["none"] += measure(fn)
            off = instrument()
            results[kind]["with"] += measure(fn)
            off()
    return {kind: {side: statistics.median(times) / 1000 for side, times in sides.items()}  # µs
            for kind, sides in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200, help="calls per block")
    parser.add_argument("--blocks", type=int, default=3, help="none/instrumented block pairs per round")
    parser.add_argument("--worker", choices=MODES[1:], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.calls, args.blocks)))
        return

    instrumented = MODES[1:]
    # per mode and kind: each round's (median without, median with)
    samples = {m: {"plain": [], "stream": []} for m in instrumented}
    rng = random.Random(0)
    for round_index in range(args.rounds):
        order = list(instrumented)
        rng.shuffle(order)  # interleaved, in a different order each round
        for mode in order:
            out = subprocess.run([sys.executable, __file__, "--worker", mode, "--calls", str(args.calls),
                                  "--blocks", str(args.blocks)], capture_output=True, text=True, check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            for kind in ("plain", "stream"):
                samples[mode][kind].append((result[kind]["none"], result[kind]["with"]))
        print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr)

    print(f"chat.completions.create against an in-process httpx.MockTransport; medians over {args.rounds} "
          f"rounds x {args.blocks} blocks x {args.calls} calls; 'added' = with minus without, same process")
    for kind in ("plain", "stream"):
        none = statistics.median(n for m in instrumented for n, _ in samples[m][kind])
        added = {m: statistics.median(w - n for n, w in samples[m][kind]) for m in instrumented}
        print(f"\n{'non-streaming' if kind == 'plain' else 'streaming (21 chunks)'}: none {none:.1f} µs/call")
        for m in instrumented:
            print(f"  {m:14s} added {added[m]:8.1f} µs/call   (x{(none + added[m]) / none:.3f} of none)")
        lighter = min(("openinference", "openllmetry"), key=lambda m: added[m])
        for other in ("openinference", "openllmetry"):
            ratio = added["tracefix"] / added[other] if added[other] > 0 else float("inf")
            print(f"  tracefix added / {other} added = {ratio:.2f}")
        verdict = "meets" if added["tracefix"] <= added[lighter] else "misses"
        print(f"  target: tracefix added <= lighter of the two ({lighter}): {verdict}")


if __name__ == "__main__":
    main()
