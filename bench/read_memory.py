"""Server memory of reading one huge session through the API, and analysis time against content size.

    .venv/bin/python bench/read_memory.py [--steps 2000] [--kb 200] [--small-kb 2] [--readers 3]

Builds a message-log session of `--steps` messages of `--kb` KB each (and the same session
with `--small-kb` KB messages) with `tracefix import` into a fresh file, starts `tracefix
serve` on it and reads the big session through the API as its clients do:
- `show`: the first page of the session document (previews), as `tracefix show` reads;
- `HttpAccess`: the whole document and spans put back together from every page, as the
  analysis, the replay and the report read a session from another process;
- `N readers`: N clients paging through the whole session at the same time.
For each it prints the server's peak RSS above its idle RSS (VmHWM, reset before each read;
sampled /proc RSS where the reset is refused) next to the target, and, as the baseline, the
old unpaged path: the whole document built and encoded at once (the former route's work),
measured in a process of its own on the same file. Then `tracefix analyze` of the big and
the small session (file mode, no model), with the time ratio next to the content ratio.
Target: peak <= 300 MB above idle for every read.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "tests"),
                str(Path(__file__).resolve().parents[1] / "tests" / "collector")]
from long_prompts import prose as message_text  # noqa: E402  (the text bench/large_exports.py sends too)

TRACEFIX = [sys.executable, "-m", "tracefix.cli"]
TARGET_MB = 300
AGENTS = ("Orchestrator", "AccountAgent", "PaymentAgent", "Computer_terminal")


def write_log(path: Path, steps: int, kb: int, seed: int = 7) -> None:
    """One conversation of `steps` messages, written message by message (never whole in memory)."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps({"task": f"Process the transfer queue ({kb} KB messages)", "is_correct": False})[:-1])
        f.write(', "messages": [')
        f.write(json.dumps({"role": "user", "content": "Process the transfer queue. " + message_text(rng, 200)}))
        for i in range(1, steps):
            f.write(", " + json.dumps({"role": "assistant", "name": AGENTS[i % len(AGENTS)],
                                       "content": message_text(rng, kb * 1024)}))
        f.write("]}")


def import_log(path: Path, db: Path) -> str:
    done = subprocess.run([*TRACEFIX, "import", str(path), "--db", str(db), "--json"], capture_output=True,
                          text=True, env={**os.environ, "TRACEFIX_SERVER": ""})
    if done.returncode != 0:
        raise SystemExit(f"import failed: {done.stderr}")
    return json.loads(done.stdout)[0]


