"""Sustained OTLP/HTTP protobuf ingest into `tracefix serve`, against a bare DuckDB Arrow
insert loop on the same rows, measured in one run.

    .venv/bin/python bench/ingest.py [--exporters 6] [--sessions 12] [--steps 100] [--protocol http,grpc]
    .venv/bin/python bench/ingest.py --protocol http,grpc --no-spill --profile   # + where the CPU goes
    .venv/bin/python bench/ingest.py --store ducklake [--collectors 1,2,4] [--repeat 3] [--parts 4]

Several exporter processes post realistic agent spans (chat spans carry 1-4 KB of messages)
as protobuf, each request acknowledged only after commit; a 429 (gRPC: RESOURCE_EXHAUSTED)
is retried after a short wait. Printed: spans/s acknowledged (and verified stored after shutdown), the
server's CPU a span over its whole life (start to exit: work moved past the timed window counts), spans/s of
the bare loop (Arrow tables of the same normalized rows inserted into a table without
indexes), and their ratio. Targets: >= 20,000 spans/s and >= 50% of the bare loop. Then the
same load against a small writer queue (`--spill-queue-spans`), so that most requests go
through the durable spool (fsynced, drained later): its spans/s until the last span is
committed, and its ratio to the run that does not spill. With several protocols
(`--protocol http,grpc`) each run serves each in turn beside one bare loop, and gRPC's
ratio to HTTP comes from the same runs. `--profile` samples the server with py-spy during
the served runs and prints each stage's share of its CPU (bench/ingest_profile.py).

With `--store ducklake` it starts a private PostgreSQL (tests/pgcluster.py) and compares,
run by run, the embedded store (one collector, one DuckDB file) with DuckLake served by 1,
2 and 4 collectors (exporters split between them), each on a new lake: spans/s, spans per
CPU-second of collectors and PostgreSQL together, the ratio to the embedded store, and the
share of the wall time each collector held and waited for the lake's locks; the same with
every write under the lake-wide lock (TRACEFIX_LAKE_LOCKS=lake, as before the locks of
sessions and traces) beside it.
"""
from __future__ import annotations

import argparse
import http.client
import multiprocessing as mp
import os
import random
import resource
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import ingest_profile  # noqa: E402
from agent_spans import request, session_spans  # noqa: E402

DB_THREADS = 1  # both sides run DuckDB with the collector's default worker threads
PARTS = 1  # requests per session (--parts): its later ones merge into a stored session


