"""Bytes on disk per 100-step agent session vs the raw OTLP/JSON bytes of the same session.

    .venv/bin/python bench/storage.py [--sessions 20] [--steps 100]

Sessions look like the banking demo's: every LLM call resends the growing history (system
prompt, task, every earlier turn and tool result) plus the tool definitions and the raw
response; tool spans; a state snapshot every 10 steps. The spans go through the
collector's normalization and store (one transaction per session, as the writer does),
the file is checkpointed, and its growth over an empty store is divided by the number of
sessions. Target: <= 0.25 of the raw OTLP/JSON bytes.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_spans import request, session_spans  # noqa: E402


def file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(str(path) + ".wal")) if p.exists())


def main() -> None:
    from google.protobuf import json_format

    from tracefix.collector.normalize import normalize_request
    from tracefix.collector.store import Store

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    rng = random.Random(7)
    db = Path(tempfile.mkdtemp(prefix="tracefix-storage-")) / "storage.duckdb"
    store = Store(db)
    store.checkpoint()
    empty = file_bytes(db)
    raw_json = raw_proto = spans = 0
    for i in range(args.sessions):
        req = request(session_spans(f"storage-{i}", args.steps, rng, growing=True))
        raw_json += len(json_format.MessageToJson(req, indent=None).encode())
        raw_proto += req.ByteSize()
        batch = normalize_request(req)
        spans += len(batch.spans)
        store.ingest(batch)
    store.checkpoint()
    store.close()
    used = file_bytes(db) - empty
    n = args.sessions
    print(f"{n} sessions x {args.steps} steps ({spans // n} spans each)")
    print(f"raw OTLP/JSON per session:     {raw_json / n / 1e6:8.2f} MB")
    print(f"raw OTLP/protobuf per session: {raw_proto / n / 1e6:8.2f} MB")
    print(f"DuckDB bytes per session:      {used / n / 1e6:8.2f} MB  (file {file_bytes(db) / 1e6:.1f} MB, "
          f"empty store {empty / 1e6:.2f} MB)")
    print(f"ratio disk/OTLP-JSON: {used / raw_json:.3f}   target: <= 0.25")
    os.remove(db)


if __name__ == "__main__":
    main()
