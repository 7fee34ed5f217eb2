"""Spans exported vs dropped while an app thread makes `chat.completions.create` calls back
to back: tracefix.init() with its default OTLP/HTTP exporter against the hand-written floor
(the plain OpenTelemetry SDK: BatchSpanProcessor + OTLP/HTTP exporter, bench/instrumentation_floor.py's
span), side by side in one run, each mode in a process of its own, modes in turn per round.

Both export to a local OTLP/HTTP receiver in a process of its own (answers 200 to every POST,
reads the body), so only the exporting process's threads share its GIL. The app thread
holds the GIL but for the client's short C calls; the exporter thread gets it back when
the app thread gives it up at the switch interval (5 ms), so every call on the export path
that lets go of the GIL can cost a batch up to 5 ms (the convoy effect).

The app thread lets go of the GIL itself once a call (the openai client's idempotency key
reads os.urandom); a waiting thread then is woken and loses the race each time, and its
5 ms timer starts over, so one wait for the GIL can last seconds, a lottery the plain SDK's
exporter plays as much: the drop counts swing 0 to thousands between runs of the same code.
The steady figures are the GIL-releasing calls per batch and the batch's median time.

    .venv/bin/python bench/export_starvation.py [--calls 5000] [--rounds 3] [--url-every 400]
        [--before DIR]   (DIR/tracefix: `git archive REV instrumentation`, renamed)

Prints per mode: spans ended, exported, dropped on the full queue, medians over rounds, the
median time to export one batch, and the C calls the export thread made in one 512-span batch
(counted with sys.setprofile in the warm-up's batch, untimed; the GIL-releasing ones named).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODES = ("floor", "tracefix")
RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"""
# C functions on the export path that let go of the GIL: the hint scanners, the socket's calls
RELEASING = {"Database.scan", "AhoCorasick.find_matches_as_indexes", "socket.sendall", "socket.send",
             "socket.recv_into", "socket.recv", "socket.connect", "poll", "poll.poll", "select", "compress"}
URL_MESSAGE = {"role": "user", "content": "The fee schedule is at https://bank.example/fees if she asks."}


def _child(mode: str, endpoint: str, calls: int, url_every: int) -> dict:
    sys.path.insert(0, str(HERE))
    import instrumentation_overhead as bench
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanProcessor

    client = bench._client()
    ended, count = [0], [0]

    def messages() -> list:  # every url_every-th call's messages hold a URL: a hint of a secret ("://")
        count[0] += 1
        return bench.MESSAGES + [URL_MESSAGE] if url_every and count[0] % url_every == 0 else bench.MESSAGES

    class CountEnded(SpanProcessor):
        def on_end(self, span):
            ended[0] += 1

    provider = TracerProvider()
    provider.add_span_processor(CountEnded())
    if mode == "floor":
        import instrumentation_floor as floor
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=endpoint + "/v1/traces")
        processor = BatchSpanProcessor(exporter)
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("floor")

        def call():
            floor.plain(tracer, client, bench.MODEL, messages(), bench.TOOLS, 0)
        flush = processor.force_flush
    else:
        import tracefix

        handle = tracefix.init(tracer_provider=provider, endpoint=endpoint)
        tracefix.session("bench", entrypoint="bench:run", inputs={}).__enter__()
        exporter = handle.exporters[0]

        def call():
            client.chat.completions.create(model=bench.MODEL, messages=messages(), tools=bench.TOOLS,
                                           temperature=0)
        flush = handle.force_flush
    exported, times, c_calls, starts, profiling = [0], [], {}, [], [False]
    inner_export = exporter.export

    def profile(frame, event, arg):
        if event == "c_call":
            name = getattr(arg, "__qualname__", None) or getattr(arg, "__name__", "?")
            c_calls[name] = c_calls.get(name, 0) + 1

    def timed_export(spans):
        profiled = profiling[0]
        if profiled:
            sys.setprofile(profile)
        start = time.perf_counter()
        starts.append(start)
        try:
            return inner_export(spans)
        finally:
            times.append(time.perf_counter() - start)
            if profiled:
                sys.setprofile(None)
            exported[0] += len(spans)
    exporter.export = timed_export
    for _ in range(512):  # warm-up; its one batch's C calls counted (profiling slows it: not timed)
        call()
    profiling[0] = True
    flush()
    profiling[0] = False
    ended[0], exported[0], times[:], starts[:] = 0, 0, [], []
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(calls):
        call()
    busy_wall, busy_cpu = time.perf_counter() - wall, time.process_time() - cpu
    during = exported[0]
    flush()
    releasing = {k: v for k, v in c_calls.items() if k in RELEASING}
    return {"ended": ended[0], "exported": exported[0], "exported_during": during,
            "dropped": ended[0] - exported[0], "batch_ms": [t * 1000 for t in times], "busy_s": busy_wall,
            "starts": [round(s - wall, 3) for s in starts],
            "calls_per_s": calls / busy_wall, "cpu_share": busy_cpu / busy_wall,
            "c_calls_per_batch": sum(c_calls.values()), "releasing": releasing}