def build_bodies(worker: int, sessions: int, steps: int) -> list[tuple[bytes, int]]:
    rng = random.Random(worker)
    bodies = []
    for i in range(sessions):
        spans = session_spans(f"bench-{worker}-{i}-{os.urandom(4).hex()}", steps, rng, growing=False, window=4)
        size = -(-len(spans) // PARTS)
        for part in (spans[k:k + size] for k in range(0, len(spans), size)):
            bodies.append((request(part).SerializeToString(), len(part)))
    return bodies


def http_sender(url: str):
    """send(body) -> seconds to wait before a retry (None: acknowledged) over OTLP/HTTP."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)

    def send(body: bytes) -> float | None:
        conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        resp = conn.getresponse()
        resp.read()
        if resp.status == 200:
            return None
        if resp.status in (429, 503):
            return float(resp.getheader("Retry-After", "0.1")) / 10  # stay busy: short waits
        raise RuntimeError(f"export failed: HTTP {resp.status}")
    return send


def grpc_sender(target: str):
    """The same over OTLP/gRPC; the body goes out as the serialized request it already is."""
    import grpc  # imported in the exporter process, after the fork

    channel = grpc.insecure_channel(target, options=[("grpc.max_send_message_length", 64 << 20)])
    export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                 request_serializer=None, response_deserializer=None)

    def send(body: bytes) -> float | None:
        try:
            export(body, timeout=120)
            return None
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE):
                return 0.01
            raise
    return send


def exporter(worker: int, protocol: str, address: str, sessions: int, steps: int, ready, go, results) -> None:
    bodies = build_bodies(worker, sessions, steps)
    send = http_sender(address) if protocol == "http" else grpc_sender(address)
    ready.put(worker)
    go.wait()
    acked = retries = 0
    for body, n in bodies:
        while (wait := send(body)) is not None:
            retries += 1
            time.sleep(wait)
        acked += n
    results.put((worker, acked, retries, time.perf_counter()))


def cpu_seconds(pid: int) -> float:
    """User + system CPU so far of a process and all its descendants alive now (the server's
    decode workers count as server time); a shared machine's load does not inflate it."""
    return sum(ingest_profile.cpu_of(Path(f"/proc/{p}/stat")) for p in ingest_profile.tree(pid))


def health(serve) -> dict:
    import json
    import urllib.request

    with urllib.request.urlopen(serve.match["http"] + "/healthz", timeout=10) as r:
        return json.loads(r.read())


def run_served(protocol: str, exporters: int, sessions: int, steps: int, max_queue_spans: int = 200_000,
               lake: tuple[str, str] | None = None, collectors: int = 1,
               pg_pid: int | None = None, profiles: list | None = None,
               locks: list | None = None) -> tuple[float, int, int, int, float, int]:
    """(spans/s committed, acknowledged, stored, retries, spans per server CPU-second, requests
    spooled). The clock stops when the last span is committed, not when it is acknowledged:
    a spooled span is acknowledged before it is written. With `lake` = (location, data path)
    the store is that DuckLake, served by `collectors` collectors (exporters round robin),
    and PostgreSQL's CPU (`pg_pid`: its postmaster) counts as server CPU too. With `profiles`
    (a list) a py-spy profile of the server's stages during the run is appended to it, with
    the run's server CPU-seconds and each thread's. With `locks` (a list; on a lake) each
    collector's share of the run's wall time holding and waiting for the lake's locks is
    appended to it (`lock_shares`)."""
    import procs
    from tracefix.collector.store import Store

    tmp = Path(tempfile.mkdtemp(prefix="tracefix-bench-"))
    where = ("--store", lake[0], "--data-path", lake[1]) if lake else ()
    # a DuckDB file (and spool) of its own per collector; on a lake only the spool uses it
    serves = [procs.start_serve(tmp / f"ingest-{i}.duckdb", *where, "--diagnose", "off", "--max-queue-spans",
                                str(max_queue_spans), "--db-threads", str(DB_THREADS)) for i in range(collectors)]
    ctx = mp.get_context("fork")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    addresses = [s.match["http"] if protocol == "http" else s.match["grpc"] for s in serves]
    procs_ = [ctx.Process(target=exporter, args=(w, protocol, addresses[w % collectors], sessions, steps, ready, go,
                                                 results))
              for w in range(exporters)]
    for p in procs_:
        p.start()
    for _ in procs_:
        ready.get(timeout=600)
    pids = [s.popen.pid for s in serves] + ([pg_pid] if pg_pid else [])
    profile = ingest_profile.Profile(serves[0].popen.pid) if profiles is not None else None
    threads0 = ingest_profile.thread_cpu(serves[0].popen.pid) if profiles is not None else None
    locks0 = [lock_seconds(s) for s in serves] if locks is not None else []
    cpu0 = sum(cpu_seconds(pid) for pid in pids)
    t0 = time.perf_counter()
    go.set()
    done = [results.get(timeout=600) for _ in procs_]
    waited = False
    for serve in serves:
        while (h := health(serve))["spooled_requests"] or h["pending_spans"]:  # acknowledged, not yet written
            waited = True
            time.sleep(0.01)
    elapsed = (time.perf_counter() if waited else max(d[3] for d in done)) - t0
    cpu = sum(cpu_seconds(pid) for pid in pids) - cpu0
    if locks is not None:
        locks.append([{k: (v - before[k]) / (1 if k == "conflicts" else elapsed) for k, v in lock_seconds(s).items()}
                      for s, before in zip(serves, locks0)])
    if profile is not None and profiles is not None and threads0 is not None:
        threads = ingest_profile.thread_cpu(serves[0].popen.pid)
        threads.subtract(threads0)
        profiles.append((profile.stop(), cpu, +threads))  # unary +: the threads that ran
    spooled = 0.0
    for serve in serves:
        h = health(serve)
        spooled += (n := metric(serve, "tracefix_spooled_requests_total"))
        print(f"  writer: {h['committed_spans']} spans in {h['transactions']} transactions; "
              f"{n:.0f} requests went through the spool")
    for p in procs_:
        p.join()
    acked = sum(d[1] for d in done)
    retries = sum(d[2] for d in done)
    life0 = children_cpu()
    for serve in serves:
        assert serve.stop() == 0, serve.output()
    # the servers' CPU from start to exit, the checkpoint at stop included: work a change only
    # moved past the timed window shows here (start-up counts too, alike for every revision)
    print(f"  servers' whole lives: {1e6 * (children_cpu() - life0) / acked:.1f} us of CPU a span")
    store = Store(lake[0] if lake else tmp / "ingest-0.duckdb")
    stored = store.stats()["spans"]
    store.close()
    return acked / elapsed, acked, stored if stored else 0, retries, acked / cpu, int(spooled)


def children_cpu() -> float:
    """User + system CPU of this process's children that have exited and been waited for
    (a server's decode workers too, once it waited for them)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def metric(serve, name: str, **labels: str) -> float:
    """A sample's value summed over its labels (those given: only samples with them), from
    the collector's /metrics."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(serve.match["http"] + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def lock_seconds(serve) -> dict[str, float]:
    """A lake collector's seconds so far holding the lake-wide lock, holding the locks of
    its sessions, traces and queues, and waiting for either (tracefix_lake_lock_seconds)."""
    name = "tracefix_lake_lock_seconds_total"
    return {"lake-wide held": metric(serve, name, lock="lake", state="held"),
            "keys held": metric(serve, name, lock="keys", state="held"),
            "waited": metric(serve, name, lock="any", state="waited"),
            "conflicts": metric(serve, "tracefix_lake_conflicts_total")}


def compare_lake(args) -> None:
    """The embedded store against DuckLake on a private PostgreSQL with 1, 2, ... collectors,
    each run on a new lake; medians and ratios to the embedded store."""
    from pgcluster import PostgresCluster

    counts = [int(c) for c in args.collectors.split(",")]
    rates: dict[str, list[float]] = {"embedded": [], **{f"lake x{c}": [] for c in counts}}
    cpus: dict[str, list[float]] = {k: [] for k in rates}
    for c in counts:  # the baseline: every write under the lake-wide lock (TRACEFIX_LAKE_LOCKS=lake)
        rates[f"lake x{c} lake-wide"] = []
        cpus[f"lake x{c} lake-wide"] = []
    locks: dict[str, list] = {k: [] for k in rates}  # per run: each collector's shares of the wall time
    with PostgresCluster() as pg:
        pg_pid = int((pg.dir / "data" / "postmaster.pid").read_text().split()[0])
        for i in range(args.repeat):
            runs = [("embedded", None, 1)]
            for c in counts:
                # each side first in every other run, so that whatever the order costs (a new
                # database, the page cache) lands on both alike
                pair = (f"lake x{c}", f"lake x{c} lake-wide")
                for label in pair if i % 2 == 0 else pair[::-1]:
                    name = f"lake_{i}_{c}_{os.urandom(3).hex()}"
                    runs.append((label, ("ducklake:postgres:" + pg.create_database(name),
                                         tempfile.mkdtemp(prefix="tracefix-bench-lake-")), c))
            for label, lake, c in runs:
                os.environ["TRACEFIX_LAKE_LOCKS"] = "lake" if label.endswith("lake-wide") else "keys"
                rate, acked, stored, retries, per_cpu, _ = run_served(
                    args.protocol, args.exporters, args.sessions, args.steps, lake=lake, collectors=c,
                    pg_pid=pg_pid if lake else None, locks=locks[label] if lake else None)
                if stored != acked:
                    raise SystemExit(f"{label}: stored {stored} spans but acknowledged {acked}")
                rates[label].append(rate)
                cpus[label].append(per_cpu)
                print(f"run {i + 1} {label}: {rate:,.0f} spans/s ({acked} acknowledged and stored once, {retries} "
                      f"retries), {per_cpu:,.0f} spans per CPU-second (collectors + PostgreSQL)")
                if lake:
                    print("  " + lock_shares(locks[label][-1]))
    base = statistics.median(rates["embedded"])
    print(f"medians over {args.repeat} runs, {args.exporters} exporters, OTLP/{args.protocol}:")
    for label in rates:
        r = statistics.median(rates[label])
        print(f"  {label:<20} {r:>9,.0f} spans/s  {statistics.median(cpus[label]):>9,.0f} spans/CPU-s  "
              f"ratio to embedded {r / base:.2f}")
        if locks[label]:  # each collector's median over the runs
            medians = [{k: statistics.median(run[i][k] for run in locks[label]) for k in first}
                       for i, first in enumerate(locks[label][0])]
            print(" " * 23 + lock_shares(medians))
    print("(goal: each collector holds the lake-wide lock <= 10% of the wall time; the locks of its "
          "sessions and traces, which traces routed to one collector never contend for, are apart)")
    print(f"(load average now {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores)")


def lock_shares(collectors: list[dict[str, float]]) -> str:
    """One line: each collector's shares of the wall time holding and waiting for the lake's locks."""
    def pct(key: str) -> str:
        return "/".join(f"{c[key]:.1%}" for c in collectors)
    return (f"per collector, share of wall time: lake-wide lock held {pct('lake-wide held')}, "
            f"trace/session locks held {pct('keys held')}, waiting for a lock {pct('waited')}; "
            f"transactions DuckLake refused and ran again {sum(c['conflicts'] for c in collectors):.0f}")


def run_bare(exporters: int, sessions: int, steps: int) -> tuple[float, float]:
    """The same rows (normalized outside the timing) inserted as Arrow tables into DuckDB."""
    import duckdb
    import pyarrow as pa
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from tracefix.collector.normalize import normalize_request
    from tracefix.collector.normalize import SPAN_COLUMNS, spans_table

    batches = []
    for w in range(exporters):
        for body, _ in build_bodies(w, sessions, steps):
            batches.append(normalize_request(ExportTraceServiceRequest.FromString(body)))
    rows = [b.spans for b in batches]  # dict rows (normalize_request builds only Arrow tables), before the clock
    tmp = Path(tempfile.mkdtemp(prefix="tracefix-bench-bare-"))
    con = duckdb.connect(str(tmp / "bare.duckdb"), config={"threads": DB_THREADS})  # as `tracefix serve`
    sql_types = {pa.string(): "VARCHAR", pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.bool_(): "BOOLEAN",
                 pa.float64(): "DOUBLE", pa.list_(pa.int64()): "BIGINT[]"}
    con.execute("CREATE TABLE spans (" + ", ".join(f"{n} {sql_types[t]}" for n, t in SPAN_COLUMNS) + ")")
    con.execute("CREATE TABLE messages (key BIGINT, sha256 VARCHAR, message VARCHAR)")
    n = 0
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for b, b_rows in zip(batches, rows):
        tbl = spans_table(b_rows)
        keys = list(b.messages)
        msgs = pa.table({"key": pa.array(keys, pa.int64()), "sha256": [b.messages[k][0] for k in keys],
                         "message": [b.messages[k][1] for k in keys]})
        con.execute("INSERT INTO spans SELECT * FROM tbl")
        con.execute("INSERT INTO messages SELECT * FROM msgs")
        n += len(b_rows)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    con.close()
    return n / elapsed, n / cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exporters", type=int, default=6)
    ap.add_argument("--protocol", default="http",
                    help="http (OTLP/HTTP protobuf), grpc (OTLP/gRPC), or both in each run: http,grpc")
    ap.add_argument("--sessions", type=int, default=12, help="sessions (one request each) per exporter")
    ap.add_argument("--steps", type=int, default=100, help="steps per session (3 spans each)")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each side; medians are compared")
    ap.add_argument("--db-threads", type=int, default=1, help="DuckDB worker threads on both sides")
    ap.add_argument("--spill-queue-spans", type=int, default=300,
                    help="--max-queue-spans of the spilling run (one request of the default size): the "
                         "other exporters' requests go through the disk spool")
    ap.add_argument("--no-spill", action="store_true", help="leave out the spilling runs")
    ap.add_argument("--profile", action="store_true",
                    help="sample the server with py-spy during the served runs; print each stage's CPU share")
    ap.add_argument("--store", choices=("duckdb", "ducklake"), default="duckdb",
                    help="ducklake: compare the embedded store with DuckLake on a private PostgreSQL")
    ap.add_argument("--collectors", default="1,2,4", help="--store ducklake: collector counts to run, e.g. 1,2,4")
    ap.add_argument("--parts", type=int, default=1,
                    help="requests per session, sent in order by one exporter: all but the first merge into "
                         "a stored session (on a lake: updates, which DuckLake's conflict check sees)")
    args = ap.parse_args()
    global DB_THREADS, PARTS
    DB_THREADS, PARTS = args.db_threads, args.parts
    if not set(args.protocol.split(",")) <= {"http", "grpc"}:
        ap.error(f"--protocol: http, grpc or http,grpc, not {args.protocol!r}")
    if args.store == "ducklake":
        args.protocol = args.protocol.split(",")[0]
        compare_lake(args)
        return
    protocols = args.protocol.split(",")
    rates: dict[str, list[float]] = {p: [] for p in protocols}
    cpus: dict[str, list[float]] = {p: [] for p in protocols}
    profiles: dict[str, list] = {p: [] for p in protocols}
    spills: dict[str, list] = {p: [] for p in protocols}  # (wall, CPU) ratios spilling / not spilling
    bare, bare_cpu = [], []
    for i in range(args.repeat):
        for protocol in protocols:
            rate, per_cpu = served_and_spilled(args, protocol, i, profiles[protocol] if args.profile else None,
                                               spills[protocol])
            rates[protocol].append(rate)
            cpus[protocol].append(per_cpu)
        b_rate, b_cpu = run_bare(args.exporters, args.sessions, args.steps)
        bare.append(b_rate)
        bare_cpu.append(b_cpu)
        print(f"run {i + 1}: bare DuckDB Arrow inserts {b_rate:,.0f} spans/s ({b_cpu:,.0f} per CPU-second); "
              + ", ".join(f"{p} served/bare {rates[p][-1] / b_rate:.2f} wall, {cpus[p][-1] / b_cpu:.2f} per CPU-s"
                          for p in protocols))
    b, bc = statistics.median(bare), statistics.median(bare_cpu)
    print(f"medians of {args.repeat} runs, {args.exporters} exporters, {args.sessions} requests of "
          f"{args.steps * 3} spans each; bare DuckDB Arrow insert loop, same rows: {b:,.0f} spans/s, "
          f"{bc:,.0f} spans per CPU-second")
    for p in protocols:
        s, sc_ = statistics.median(rates[p]), statistics.median(cpus[p])
        wire = "OTLP/HTTP protobuf" if p == "http" else "OTLP/gRPC"
        pairs = statistics.median(x / y for x, y in zip(rates[p], bare))
        pairs_cpu = statistics.median(x / y for x, y in zip(cpus[p], bare_cpu))
        print(f"  tracefix serve, {wire}: {s:,.0f} spans/s, {sc_:,.0f} spans per server CPU-second; ratio to the "
              f"bare loop {s / b:.2f} wall (runs' own {pairs:.2f}), {sc_ / bc:.2f} per CPU-second (runs' own "
              f"{pairs_cpu:.2f})   targets: >= 20,000 spans/s, >= 0.50 per CPU-second")
        if spills[p]:
            print(f"  spilling through the spool (--max-queue-spans {args.spill_queue_spans}), {wire}: ratio to not "
                  f"spilling {statistics.median(w for w, _ in spills[p]):.2f} wall, "
                  f"{statistics.median(c for _, c in spills[p]):.2f} per CPU-second (medians of the runs' own)")
    if "http" in protocols and "grpc" in protocols:
        g = statistics.median(x / y for x, y in zip(rates["grpc"], rates["http"]))
        gc = statistics.median(x / y for x, y in zip(cpus["grpc"], cpus["http"]))
        print(f"  gRPC / HTTP, runs' own ratios: {g:.2f} wall, {gc:.2f} per CPU-second   target: >= 0.90")
    if args.profile:
        print("where the server's CPU went (py-spy, all runs together):")
        for p in protocols:
            ingest_profile.report(p, ingest_profile.merged([c for c, _, _ in profiles[p]]),
                                  sum(cpu for _, cpu, _ in profiles[p]))
            ingest_profile.report_threads(p, ingest_profile.merged([t for _, _, t in profiles[p]]))
    print(f"(load average now {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores)")


def served_and_spilled(args, protocol: str, i: int, profiles: list | None, spills: list) -> tuple[float, float]:
    """One served run of `protocol` (and, unless --no-spill, one that spills: its ratios to the
    served run appended to `spills`); the served run's spans/s and spans per server CPU-second."""
    rate, acked, stored, retries, per_cpu, _ = run_served(protocol, args.exporters, args.sessions, args.steps,
                                                          profiles=profiles)
    if stored != acked:
        raise SystemExit(f"{protocol}: stored {stored} spans but acknowledged {acked}")
    print(f"run {i + 1} {protocol}: served {rate:,.0f} spans/s ({acked} acknowledged and stored, {retries} retries "
          f"after back-pressure), {per_cpu:,.0f} spans per server CPU-second")
    if not args.no_spill:
        s_rate, s_acked, s_stored, _, s_cpu, s_spooled = run_served(protocol, args.exporters, args.sessions,
                                                                     args.steps, args.spill_queue_spans)
        if s_stored != s_acked:
            raise SystemExit(f"{protocol} spilling: stored {s_stored} spans but acknowledged {s_acked}")
        print(f"run {i + 1} {protocol}: spilling (--max-queue-spans {args.spill_queue_spans}) {s_rate:,.0f} spans/s, "
              f"{s_spooled} requests through the spool, {s_cpu:,.0f} spans per server CPU-second; ratio to not "
              f"spilling {s_rate / rate:.2f} wall, {s_cpu / per_cpu:.2f} CPU")
        spills.append((s_rate / rate, s_cpu / per_cpu))
    return rate, per_cpu

if __name__ == "__main__":
    main()
