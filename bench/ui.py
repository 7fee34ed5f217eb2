"""Server time of the web UI's heaviest pages, beside the JSON API reading the same data.

    .venv/bin/python bench/ui.py [--sessions 100000] [--steps 1000] [--thumbs-down 20000] [--runs 15] [--db PATH]
    .venv/bin/python bench/ui.py --waterfall [--waterfall-steps 10000] [--runs 15] [--first-views 5] [--db PATH]
    .venv/bin/python bench/ui.py --dashboard [--sessions 100000] [--runs 15] [--db PATH]

Builds (once; `--db` keeps and reuses the file) a store of `--sessions` agent sessions of two
steps each (root, `invoke_agent`, `chat` and `execute_tool` spans as the instrumented demo
emits them, bench/agent_spans.py) plus one session of `--steps` steps, and `--thumbs-down`
negative feedbacks (each an alert and a diagnosis job, left queued: the collector runs with
`--diagnose off`), starts `tracefix serve` on it and asks each page `--runs` times. Server time is the `Server-Timing: app` the UI sets
on every page (the handler's time, rendering included). Since a shared machine inflates wall
time, each page's CPU time in the server process (per request, /proc) is printed too, beside
the CPU time of the JSON API route that reads the same rows, as the baseline. Target: every
UI page's median server time <= 300 ms on 2 cores.

`--waterfall` times the session page's waterfall instead (waterfall_bench): each page of its
rows at a session of 10,000 steps, the page (its first view, which assembles the outline of
every step, on `--first-views` servers started for it, and later views, which read it kept),
and one span's panel. `--dashboard` times each
dashboard chart per grouping on the same store as the pages (dashboard_bench).
"""
from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

import httpx  # noqa: E402
from agent_spans import request, session_spans  # noqa: E402

TARGET_MS = 300
LONG_SESSION = "bench-long-session"
SERVICES = ("bank-demo", "support-bot", "travel-planner", "code-review")


