"""Added time per `chat.completions.create`: tracefix vs a hand-written span carrying the same
content (the floor) vs OpenInference, OpenLLMetry and OpenLit, non-streaming and streaming,
in one run.

The OpenAI client talks to an in-process `httpx.MockTransport` that returns a canned,
realistic response (a worker-agent turn with a tool call; the stream variant as 21 SSE
chunks with a final usage chunk), so the network does not dominate. Every (mode, round)
runs in a fresh process that only ever has that mode: the uninstrumented calls ("none")
have a process of their own too, since an instrumentor's uninstrument() can leave plain
calls slower than they were (OpenLLMetry's doubles them). Rounds interleave the modes in a
shuffled order so machine noise hits all of them alike, and a mode's added time is its
median minus the same round's "none". All use a TracerProvider + BatchSpanProcessor with an
exporter that drops spans, and capture message content (each one's default); tracefix's
calls run inside a session.

OpenLit pins an older openai, anthropic and OpenTelemetry than the dev extra's, so it runs
in a virtual environment of its own (made on first use under .tracefix/bench-venvs/, with
its own "none" baseline); `--no-openlit` leaves it out.

    .venv/bin/python bench/instrumentation_overhead.py [--rounds 5] [--calls 200] [--blocks 3] [--ceiling]

Prints the median time per call without instrumentation, each mode's added time, tracefix's
added time as a ratio of the floor's and of each peer's, the cost of the conventions' parts
attributes, and the machine's load. Each round also runs none, the floor and tracefix
interleaved in one process (`--paired`), where a change of the machine's load lands on the
three alike: under a load of several processes per CPU the separate processes' ratio to the
floor swung 0.95-1.80 between two runs of the same code.

`--ceiling` adds two modes that say how low a figure can go at all, each divided by the
lightest peer's: "bare", an SDK span around the call with no attributes (what any
instrumentation pays at least), and "tracefix-no-content", tracefix with content capture off
(its spans without the messages, the response or the chunks).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from instrumentation_workload import COMPLETION, MESSAGES, MODEL, TOOLS, _client

MODES = ("none", "floor", "tracefix", "openinference", "openllmetry")
CEILING_MODES = ("bare", "tracefix-no-content")  # --ceiling: how low a figure can go at all
OPENLIT = "openlit==1.45.0"  # the lightest peer of the issue that asked for this comparison
OPENLIT_VENV = Path(__file__).resolve().parent.parent / ".tracefix" / "bench-venvs" / OPENLIT.replace("==", "-")


def _provider():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Discard(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    return provider, Discard


def _instrument(mode: str, client) -> tuple:
    """Turn `mode` on for the life of this process: (plain call, streamed call)."""
    def plain() -> None:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, tools=TOOLS, temperature=0)

    def streamed() -> None:
        for _ in client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True,
                                                stream_options={"include_usage": True}):
            pass

    if mode == "none":
        return plain, streamed
    provider, discard = _provider()
    if mode == "bare":  # what any instrumentation pays at least: a span, nothing in it
        from opentelemetry.trace import SpanKind

        tracer = provider.get_tracer("bare")

        def spanned(call):
            def run() -> None:
                with tracer.start_as_current_span(f"chat {MODEL}", kind=SpanKind.CLIENT):
                    call()
            return run
        return spanned(plain), spanned(streamed)
    if mode == "floor":
        sys.path.insert(0, str(Path(__file__).parent))
        import instrumentation_floor as floor

        tracer = provider.get_tracer("floor")
        return (lambda: floor.plain(tracer, client, MODEL, MESSAGES, TOOLS, 0),
                lambda: floor.streamed(tracer, client, MODEL, MESSAGES))
    if mode in ("tracefix", "tracefix-no-content"):
        import tracefix
        from opentelemetry.sdk.trace import TracerProvider

        # a bare provider: tracefix adds its own BatchSpanProcessor around the exporter (a
        # processor already there would be wrapped to redact in the app's thread, and export twice)
        tracefix.init(tracer_provider=TracerProvider(), exporter=discard(),
                      capture_content=mode == "tracefix")
        tracefix.session("bench", entrypoint="bench:run", inputs={}).__enter__()  # calls get steps, fingerprints
    elif mode == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
    elif mode == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetry

        OpenLLMetry().instrument(tracer_provider=provider)
    elif mode == "openlit":
        import tempfile

        import openlit
        from opentelemetry import trace

        trace.set_tracer_provider(provider)  # openlit.init reuses the SDK provider it finds
        prices = Path(tempfile.mkdtemp()) / "pricing.json"  # its price table is fetched from the web otherwise
        prices.write_text(json.dumps({"chat": {MODEL: {"promptPrice": 0.001, "completionPrice": 0.002}}}))
        openlit.init(capture_message_content=True, disable_metrics=True, disable_events=True,
                     pricing_json=str(prices), disabled_instrumentors=["httpx", "requests", "urllib", "urllib3"])
    return plain, streamed


def _parts_cost() -> dict:
    """µs per call of the conventions' parts attributes, as tracefix writes them for the bench's
    request and response: the second serialization beside the request as sent."""
    import timeit

    from tracefix.attributes import dumps
    from tracefix.fingerprints import normalize_messages
    from tracefix.message_parts import input_messages, output_messages
    from tracefix.openai_chat import OpenAIChat

    messages, summary = normalize_messages(MESSAGES), OpenAIChat().summarize(COMPLETION)
    runs = 2000
    inputs = min(timeit.repeat(lambda: dumps(input_messages(messages)[1]), number=runs, repeat=5)) / runs * 1e6
    outputs = min(timeit.repeat(lambda: dumps(output_messages(summary.output_messages, summary.finish_reasons)),
                                number=runs, repeat=5)) / runs * 1e6
    return {"input": inputs, "output": outputs}


CPU_GROUP = 20  # calls per process-CPU-time reading (its clock is coarser than a call)


def worker(mode: str, calls: int, blocks: int) -> dict:
    """Runs in its own process: µs per call with `mode` on, plain and streamed: the median
    wall time of a call, and the median process CPU time (every thread: an exporter's too)
    per call over groups of CPU_GROUP calls, which other processes' load disturbs less."""
    import resource

    client = _client()
    plain, streamed = _instrument(mode, client)
    wall: dict = {"plain": [], "stream": []}
    cpu: dict = {"plain": [], "stream": []}
    kernel = {"plain": [0.0, 0], "stream": [0.0, 0]}  # system CPU seconds, voluntary context switches
    for _ in range(blocks):
        for kind, fn in (("plain", plain), ("stream", streamed)):
            for _ in range(max(10, calls // 10)):  # warm-up
                fn()
            usage = resource.getrusage(resource.RUSAGE_SELF)
            kernel[kind][0] -= usage.ru_stime
            kernel[kind][1] -= usage.ru_nvcsw
            for group in range(0, calls, CPU_GROUP):
                cpu_start = time.process_time_ns()
                for _ in range(min(CPU_GROUP, calls - group)):
                    start = time.perf_counter_ns()
                    fn()
                    wall[kind].append(time.perf_counter_ns() - start)
                cpu[kind].append((time.process_time_ns() - cpu_start) / min(CPU_GROUP, calls - group))
            usage = resource.getrusage(resource.RUSAGE_SELF)
            kernel[kind][0] += usage.ru_stime
            kernel[kind][1] += usage.ru_nvcsw
    out: dict = {kind: statistics.median(times) / 1000 for kind, times in wall.items()}
    out.update({f"{kind}_cpu": statistics.median(times) / 1000 for kind, times in cpu.items()})
    out.update({f"{kind}_kernel": (seconds * 1e6 / (blocks * calls), switches / (blocks * calls))
                for kind, (seconds, switches) in kernel.items()})
    if mode == "tracefix":
        out["parts"] = _parts_cost()
    return out


def paired_worker(calls: int) -> dict:
    """Runs in its own process: the uninstrumented call, the floor and tracefix interleaved,
    in shuffled order, `calls` groups of CPU_GROUP calls each, so that a change in the
    machine's load lands on all three alike: µs of process CPU time per call, the median of
    each mode's groups. tracefix is on in this process; the other two call the SDK method
    tracefix wrapped unwrapped (wrapt's __wrapped__), so the uninstrumented process's heap
    is the instrumented one's here: the separate processes above price that too."""
    from openai.resources.chat.completions import Completions

    client = _client()
    plain, streamed = _instrument("tracefix", client)
    create, resource = Completions.create.__wrapped__, client.chat.completions

    class Untraced:  # client.chat.completions.create without tracefix's wrapper
        class chat:
            class completions:
                @staticmethod
                def create(**kwargs):
                    return create(resource, **kwargs)

    fns: dict[str, dict] = {"plain": {}, "stream": {}}
    for mode, (traced_plain, traced_streamed) in (("none", _instrument("none", Untraced())),
                                                  ("floor", _instrument("floor", Untraced())),
                                                  ("tracefix", (plain, streamed))):
        fns["plain"][mode], fns["stream"][mode] = traced_plain, traced_streamed
    out: dict = {}
    rng = random.Random(0)
    for kind, modes in fns.items():
        for fn in modes.values():
            for _ in range(5 * CPU_GROUP):  # warm-up
                fn()
        times: dict = {mode: [] for mode in modes}
        order = list(modes)
        for _ in range(calls):
            rng.shuffle(order)
            for mode in order:
                fn, start = modes[mode], time.process_time_ns()
                for _ in range(CPU_GROUP):
                    fn()
                times[mode].append((time.process_time_ns() - start) / CPU_GROUP)
        out[kind] = {mode: statistics.median(values) / 1000 for mode, values in times.items()}
    return out


def span_contents() -> dict:
    """The attribute keys of one non-streaming call's span, the floor's and tracefix's: the
    floor carries tracefix's content; what only tracefix has is its own bookkeeping."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    sys.path.insert(0, str(Path(__file__).parent))
    import instrumentation_floor as floor
    import tracefix

    client, keys = _client(), {}
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    floor.plain(provider.get_tracer("floor"), client, MODEL, MESSAGES, TOOLS, 0)
    keys["floor"] = set(memory.get_finished_spans()[-1].attributes)
    memory.clear()
    handle = tracefix.init(span_processor=SimpleSpanProcessor(memory))
    with tracefix.session("bench"):
        client.chat.completions.create(model=MODEL, messages=MESSAGES, tools=TOOLS, temperature=0)
    handle.shutdown()
    keys["tracefix"] = {key for span in memory.get_finished_spans() if span.name.startswith("chat")
                        for key in span.attributes}
    return keys


def openlit_python() -> tuple[str | None, str]:
    """The OpenLit venv's interpreter (made when missing), or None and why not."""
    python = OPENLIT_VENV / "bin" / "python"
    if not (OPENLIT_VENV / "bin" / "openlit-installed").exists():
        try:
            subprocess.run([sys.executable, "-m", "venv", str(OPENLIT_VENV)], check=True, capture_output=True)
            # a new venv's own pip (23.x here) finds openlit's pins unresolvable: a current one first
            for packages in (["--upgrade", "pip"], [OPENLIT]):
                subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True,
                               capture_output=True, timeout=900)
        except (subprocess.SubprocessError, OSError) as exc:
            return None, f"absent: its virtual environment could not be made ({exc})"
        (OPENLIT_VENV / "bin" / "openlit-installed").touch()
    return str(python), f"{OPENLIT} in {OPENLIT_VENV} (its own openai and OpenTelemetry; baseline measured there)"


def _run(python: str, mode: str, args) -> dict:
    out = subprocess.run([python, __file__, "--worker", mode, "--calls", str(args.calls), "--blocks",
                          str(args.blocks)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the {mode} worker ({python}) failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200, help="calls per block")
    parser.add_argument("--blocks", type=int, default=3, help="blocks of calls per process")
    parser.add_argument("--no-openlit", action="store_true", help="leave OpenLit (its own venv) out")
    parser.add_argument("--peers", action=argparse.BooleanOptionalAction, default=True,
                        help="--no-peers: none, the floor and tracefix only (a quick look; no peer ratios)")
    parser.add_argument("--paired", type=int, default=60, metavar="GROUPS",
                        help=f"per round, also none / floor / tracefix interleaved in one process, GROUPS groups of "
                             f"{CPU_GROUP} calls each (0: not)")
    parser.add_argument("--ceiling", action="store_true",
                        help=f"also {' and '.join(CEILING_MODES)}: how low a figure can go at all")
    parser.add_argument("--worker", choices=(*MODES, *CEILING_MODES, "openlit", "paired"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "paired":
        print(json.dumps(paired_worker(args.calls)))
        return
    if args.worker:
        print(json.dumps(worker(args.worker, args.calls, args.blocks)))
        return

    lit_python, lit_note = (None, "left out") if args.no_openlit or not args.peers else openlit_python()
    modes = (MODES if args.peers else MODES[:3]) + (CEILING_MODES if args.ceiling else ())
    runs = [(sys.executable, m, m) for m in modes]  # (interpreter, mode, label)
    if lit_python and args.peers:
        runs += [(lit_python, "none", "none (openlit venv)"), (lit_python, "openlit", "openlit")]
    samples: dict[str, list[dict]] = {label: [] for _, _, label in runs}
    loads = [os.getloadavg()[0]]
    pairs: list[dict] = []
    rng = random.Random(0)
    for round_index in range(args.rounds):
        order = list(runs)
        rng.shuffle(order)
        for python, mode, label in order:
            samples[label].append(_run(python, mode, args))
        if args.paired:
            pairs.append(_run(sys.executable, "paired", argparse.Namespace(calls=args.paired, blocks=0)))
        loads.append(os.getloadavg()[0])
        print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr)

    print(f"chat.completions.create against an in-process httpx.MockTransport; medians over {args.rounds} rounds "
          f"x {args.blocks} blocks x {args.calls} calls, each mode in processes of its own; 'added' = the mode's "
          f"median minus the same round's uninstrumented one")
    print(f"machine: {os.cpu_count()} CPUs, 1-min load {min(loads):.2f}-{max(loads):.2f} during the run")
    print(f"OpenLit: {lit_note}")
    for kind in ("plain", "stream", "plain_cpu", "stream_cpu"):
        def added(label: str, baseline: str = "none") -> float:
            return statistics.median(s[kind] - b[kind] for s, b in zip(samples[label], samples[baseline]))
        none = statistics.median(s[kind] for s in samples["none"])
        adds = {label: added(label) for label in modes[1:]}
        if "openlit" in samples:
            adds["openlit"] = added("openlit", "none (openlit venv)")
        what = "non-streaming" if kind.startswith("plain") else "streaming (21 chunks)"
        clock = "process CPU time (all threads)" if kind.endswith("_cpu") else "wall time"
        print(f"\n{what}, {clock}: none {none:.1f} µs/call")
        for label, value in adds.items():
            print(f"  {label:14s} added {value:8.1f} µs/call")
        if kind.endswith("_cpu"):  # the part of it valgrind's instruction count cannot see
            kernel = {label: [statistics.median(s[kind.replace("_cpu", "_kernel")][i] for s in runs_of)
                              for i in (0, 1)] for label, runs_of in samples.items()}
            print("  of the process CPU time, the kernel's (system time, µs/call) and voluntary context switches "
                  "per call: " + ", ".join(f"{label} {sys_us:.1f} / {switches:.2f}"
                                           for label, (sys_us, switches) in kernel.items()))
        floor_ratio = adds["tracefix"] / adds["floor"]
        peers = {label: value for label, value in adds.items() if label not in ("floor", "tracefix", *CEILING_MODES)}
        print(f"  tracefix / floor = {floor_ratio:.2f} (target <= 1.2: {'meets' if floor_ratio <= 1.2 else 'misses'})")
        if not peers:
            continue
        lightest = min(peers, key=peers.__getitem__)
        for label, value in peers.items():
            print(f"  tracefix / {label} = {adds['tracefix'] / value:.2f}")
        peer_ratio = adds["tracefix"] / peers[lightest]
        print(f"  target: <= 0.5 x the lightest peer ({lightest}): {peer_ratio:.2f}, "
              f"{'meets' if peer_ratio <= 0.5 else 'misses'}")
        for label in ("floor", *CEILING_MODES):
            if label in adds:
                print(f"  {label} / {lightest} = {adds[label] / peers[lightest]:.2f}")
    for kind in ("plain", "stream") if pairs else ():
        added = {mode: statistics.median(p[kind][mode] - p[kind]["none"] for p in pairs) for mode in ("floor", "tracefix")}
        ratio = added["tracefix"] / added["floor"]
        print(f"\n{'non-streaming' if kind == 'plain' else 'streaming (21 chunks)'}, process CPU time, the three "
              f"interleaved in one process ({args.paired} groups of {CPU_GROUP} calls each a round): none "
              f"{statistics.median(p[kind]['none'] for p in pairs):.1f} µs/call, floor added {added['floor']:.1f}, "
              f"tracefix added {added['tracefix']:.1f}: tracefix / floor = {ratio:.2f} "
              f"(target <= 1.2: {'meets' if ratio <= 1.2 else 'misses'})")
    parts = {side: statistics.median(s["parts"][side] for s in samples["tracefix"]) for side in ("input", "output")}
    keys = span_contents()
    missing = sorted(keys["floor"] - keys["tracefix"])
    print(f"\nthe floor's span has {len(keys['floor'])} attributes, of which tracefix's lacks "
          f"{', '.join(missing) if missing else 'none'}; tracefix's own besides: "
          f"{', '.join(sorted(keys['tracefix'] - keys['floor']))}")
    print(f"the parts attributes (gen_ai.input.messages + gen_ai.output.messages, the conventions' shape beside "
          f"the request as sent): {parts['input']:.1f} + {parts['output']:.1f} µs per non-streaming call")


if __name__ == "__main__":
    main()
