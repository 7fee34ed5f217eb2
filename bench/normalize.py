"""CPU cost of OTLP span normalization per span, next to the protobuf parse it follows.

    .venv/bin/python bench/normalize.py [--runs 5] [--exporters 6] [--sessions 12] [--steps 100]

The spans are bench/ingest.py's own (`build_bodies`: 301 spans per session, 1-4 KB of chat
messages per LLM call). Each run parses every body (`otlp.decode`) and normalizes every
request (`normalize_request`, with the body size as `wire_bytes`, as the decode worker
does), timed with `time.process_time`. Printed: medians of the runs in microseconds per span
and their ratio. Target (issue 4): normalize <= 16 us/span on the reference machine.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from ingest import build_bodies  # noqa: E402

from tracefix.collector import otlp  # noqa: E402
from tracefix.collector.normalize import normalize_request  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--exporters", type=int, default=6)
    ap.add_argument("--sessions", type=int, default=12)
    ap.add_argument("--steps", type=int, default=100, help="steps per session (3 spans each)")
    args = ap.parse_args()

    bodies = [b for w in range(args.exporters) for b in build_bodies(w, args.sessions, args.steps)]
    n_spans = sum(n for _, n in bodies)
    parse_us, norm_us = [], []
    for _ in range(args.runs):
        t0 = time.process_time()
        requests = [otlp.decode(body, otlp.PROTOBUF) for body, _ in bodies]
        t1 = time.process_time()
        batches = [normalize_request(req, wire_bytes=len(body)) for req, (body, _) in zip(requests, bodies)]
        t2 = time.process_time()
        if sum(b.span_count for b in batches) != n_spans:
            raise SystemExit("normalize_request lost spans")
        parse_us.append((t1 - t0) / n_spans * 1e6)
        norm_us.append((t2 - t1) / n_spans * 1e6)
        print(f"run: parse {parse_us[-1]:.1f} us/span, normalize {norm_us[-1]:.1f} us/span")
    parse, norm = statistics.median(parse_us), statistics.median(norm_us)
    print(f"{len(bodies)} requests, {n_spans} spans, medians of {args.runs} runs:")
    print(f"protobuf parse {parse:.1f} us/span")
    print(f"normalize {norm:.1f} us/span = {norm / parse:.1f}x protobuf parse (target <= 16 us/span)")


if __name__ == "__main__":
    main()