def build(db: Path, sessions: int, steps: int, thumbs_down: int) -> None:
    from tracefix.collector.normalize import normalize_request
    from tracefix.collector.store import Store

    rng = random.Random(7)
    store = Store(db)
    t0 = time.time_ns() - sessions * 1_000_000_000
    started = time.monotonic()
    per_batch = 500
    for first in range(0, sessions, per_batch):
        spans = []
        for i in range(first, min(first + per_batch, sessions)):
            spans += session_spans(f"bench-{i:06d}", 2, rng, growing=False, window=2, t0=t0 + i * 1_000_000_000)
        store.ingest(normalize_request(request(spans, service=SERVICES[first // per_batch % len(SERVICES)])))
        if first and first % 20_000 == 0:
            print(f"  {first} sessions stored ({time.monotonic() - started:.0f} s)", flush=True)
    store.ingest(normalize_request(request(session_spans(LONG_SESSION, steps, rng, growing=False, window=6))))
    for i in range(0, sessions, 97):  # some feedback and jobs, so those columns are not all empty
        store.add_feedback(f"bench-{i:06d}", -1.0 if i % 2 else 1.0, "bench")
    for i in range(thumbs_down):  # the jobs and alerts pages list these
        store.add_feedback(f"bench-{i * 7 % sessions:06d}", -1.0, f"bench thumbs-down {i}")
    store.checkpoint()
    store.close()
    print(f"built {db} in {time.monotonic() - started:.0f} s", flush=True)


def cpu_ms(pid: int) -> float:
    """CPU time (user + system) the process has used so far, in ms."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def timed(client: httpx.Client, url: str, runs: int, pid: int | None = None) -> tuple[list[float], list[float], float]:
    """(server ms from Server-Timing or [], wall ms, the server's CPU ms per request) of `runs`
    GETs after one warm-up."""
    server, wall = [], []
    cpu_before = 0.0
    for n in range(runs + 1):
        if n == 1 and pid is not None:
            cpu_before = cpu_ms(pid)
        start = time.perf_counter()
        r = client.get(url)
        elapsed = (time.perf_counter() - start) * 1000
        r.raise_for_status()
        if n == 0:
            continue
        wall.append(elapsed)
        m = re.search(r"app;dur=([0-9.]+)", r.headers.get("server-timing", ""))
        if m:
            server.append(float(m.group(1)))
    return server, wall, (cpu_ms(pid) - cpu_before) / runs if pid is not None else 0.0


def p90(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(len(xs) * 0.9) - 1)]


WATERFALL_SESSION = "bench-waterfall-session"
WARMUP_SESSION = "bench-waterfall-warmup"  # a short session whose page compiles the session page's template


def first_view(db: Path, sid: str) -> tuple[float, float]:
    """(server ms, server CPU ms) of the session page's first view, on a server started for it:
    the page of another session is read first (the template compiled) and a page of the
    waterfall's rows (the store's blocks read), so what is timed is the outline assembled."""
    import procs

    serve = procs.start_serve(db, "--diagnose", "off", timeout=300)
    try:
        with httpx.Client(base_url=serve.match["http"], timeout=120) as client:
            client.get(f"/session?id={quote(WARMUP_SESSION, safe='')}").raise_for_status()
            client.get(f"/session/waterfall?id={sid}").raise_for_status()
            cpu_before = cpu_ms(serve.popen.pid)
            page = client.get(f"/session?id={sid}")
            page.raise_for_status()
            cpu = cpu_ms(serve.popen.pid) - cpu_before
            return float(re.search(r"app;dur=([0-9.]+)", page.headers["server-timing"]).group(1)), cpu
    finally:
        serve.stop()


def waterfall_bench(db: Path | None, steps: int, runs: int, first_views: int) -> None:
    """The session page's waterfall at a session of `steps` steps (3 spans a step and a root:
    bench/agent_spans.py): the server time of the page's first view (`first_views` times, each
    on a server started for it: the outline of every step assembled), then of each page of
    rows (/session/waterfall, 5,000 rows a page), of the page itself (its outline kept) and of
    one span's panel."""
    import procs
    from tracefix.collector.normalize import normalize_request
    from tracefix.collector.store import Store

    db = db or Path(tempfile.mkdtemp(prefix="tracefix-waterfall-bench-")) / "waterfall.duckdb"
    if not db.exists():
        started = time.monotonic()
        store = Store(db)
        spans = session_spans(WATERFALL_SESSION, steps, random.Random(7), growing=False, window=6)
        for first in range(0, len(spans), 3000):
            store.ingest(normalize_request(request(spans[first:first + 3000])))
        store.checkpoint()
        store.close()
        print(f"built {db} ({len(spans)} spans) in {time.monotonic() - started:.0f} s", flush=True)
    store = Store(db)
    if store.session_outline(WARMUP_SESSION) is None:  # a store built before there was one
        store.ingest(normalize_request(request(session_spans(WARMUP_SESSION, 3, random.Random(8)))))
        store.checkpoint()
    store.close()
    sid = quote(WATERFALL_SESSION, safe="")
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    views = [first_view(db, sid) for _ in range(first_views)]
    server_ms, cpu = statistics.median(v[0] for v in views), statistics.median(v[1] for v in views)
    print(f"\n{'page':38} {'server ms':>9} {'p90':>6} {'CPU ms':>8}  target\n"
          f"{'session page, first view':38} {server_ms:9.1f} {p90([v[0] for v in views]):6.0f} {cpu:8.1f}  "
          f"{'ok' if server_ms <= TARGET_MS else 'MISSED'} (<= {TARGET_MS}; median of {first_views} servers, "
          f"each CPU ms: {' '.join(f'{v[1]:.0f}' for v in views)})", flush=True)
    worst = server_ms
    serve = procs.start_serve(db, "--diagnose", "off", timeout=300)
    try:
        pid = serve.popen.pid
        with httpx.Client(base_url=serve.match["http"], timeout=120) as client:
            first = client.get(f"/session/waterfall?id={sid}").json()
            total = first["page"]["total"]
            per_page = first["page"]["limit"]
            middle = first["rows"][len(first["rows"]) // 2][0]
            pages = [(f"waterfall rows {o}-{min(o + per_page, total) - 1}", f"/session/waterfall?id={sid}&offset={o}")
                     for o in range(0, total, per_page)]
            # the page's outline is kept once read (timed() reads each page once before timing it)
            pages += [(f"session page, {steps} steps, outline kept", f"/session?id={sid}"),
                      ("one span's panel", f"/session/span?id={sid}&span={middle}")]
            print(f"({total} spans in the session)")
            for name, path in pages:
                server, _, cpu = timed(client, path, runs, pid)
                med = statistics.median(server)
                worst = max(worst, med)
                print(f"{name:38} {med:9.1f} {p90(server):6.0f} {cpu:8.1f}  "
                      f"{'ok' if med <= TARGET_MS else 'MISSED'} (<= {TARGET_MS})", flush=True)
        print(f"\nslowest median: {worst:.1f} ms server time (target <= {TARGET_MS} ms); "
              f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        serve.stop()


def dashboard_bench(db: Path, runs: int) -> None:
    """Each dashboard chart's server time on the store `build` made (`--sessions` sessions over
    that many seconds: the whole range is 24 intervals of about an hour at 100k), per service,
    model, agent and tool: `GET /api/v1/dashboard/{chart}` (one DuckDB query per chart; its
    wall time on loopback, the server's CPU time per request), and the `/dashboard` page that
    draws all eight (its Server-Timing)."""
    import procs
    from tracefix.collector.charts import CHARTS, GROUPINGS

    serve = procs.start_serve(db, "--diagnose", "off", timeout=300)
    try:
        pid = serve.popen.pid
        print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
        print(f"\n{'chart':18} {'by':8} {'wall ms':>8} {'p90':>6} {'CPU ms':>7}  target")
        worst = 0.0
        with httpx.Client(base_url=serve.match["http"], timeout=120) as client:
            for name in CHARTS:
                for by in GROUPINGS:
                    _, wall, cpu = timed(client, f"/api/v1/dashboard/{name}?by={by}", runs, pid)
                    med = statistics.median(wall)
                    worst = max(worst, med)
                    print(f"{name:18} {by:8} {med:8.1f} {p90(wall):6.0f} {cpu:7.1f}  "
                          f"{'ok' if med <= TARGET_MS else 'MISSED'} (<= {TARGET_MS})", flush=True)
            for by in GROUPINGS:
                server, _, cpu = timed(client, f"/dashboard?by={by}", runs, pid)
                print(f"{'/dashboard page':18} {by:8} {statistics.median(server):8.1f} {p90(server):6.0f} {cpu:7.1f}  "
                      f"(all {len(CHARTS)} charts, server time)", flush=True)
        print(f"\nslowest chart median: {worst:.1f} ms (target <= {TARGET_MS} ms per chart); "
              f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        serve.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--thumbs-down", type=int, default=20_000, help="negative feedbacks: as many alerts and jobs")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--db", type=Path, default=None, help="store to build once and reuse")
    ap.add_argument("--waterfall", action="store_true",
                    help="time the session page's waterfall at one session of --waterfall-steps steps instead")
    ap.add_argument("--waterfall-steps", type=int, default=10_000)
    ap.add_argument("--first-views", type=int, default=5, help="with --waterfall: servers started to time a first view")
    ap.add_argument("--dashboard", action="store_true",
                    help="time the dashboard's charts (per chart and grouping) on the --sessions store instead")
    args = ap.parse_args()
    if args.waterfall:
        waterfall_bench(args.db, args.waterfall_steps, args.runs, args.first_views)
        return
    db = args.db or Path(tempfile.mkdtemp(prefix="tracefix-ui-bench-")) / "ui.duckdb"
    if not db.exists():
        print(f"building {args.sessions} sessions + one of {args.steps} steps, {args.thumbs_down} thumbs-downs ...",
              flush=True)
        build(db, args.sessions, args.steps, args.thumbs_down)
    if args.dashboard:
        dashboard_bench(db, args.runs)
        return

    import procs

    serve = procs.start_serve(db, "--diagnose", "off", timeout=300)
    try:
        base = serve.match["http"]
        sid = quote(LONG_SESSION, safe="")
        pages = [
            ("sessions, newest first", "/", "/api/v1/sessions?limit=50"),
            ("sessions, page 200", "/?offset=10000", "/api/v1/sessions?limit=50&offset=10000"),
            ("sessions by tokens", "/?sort=tokens", None),
            ("sessions by steps, ascending", "/?sort=steps&dir=asc", None),
            # the sorts and filters whose values no sessions column holds (ui.session_list)
            ("sessions by task", "/?sort=task&dir=asc", "/api/v1/sessions?limit=50&sort=task&order=asc"),
            ("sessions by model", "/?sort=model", None),
            ("sessions by diagnosis state", "/?sort=diagnosis", None),
            ("sessions, task words", "/?task=transfer", "/api/v1/sessions?limit=50&task=transfer"),
            ("sessions, cost range", "/?min_cost=0&max_cost=1", None),
            ("sessions, text search", "/?q=bench-0999", None),
            ("sessions, thumbs-down", "/?feedback=negative", "/api/v1/sessions?limit=50&feedback=negative"),
            (f"session of {args.steps} steps", f"/session?id={sid}", f"/api/v1/sessions/{sid}?limit=100"),
            (f"session of {args.steps} steps, step 500", f"/session?id={sid}&step=500",
             f"/api/v1/sessions/{sid}/steps/500"),
            ("span tree, first 50 spans", f"/session/spans?id={sid}", f"/api/v1/sessions/{sid}/spans?limit=50"),
            # the jobs and alerts pages show the newest 200 (ui.pages.LISTED); a jobs page's
            # live poll asks the API for the unfinished jobs it shows, by id
            ("jobs, newest first", "/jobs", "/api/v1/jobs?order=newest&limit=200"),
            ("jobs, queued", "/jobs?state=queued", "/api/v1/jobs?state=queued&order=newest&limit=200"),
            ("alerts, newest first", "/alerts", "/api/v1/alerts?order=newest&limit=200"),
        ]
        pid = serve.popen.pid
        print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores "
              "(server time is wall time: a loaded machine inflates it; server CPU per page is not)")
        print(f"\n{'page':38} {'UI server ms':>18} {'UI CPU ms':>10} {'API CPU ms':>11} {'UI/API CPU':>11}  target")
        worst = 0.0
        with httpx.Client(base_url=base, timeout=120) as client:
            for name, ui_path, api_path in pages:
                server, _, cpu = timed(client, ui_path, args.runs, pid)
                med = statistics.median(server)
                worst = max(worst, med)
                api_cpu = timed(client, api_path, args.runs, pid)[2] if api_path else None
                ratio = f"{cpu / api_cpu:11.2f}" if api_cpu else f"{'-':>11}"
                api_text = f"{api_cpu:11.1f}" if api_cpu is not None else f"{'-':>11}"
                print(f"{name:38} {med:7.1f} (p90 {p90(server):5.0f}) {cpu:10.1f} {api_text} {ratio}  "
                      f"{'ok' if med <= TARGET_MS else 'MISSED'} (<= {TARGET_MS})", flush=True)
        print(f"\nslowest UI page median: {worst:.1f} ms server time (target <= {TARGET_MS} ms); "
              f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        serve.stop()


if __name__ == "__main__":
    main()