def status_mb(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


class Peak:
    """The peak RSS of process `pid` while the block runs: the kernel's high-water mark
    (VmHWM, reset on entry through /proc/PID/clear_refs), else /proc RSS sampled every 5 ms."""

    def __init__(self, pid: int):
        self.pid = pid
        self.sampled = 0.0
        self.exact = False
        self._stop = threading.Event()

    def __enter__(self):
        try:
            with open(f"/proc/{self.pid}/clear_refs", "w") as f:
                f.write("5")
            self.exact = True
        except OSError:
            pass
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.sampled = max(self.sampled, status_mb(self.pid, "VmRSS"))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.mb = max(self.sampled, status_mb(self.pid, "VmHWM") if self.exact else 0.0)


def get_json(url: str, timeout: float = 600) -> dict:
    import urllib.request

    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def walk_pages(base: str, sid: str) -> int:
    """Every page HttpAccess asks for, read and dropped; returns the bytes of content seen."""
    seen = 0
    for path, field, query in ((f"/api/v1/sessions/{sid}", "steps", "&limit=200&max_chars=1000000&content=keys"),
                               (f"/api/v1/sessions/{sid}/messages", "messages", "&limit=1000"),
                               (f"/api/v1/sessions/{sid}/spans", "spans", "&limit=1000")):
        offset = 0
        while offset is not None:
            page = get_json(f"{base}{path}?offset={offset}{query}")
            seen += sum(len(m.get("text", "")) for m in page[field]) if field == "messages" else 0
            offset = page["page"]["next_offset"]
    return seen


def unpaged_baseline(db: Path, sid: str) -> float | None:
    """Peak MB above idle of the former route's work: the whole document built and encoded."""
    code = f"""
import json, sys
from tracefix.collector.store import Store
def mb(field):
    return next(int(l.split()[1]) / 1024 for l in open('/proc/self/status') if l.startswith(field + ':'))
store = Store({str(db)!r}, read_only=True)
idle = mb('VmRSS')
body = json.dumps(store.get_session({sid!r}), ensure_ascii=False).encode()
print(mb('VmHWM') - idle, len(body))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        print(f"  (old path not measured: {done.stderr.strip().splitlines()[-1:]})")
        return None
    peak, size = done.stdout.split()
    print(f"  old unpaged path: one response of {int(size) / 1e6:.0f} MB")
    return float(peak)


def serve(db: Path):
    """`tracefix serve` on the file, through the tests' process harness: stopped on any exit,
    a SIGTERM of this bench included."""
    import procs

    return procs.start_serve(db, "--diagnose", "off", env={"TRACEFIX_TOKEN": ""}, timeout=120)


def analyze_seconds(db: Path, sid: str) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([*TRACEFIX, "analyze", sid, "--db", str(db), "--no-llm", "--json"], capture_output=True,
                          text=True, env={**os.environ, "TRACEFIX_SERVER": "",
                                          "TRACEFIX_MODEL_DIR": str(db.parent / "no-models")})
    if done.returncode != 0:
        raise SystemExit(f"analyze failed: {done.stderr}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--kb", type=int, default=200, help="size of each message of the big session")
    ap.add_argument("--small-kb", type=int, default=2, help="size of each message of the comparison session")
    ap.add_argument("--readers", type=int, default=3, help="concurrent readers")
    ap.add_argument("--no-analyze", action="store_true", help="skip the analysis timing")
    args = ap.parse_args()
    from tracefix.collector.access import HttpAccess

    with tempfile.TemporaryDirectory(prefix="tracefix-read-memory-") as tmp:
        folder = Path(tmp)
        db = folder / "tracefix.duckdb"
        print(f"building {args.steps} steps x {args.kb} KB and x {args.small_kb} KB (tracefix import) ...")
        t0 = time.perf_counter()
        ids = {}
        for kb in (args.kb, args.small_kb):
            log = folder / f"log-{kb}.json"
            write_log(log, args.steps, kb)
            ids[kb] = import_log(log, db)
            log.unlink()
        big = ids[args.kb]
        print(f"  done in {time.perf_counter() - t0:.0f} s; big session {big}")
        baseline = unpaged_baseline(db, big)

        server = serve(db)
        proc, base = server.popen, server.match["http"]
        rows = []
        try:
            get_json(f"{base}/api/v1/sessions/{big}?limit=1")  # first read: opens what any read opens
            time.sleep(0.5)
            idle = status_mb(proc.pid, "VmRSS")
            with Peak(proc.pid) as peak:
                page = get_json(f"{base}/api/v1/sessions/{big}")
            rows.append(("show: first page (previews)", peak.mb - idle,
                         f"{len(page['steps'])} steps of {page['page']['total']}"))
            with Peak(proc.pid) as peak:
                t0 = time.perf_counter()
                access = HttpAccess(base)
                doc = access.get_session(big)
                spans = access.get_spans(big)
                wall = time.perf_counter() - t0
            content = sum(len((s["output_message"] or {}).get("content") or "") for s in doc["steps"])
            rows.append(("HttpAccess: whole document + spans", peak.mb - idle,
                         f"{len(doc['steps'])} steps, {len(spans)} spans, {content / 1e6:.0f} MB content, "
                         f"{wall:.1f} s"))
            del doc, spans
            with Peak(proc.pid) as peak:
                t0 = time.perf_counter()
                threads = [threading.Thread(target=walk_pages, args=(base, big)) for _ in range(args.readers)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                wall = time.perf_counter() - t0
            rows.append((f"{args.readers} concurrent readers, every page", peak.mb - idle, f"{wall:.1f} s"))
        finally:
            server.stop()

        print(f"\nserver peak RSS above idle ({idle:.0f} MB idle), target <= {TARGET_MB} MB")
        print(f"  {'read':<40} {'peak MB':>8} {'target':>7}  notes")
        if baseline is not None:
            print(f"  {'old unpaged path (baseline)':<40} {baseline:>8.0f} {'':>7}  whole document in one response")
        for name, mb, note in rows:
            print(f"  {name:<40} {mb:>8.0f} {'met' if mb <= TARGET_MB else 'MISSED':>7}  {note}")

        if not args.no_analyze:
            small_s = analyze_seconds(db, ids[args.small_kb])
            big_s = analyze_seconds(db, big)
            print(f"\ntracefix analyze, {args.steps} steps (file mode, no model)")
            print(f"  {args.small_kb:>4} KB messages: {small_s:7.1f} s")
            print(f"  {args.kb:>4} KB messages: {big_s:7.1f} s")
            print(f"  time ratio {big_s / small_s:.1f}x for a content ratio of {args.kb / args.small_kb:.0f}x "
                  f"(quadratic would be {(args.kb / args.small_kb) ** 2:.0f}x)")


if __name__ == "__main__":
    main()
