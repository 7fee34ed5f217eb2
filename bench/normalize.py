"""CPU cost of OTLP span normalization per span, next to the protobuf parse it follows.

    .venv/bin/python bench/normalize.py [--runs 5] [--exporters 6] [--sessions 12] [--steps 100]
                                        [--against GIT_REV] [--model gpt-4o-mini]

The spans are bench/ingest.py's own (`build_bodies`: 301 spans per session, 1-4 KB of chat
messages per LLM call). Each run parses every body (`otlp.decode`), then normalizes every
request (`normalize_request`, with the body size as `wire_bytes` and the body's one scan for
secret hints, as the decode worker does), timed with `time.process_time`. Printed: medians of the runs in microseconds per span
and their ratio. Target (issue 4): normalize <= 16 us/span, half of what it cost before.

`--wire` also times the decode worker's C reader (collector/normalize/wire_spans.py) against
protobuf's parse in the same runs, each body read and normalized in turn as the worker does,
and prints their ratio; every body must take the reader (else it stops), and with `--check`
both forms' batches of every body are compared first, byte for byte.

`--against REV` also times tracefix.collector.normalize as it was at git revision REV, in the same
runs (interleaved), and prints how many times cheaper the working tree's version is. With
`--check` it first compares what both versions make of the same requests, exactly (the Arrow
table, messages, sessions in key order, snapshots, evaluations, rejections and warnings), and
stops at the first difference: the bench's bodies, sessions whose history grows, the pinned
requests of tests/collector/test_normalize_parity.py (every dialect, bad spans) and spans carrying
the secrets of tests/secret_samples.py, each with and without the wire's secret scan.
"""
from __future__ import annotations

import argparse
import importlib.util
import inspect
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import agent_spans  # noqa: E402
from ingest import build_bodies  # noqa: E402
from normalize_check import check_same_output  # noqa: E402

from tracefix.collector import otlp  # noqa: E402
from tracefix.collector.normalize import normalize_request  # noqa: E402
from tracefix.collector.normalize.wire_spans import read_traces  # noqa: E402
from tracefix.secret_rules import utf8_may_hold_secret  # noqa: E402


def normalize_at(rev: str):
    """`normalize_request` of tracefix.collector.normalize as it was at git revision `rev`:
    one module (collector/normalize.py) or, since the split, a package (collector/normalize/),
    loaded under a name of its own beside the working tree's."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout

    tmp = Path(tempfile.mkdtemp(prefix="tracefix-bench-"))
    files = git("ls-tree", "-r", "--name-only", rev, "collector/normalize/").split()
    if not files:  # before the split: one module
        (tmp / "normalize_at_rev.py").write_text(git("show", f"{rev}:collector/normalize.py"))
    else:
        (tmp / "normalize_at_rev").mkdir()
        for name in files:
            source = git("show", f"{rev}:{name}").replace("tracefix.collector.normalize", "normalize_at_rev")
            (tmp / "normalize_at_rev" / Path(name).name).write_text(source)
    sys.path.insert(0, str(tmp))
    try:
        module = importlib.import_module("normalize_at_rev")
    finally:
        sys.path.remove(str(tmp))
    return module.normalize_request


def as_decoded(normalize):
    """normalize(request, body) as `decoding.decode_body` calls it: the body scanned once for
    secret hints where this version takes the answer (`wire_may_hold_secret`)."""
    if "wire_may_hold_secret" in inspect.signature(normalize).parameters:
        return lambda req, body: normalize(req, wire_bytes=len(body), wire_may_hold_secret=utf8_may_hold_secret(body))
    return lambda req, body: normalize(req, wire_bytes=len(body))


def time_paths(bodies: list[tuple[bytes, int]], n_spans: int) -> tuple[float, float]:
    """One run of each path as the decode worker takes it, body by body (read, normalize, let
    go): protobuf's parse and the C reader, in microseconds a span."""
    out = []
    for read in (lambda body: otlp.decode(body, otlp.PROTOBUF), lambda body: read_traces(body, 8 << 20)):
        spans = 0
        t0 = time.process_time()
        for body, _ in bodies:
            request = read(body)
            if request is None:
                raise SystemExit("a body the C reader left to protobuf: is it built (pip install -e .)?")
            spans += normalize_request(request, wire_bytes=len(body),
                                       wire_may_hold_secret=utf8_may_hold_secret(body)).span_count
        out.append((time.process_time() - t0) / n_spans * 1e6)
        if spans != n_spans:
            raise SystemExit("a path lost spans")
    return out[0], out[1]