def _probe(seconds: float, fixed_key: bool) -> str:
    """A thread that lets go of the GIL (sleep(0)) and asks for it back, again and again, while
    this thread makes plain client calls: how long each take-back waited. `fixed_key`: the
    client's idempotency key made constant, its os.urandom gone (a diagnosis only)."""
    import threading

    sys.path.insert(0, str(HERE))
    import instrumentation_overhead as bench

    client = bench._client()
    if fixed_key:
        client._idempotency_key = lambda: "stainless-python-retry-fixed"
    waits: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            start = time.perf_counter()
            time.sleep(0)
            waits.append(time.perf_counter() - start)
    for _ in range(50):
        client.chat.completions.create(model=bench.MODEL, messages=bench.MESSAGES, tools=bench.TOOLS)
    thread = threading.Thread(target=probe)
    thread.start()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        client.chat.completions.create(model=bench.MODEL, messages=bench.MESSAGES, tools=bench.TOOLS)
    stop.set()
    thread.join()
    waits.sort()
    return (f"GIL take-back behind the plain client{' (idempotency key fixed)' if fixed_key else ''}: "
            f"median {waits[len(waits) // 2] * 1000:.2f} ms, p99 {waits[int(len(waits) * 0.99)] * 1000:.1f}, "
            f"max {waits[-1] * 1000:.1f} ({len(waits)} waits)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url-every", type=int, default=0,
                        help="every Nth call's messages hold a URL (0: none); 400: about one a batch")
    parser.add_argument("--before", metavar="DIR",
                        help="also run tracefix from DIR/tracefix (e.g. `git archive REV instrumentation`)")
    parser.add_argument("--probe", type=float, metavar="SECONDS",
                        help="only measure a thread's wait for the GIL behind the plain client, with and without "
                             "its os.urandom (the cause), SECONDS each")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "ENDPOINT"))
    args = parser.parse_args()
    if args.probe:
        for fixed_key in (False, True):
            print(_probe(args.probe, fixed_key))
        print(f"load average {os.getloadavg()[0]:.1f}")
        return
    if args.child:
        print(json.dumps(_child(args.child[0], args.child[1], args.calls, args.url_every)))
        return
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        endpoint = f"http://127.0.0.1:{receiver.stdout.readline().strip()}"
        env = {**os.environ, "TRACEFIX_CAPTURE_CONTENT": "true"}
        modes = MODES + (("before",) if args.before else ())
        results: dict[str, list[dict]] = {m: [] for m in modes}
        for _ in range(args.rounds):
            for mode in modes:
                child_env = {**env, "PYTHONPATH": args.before} if mode == "before" else env
                out = subprocess.run([sys.executable, __file__, "--calls", str(args.calls), "--url-every",
                                      str(args.url_every), "--child", "tracefix" if mode == "before" else mode,
                                      endpoint], capture_output=True, text=True, env=child_env, check=True)
                results[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        receiver.kill()
    print(f"{args.calls} calls a run, a URL every {args.url_every or 'never'}, {args.rounds} rounds, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs, switch interval {sys.getswitchinterval() * 1000:.0f} ms")
    med = statistics.median
    for mode in modes:
        runs = results[mode]
        batch = [t for r in runs for t in r["batch_ms"]]
        print(f"{mode:9s} ended {med(r['ended'] for r in runs):7.0f}  exported {med(r['exported'] for r in runs):7.0f}"
              f"  dropped {med(r['dropped'] for r in runs):7.0f} (runs: {[r['dropped'] for r in runs]})"
              f"  batch export median {med(batch) if batch else 0:7.1f} ms (n={len(batch)})"
              f"  {med(r['calls_per_s'] for r in runs):5.0f} calls/s")
        print(f"          C calls in one 512-span export: {runs[0]['c_calls_per_batch']}; "
              f"GIL-releasing kinds: {runs[0]['releasing']}")
    f, t = (med(r["dropped"] for r in results[m]) for m in MODES)
    print(f"dropped, tracefix / floor: {t:.0f} / {f:.0f}"
          + (f"; before: {med(r['dropped'] for r in results['before']):.0f}" if args.before else ""))


if __name__ == "__main__":
    main()