def check_wire_output(bodies: list[bytes]) -> str:
    """Stop at the first body whose batch from the C reader differs from protobuf's."""
    from normalize_check import observed

    for i, body in enumerate(bodies):
        for scan in (True, False):
            wire = read_traces(body, 8 << 20)  # normalizing consumes it: read anew
            if wire is None:
                raise SystemExit(f"bench body {i}: the C reader left it to protobuf")
            a = observed(normalize_request(wire, wire_bytes=len(body), wire_may_hold_secret=scan))
            b = observed(normalize_request(otlp.decode(body, otlp.PROTOBUF), wire_bytes=len(body),
                                           wire_may_hold_secret=scan))
            if a != b:
                raise SystemExit(f"bench body {i} (secret scan {scan}): the batches differ in "
                                 f"{next(k for k in a if a[k] != b[k])}")
    return f"same batches from the C reader and protobuf: {len(bodies)} bodies, each with and without the scan"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--exporters", type=int, default=6)
    ap.add_argument("--sessions", type=int, default=12)
    ap.add_argument("--steps", type=int, default=100, help="steps per session (3 spans each)")
    ap.add_argument("--against", metavar="GIT_REV", help="also time normalize.py as it was at this revision")
    ap.add_argument("--wire", action="store_true", help="also time the C reader in place of protobuf's parse")
    ap.add_argument("--check", action="store_true",
                    help="with --against or --wire: first check both give the same batches, byte for byte")
    ap.add_argument("--model", default=agent_spans.MODEL,
                    help="the LLM calls' model: one the price table knows (gpt-4o-mini) times their pricing")
    args = ap.parse_args()
    agent_spans.MODEL = args.model

    versions = {"normalize": as_decoded(normalize_request)}
    if args.against:
        versions[f"normalize@{args.against}"] = as_decoded(normalize_at(args.against))
    bodies = [b for w in range(args.exporters) for b in build_bodies(w, args.sessions, args.steps)]
    if args.check:
        if not (args.against or args.wire):
            raise SystemExit("--check compares with --against REV or --wire")
        if args.against:
            print(check_same_output(normalize_request, normalize_at(args.against), [body for body, _ in bodies]))
        if args.wire:
            print(check_wire_output([body for body, _ in bodies]))
    n_spans = sum(n for _, n in bodies)
    parse_us: list[float] = []
    norm_us: dict[str, list[float]] = {name: [] for name in versions}
    paths_us: list[tuple[float, float]] = []  # (protobuf, C reader): read and normalize a span
    for _ in range(args.runs):
        if args.wire:
            paths_us.append(time_paths(bodies, n_spans))
        for name, normalize in versions.items():
            t0 = time.process_time()
            requests = [otlp.decode(body, otlp.PROTOBUF) for body, _ in bodies]
            t1 = time.process_time()
            batches = [normalize(req, body) for req, (body, _) in zip(requests, bodies)]
            t2 = time.process_time()
            if sum(b.span_count for b in batches) != n_spans:
                raise SystemExit(f"{name} lost spans")
            parse_us.append((t1 - t0) / n_spans * 1e6)
            norm_us[name].append((t2 - t1) / n_spans * 1e6)
        print("run: parse %.1f us/span, " % parse_us[-1]
              + ", ".join(f"{name} {us[-1]:.1f} us/span" for name, us in norm_us.items()))
    parse = statistics.median(parse_us)
    medians = {name: statistics.median(us) for name, us in norm_us.items()}
    print(f"{len(bodies)} requests, {n_spans} spans, medians of {args.runs} runs:")
    print(f"protobuf parse {parse:.1f} us/span")
    for name, us in medians.items():
        print(f"{name} {us:.1f} us/span = {us / parse:.1f}x protobuf parse")
    if paths_us:
        pb, wire = (statistics.median(x) for x in zip(*paths_us))
        print(f"body by body, read and normalized: protobuf {pb:.1f} us/span, the C reader {wire:.1f} us/span; the "
              f"C reader's path is {statistics.median(p / w for p, w in paths_us):.2f}x cheaper (median of the runs' own)")
    if args.against:
        old = medians[f"normalize@{args.against}"]
        print(f"normalize is {old / medians['normalize']:.2f}x cheaper than at {args.against} "
              f"(target: >= 2x, <= 16 us/span)")


if __name__ == "__main__":
    main()
