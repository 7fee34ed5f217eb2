"""Several collectors on one DuckLake (catalog: a real PostgreSQL, started here) stay exact.

Three `tracefix serve --store ducklake:postgres:...` ingest the same sessions at once over
OTLP/HTTP and OTLP/gRPC, each session's spans split across all three, while one collector
is killed with -9 and started again; exports that fail go to the next collector, and some
acknowledged exports are sent again elsewhere (a retry after a lost answer). Then every
acknowledged span is stored exactly once, each split session reads back whole with its
steps numbered once, a thumbs-down sent to all three collectors raises one alert delivered
once, two
workers claiming through different collectors never get the same job, and the job of a
dead worker or a dead collector is queued again. Span transactions of other sessions run
beside an open one, and two collectors writing one session at once merge it exactly."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
import urllib.request
import uuid

import grpc
import procs
import pytest
from collector_support import TOKEN, WebhookReceiver
from pgcluster import PostgresCluster, pg_bin_dir
from test_partial_success import export, make_request, make_span

pytestmark = pytest.mark.skipif(pg_bin_dir() is None, reason="PostgreSQL binaries not found (make pg installs them)")

SESSIONS, PARTS, PER_PART = 9, 3, 4  # each session: 12 LLM spans in 3 exports, one per collector
RACED_TRACES = 10  # without their trace's lock all of them are left split
SYSTEM = {"role": "system", "content": "You are a careful assistant. " * 20}  # one stored message, many writers


@pytest.fixture(scope="module")
def postgres():
    pytest.importorskip("duckdb_extension_ducklake")
    pytest.importorskip("psycopg")
    with PostgresCluster() as pg:
        yield pg


@pytest.fixture
def lake(postgres, tmp_path):
    """A new lake: (store location, data path)."""
    conninfo = postgres.create_database(f"lake_{uuid.uuid4().hex[:8]}")
    return "ducklake:postgres:" + conninfo, str(tmp_path / "lake-files")


def _serve(lake, tmp_path, *extra: str, name: str = "c0"):
    """A collector on the lake; `name` picks its local spool (`<name>.duckdb.spool`): a restart
    with the same name replays what the killed process acknowledged but had not written."""
    location, data_path = lake
    return procs.start_serve(tmp_path / f"{name}.duckdb", "--store", location, "--data-path", data_path,
                             "--token", TOKEN, "--diagnose", "off", *extra, env={"TRACEFIX_TOKEN": ""})


def _session_exports(sid: str) -> list:
    trace = uuid.uuid4().bytes
    spans = [make_span(trace, n, "chat lake-agent", {
        "gen_ai.operation.name": "chat", "tracefix.session.id": sid, "tracefix.step": n,
        "gen_ai.input.messages": json.dumps([SYSTEM, {"role": "user", "content": f"{sid} q{n}"}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": f"{sid} a{n}"}])})
        for n in range(PARTS * PER_PART)]
    return [make_request(spans[p * PER_PART:(p + 1) * PER_PART], service="lake-app") for p in range(PARTS)]


def _acked(status) -> bool:
    return status in (200, grpc.StatusCode.OK)


def test_three_collectors_on_one_lake_store_every_acknowledged_span_once(lake, tmp_path):
    from tracefix.collector.access import HttpAccess
    from tracefix.collector.store import Store

    webhook = WebhookReceiver()  # every collector delivers alerts to it
    collectors: list = [None] * 3
    starters = [threading.Thread(target=lambda i=i: collectors.__setitem__(i, _serve(lake, tmp_path, "--webhook",
                                                                                     webhook.url, name=f"c{i}")))
                for i in range(3)]
    for t in starters:  # three first opens of one lake at once: one of them creates the schema
        t.start()
    for t in starters:
        t.join()
    assert all(collectors), "a collector did not start"
    ring = threading.Lock()
    sessions = [f"lake-{i:02d}-{uuid.uuid4().hex[:6]}" for i in range(SESSIONS)]
    work = [(sid, part, req) for sid in sessions for part, req in enumerate(_session_exports(sid))]
    acked: list[tuple[str, int]] = []
    resent = 0
    failures: list = []

    def send(slot: int, items: list) -> None:
        nonlocal resent
        for k, (sid, part, req) in enumerate(items):
            target = (slot + part) % 3  # a session's three parts go to three collectors
            for attempt in range(60):  # what a load balancer does when a backend is gone: the next one
                via = "grpc" if (k + attempt) % 2 else "protobuf"
                with ring:
                    proc = collectors[(target + attempt) % 3]
                try:
                    status, answer = export(proc, req, via)
                except OSError as exc:
                    status, answer = None, exc
                if _acked(status):
                    acked.append((sid, part))
                    if k % 3 == 0:  # the answer was "lost": the exporter sends it again, elsewhere
                        with ring:
                            other = collectors[(target + attempt + 1) % 3]
                        try:
                            if _acked(export(other, req, "protobuf")[0]):
                                resent += 1
                        except OSError:
                            pass
                    break
                failures.append((status, str(answer)[:200]))
                time.sleep(0.1)

    # six exporters: requests that meet in a collector's queue share a transaction, as under load
    senders = [threading.Thread(target=send, args=(slot, work[slot::6])) for slot in range(6)]
    for t in senders:
        t.start()
    deadline = time.monotonic() + 30
    while len(acked) < len(work) // 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    victim = collectors[2]
    victim.popen.send_signal(signal.SIGKILL)  # mid-flood: its answered exports must be in the lake
    victim.popen.wait()
    with ring:
        collectors[2] = collectors[0]  # the balancer routes around it until it is back
    restarted = _serve(lake, tmp_path, "--webhook", webhook.url, name="c2")
    with ring:
        collectors[2] = restarted
    for t in senders:
        t.join()
    try:
        assert sorted(acked) == sorted((sid, part) for sid, part, _ in work), failures[:5]
        assert resent > 0

        for proc in collectors:  # an export may be acknowledged from a collector's spool before it is written
            deadline = time.monotonic() + 60
            while (h := json.loads(urllib.request.urlopen(proc.match["http"] + "/healthz", timeout=10).read())) \
                    and (h.get("spooled_requests") or h["pending_spans"]) and time.monotonic() < deadline:
                time.sleep(0.1)
        # maintenance beside live collectors: small files merged, old snapshots expired, nothing lost
        compacted = subprocess.run([*procs.TRACEFIX, "store", "compact", "--store", lake[0], "--older-than", "0"],
                                   capture_output=True, text=True, timeout=120)
        assert compacted.returncode == 0, compacted.stderr
        assert json.loads(compacted.stdout)["snapshots_expired"] > 0

        store = Store(lake[0], data_path=lake[1])  # the lake itself, as a fourth reader
        try:
            con = store.cursor()
            dupes = con.execute("SELECT trace_id, span_id, count(*) FROM spans GROUP BY ALL HAVING count(*) > 1").fetchall()
            assert dupes == []
            per_session = dict(con.execute("SELECT session_id, count(*) FROM spans GROUP BY ALL").fetchall())
            assert per_session == {sid: PARTS * PER_PART for sid in sessions}
            assert con.execute("SELECT count(*) - count(DISTINCT session_id) FROM sessions").fetchone()[0] == 0
            assert con.execute("SELECT count(*) - count(DISTINCT key) FROM messages").fetchone()[0] == 0
            assert con.execute("SELECT count(*) - count(DISTINCT (session_id, idx)) FROM steps").fetchone()[0] == 0
        finally:
            store.close()

        # sessions split across collectors read back whole, through any of them
        api = HttpAccess(collectors[1].match["http"], TOKEN)
        for sid in sessions[:4]:
            steps = api.get_session(sid)["steps"]
            assert [s["index"] for s in steps] == list(range(PARTS * PER_PART))
            assert steps[5]["input_messages"][1]["content"] == f"{sid} q5"

        # each collector says how long it held the lake's locks: span transactions held their
        # sessions' and traces' (the lake-wide one: opening the lake, and a session whose parts
        # arrived out of order renumbering its stored steps)
        scrape = urllib.request.urlopen(urllib.request.Request(collectors[1].match["http"] + "/metrics", headers={
            "Authorization": f"Bearer {TOKEN}"}), timeout=10).read().decode()
        held = {lock: float(re.search(rf'tracefix_lake_lock_seconds_total{{lock="{lock}",state="held"}} (\S+)',
                                      scrape).group(1)) for lock in ("lake", "keys")}
        assert held["keys"] > 0 and held["lake"] > 0, held

        # a thumbs-down carried by a span reaches all three collectors at once: one feedback, one alert
        target = sessions[0]
        trace = uuid.uuid4().bytes
        thumbs = make_request([make_span(trace, 0, "feedback", {"tracefix.session.id": target}, events=[
            ("gen_ai.evaluation.result", {"gen_ai.evaluation.score.value": -1.0,
                                          "gen_ai.evaluation.explanation": "wrong account"})])])
        results: list = []
        shots = [threading.Thread(target=lambda p=p, via=via: results.append(export(p, thumbs, via)[0]))
                 for p, via in zip(collectors, ["protobuf", "grpc", "protobuf"])]
        for t in shots:
            t.start()
        for t in shots:
            t.join()
        assert all(_acked(s) for s in results), results
        alerts = api.list_alerts(target)
        assert len(alerts) == 1 and alerts[0]["payload"]["score"] == -1.0
        assert len(api.get_session(target)["feedback"]) == 1
        alert_id = alerts[0]["alert_id"]
        assert webhook.wait_for(lambda body: body.get("alert_id") == alert_id)
        delivered_at = time.monotonic()

        # two workers claiming at once, through two collectors, never share a job
        jobs = {api.enqueue_job(sid, kind="replay")["job_id"] for sid in sessions[:10]}
        claimed: dict[str, list[str]] = {"w1": [], "w2": []}

        def claim(name: str, proc) -> None:
            worker_api = HttpAccess(proc.match["http"], TOKEN)
            while (job := worker_api.claim_job("replay", name, 60)) is not None:
                claimed[name].append(job["job_id"])

        claimers = [threading.Thread(target=claim, args=("w1", collectors[0])),
                    threading.Thread(target=claim, args=("w2", collectors[2]))]
        for t in claimers:
            t.start()
        for t in claimers:
            t.join()
        assert not set(claimed["w1"]) & set(claimed["w2"])
        assert sorted(claimed["w1"] + claimed["w2"]) == sorted(jobs)
        assert claimed["w1"] and claimed["w2"], claimed  # both really competed

        # the alert was delivered once: the collector that claimed the delivery held it while
        # every collector's delivery loop (5 s) looked at the outbox
        time.sleep(max(0.0, delivered_at + 6 - time.monotonic()))
        assert len([r for r in webhook.received if r["json"].get("alert_id") == alert_id]) == 1
    finally:
        webhook.close()
        for proc in collectors:
            assert proc.stop() == 0, proc.output()


def test_dead_workers_and_dead_collectors_jobs_are_queued_again(lake):
    from tracefix.collector.store import Store

    a = Store(lake[0], data_path=lake[1])
    b = Store(lake[0], data_path=lake[1])
    try:
        from tracefix.collector.normalize import Batch

        batch = Batch()
        batch.sessions["requeue-s"] = {"started_ns": 1}
        a.ingest(batch)
        # a worker that stops renewing its lease: the next claim, from another collector, gets the job
        leased = a.enqueue_job("requeue-s", kind="replay")["job_id"]
        assert a.claim_job("replay", "worker-a", lease_s=2)["job_id"] == leased
        expires = time.monotonic() + 2
        assert b.claim_job("replay", "worker-b", lease_s=60) is None
        time.sleep(max(0.0, expires - time.monotonic()) + 0.1)
        again = b.claim_job("replay", "worker-b", lease_s=60)
        assert again["job_id"] == leased and again["worker"] == "worker-b" and again["attempts"] == 2
        assert not a.finish_job(leased, worker="worker-a")  # the late worker's result is refused
        # a diagnosis a collector runs itself (no lease) is its own while it lives
        diag = a.enqueue_job("requeue-s", kind="diagnosis")["job_id"]
        assert a.claim_job("diagnosis")["job_id"] == diag
        assert b.requeue_running_jobs("diagnosis") == 0  # a still runs: its job stays its own
        a.close()
        a = None
        # a's PostgreSQL session is gone: b's next claim of its own kind of job takes a's first
        again = b.claim_job("diagnosis")
        assert again["job_id"] == diag and again["worker"] == b.instance and again["attempts"] == 2
    finally:
        for s in (a, b):
            if s is not None:
                s.close()


def test_a_span_one_collector_stored_under_its_trace_joins_the_session_another_learns(lake):
    """A chat span without a session attribute reaches one collector before its root, which
    names the session, reaches another: the lake ends with one session holding both."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from test_ingest import agent_run_with_sessionless_chat

    from tracefix.collector.normalize import normalize_request
    from tracefix.collector.store import Store

    a = Store(lake[0], data_path=lake[1])
    b = Store(lake[0], data_path=lake[1])
    try:
        sid = f"lake-late-{uuid.uuid4().hex[:6]}"
        root, child = agent_run_with_sessionless_chat(sid)
        a.ingest(normalize_request(encode_spans([child])))
        b.ingest(normalize_request(encode_spans([root])))
        assert sorted(s["name"] for s in a.get_spans(sid)) == ["agent run", "chat m"]
        assert len(a.get_session(sid)["steps"]) == 1
        assert a.get_session(f"{child.context.trace_id:032x}") is None
    finally:
        a.close()
        b.close()


def test_a_child_and_its_root_committed_at_once_by_two_collectors_end_in_one_session(lake):
    """The same, both collectors writing at the same moment. Without a lock on the trace
    both hold each transaction's snapshot misses the other's rows (every trace of this test
    then keeps its chat span under the trace id); with it, the second writer sees the first's."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from test_ingest import agent_run_with_sessionless_chat

    from tracefix.collector.normalize import normalize_request
    from tracefix.collector.store import Store

    a = Store(lake[0], data_path=lake[1])
    b = Store(lake[0], data_path=lake[1])
    try:
        runs = [agent_run_with_sessionless_chat(f"lake-race-{k}-{uuid.uuid4().hex[:6]}") for k in range(RACED_TRACES)]
        for k, (root, child) in enumerate(runs):
            start = threading.Barrier(2)
            errors: list[BaseException] = []

            def write(store, span):
                start.wait()
                try:
                    store.ingest(normalize_request(encode_spans([span])))
                except BaseException as exc:  # surfaced below: a failed write is no race
                    errors.append(exc)

            threads = [threading.Thread(target=write, args=(a, child)), threading.Thread(target=write, args=(b, root))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors, errors
        stray = [k for k, (root, child) in enumerate(runs) if a.get_session(f"{child.context.trace_id:032x}")]
        assert not stray, f"{len(stray)} of {RACED_TRACES} traces left a span under their trace id"
        for root, child in runs:
            sid = root.attributes["session.id"]
            assert sorted(s["name"] for s in a.get_spans(sid)) == ["agent run", "chat m"]
    finally:
        a.close()
        b.close()



def _chats(sid: str, trace: bytes, steps: range):
    """A batch of chat spans of session `sid` (steps numbered by `steps`) in one trace."""
    from tracefix.collector.normalize import normalize_request

    return normalize_request(make_request([make_span(trace, n, "chat lake-agent", {
        "gen_ai.operation.name": "chat", "tracefix.session.id": sid, "tracefix.step": n,
        "gen_ai.input.messages": json.dumps([SYSTEM, {"role": "user", "content": f"{sid} q{n}"}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": f"{sid} a{n}"}])}) for n in steps]))


def test_span_transactions_of_other_sessions_run_beside_an_open_one_and_the_same_session_waits(lake):
    """While one collector's span transaction is open (committed at the end), another
    collector stores the spans of other sessions and traces at once, holding no lake-wide
    lock; spans of the open transaction's session wait for it, then both are merged. With
    every write under one lake-wide lock (TRACEFIX_LAKE_LOCKS=lake, how it was) the other
    session's spans waited too."""
    from tracefix.collector.store import Store

    a = Store(lake[0], data_path=lake[1])
    b = Store(lake[0], data_path=lake[1])
    try:
        sid, other = f"open-{uuid.uuid4().hex[:6]}", f"beside-{uuid.uuid4().hex[:6]}"
        first = _chats(sid, uuid.uuid4().bytes, range(0, 4))
        opened, close = threading.Event(), threading.Event()

        def held_open(con):
            out = a._ingest(con, first, 0.0, [], None)
            opened.set()
            close.wait(30)
            return out

        writer = threading.Thread(target=lambda: a._write_batch(first, held_open))
        writer.start()
        assert opened.wait(30)
        lake_held = b.lock.seconds["lake_held"]
        beside = threading.Thread(target=b.ingest, args=(_chats(other, uuid.uuid4().bytes, range(0, 4)),))
        same = threading.Thread(target=b.ingest, args=(_chats(sid, uuid.uuid4().bytes, range(4, 8)),))
        beside.start()
        beside.join(20)
        stored_beside = not beside.is_alive()
        same.start()
        same.join(1.5)
        waited = same.is_alive()
        close.set()
        writer.join(30)
        beside.join(30)
        same.join(30)
        assert stored_beside, "another session's spans waited for an open span transaction"
        assert waited, "the open transaction's session was written beside it"
        assert b.lock.seconds["lake_held"] == lake_held  # spans take no lake-wide lock
        assert [s["index"] for s in a.get_session(sid)["steps"]] == list(range(8))
        assert len(a.get_session(other)["steps"]) == 4
    finally:
        close.set()
        a.close()
        b.close()


def test_two_collectors_writing_one_session_at_once_merge_it_exactly(lake):
    """Two collectors store parts of one session (each part its own trace) at the same
    moment, round after round: its first parts race to create the row, later ones to merge
    into it and renumber its steps. One row remains, spanning every part, with every span
    once and its steps numbered once; a message both sent first reads back once."""
    from tracefix.collector.store import Store

    a = Store(lake[0], data_path=lake[1])
    b = Store(lake[0], data_path=lake[1])
    rounds, per = 4, 3
    sessions = [f"both-{k}-{uuid.uuid4().hex[:6]}" for k in range(2)]
    try:
        errors: list[BaseException] = []
        for r in range(rounds):
            start = threading.Barrier(2)

            def write(store, half: int) -> None:
                start.wait()
                try:
                    for sid in sessions:
                        first = (2 * r + half) * per
                        store.ingest(_chats(sid, uuid.uuid4().bytes, range(first, first + per)))
                except BaseException as exc:  # surfaced below
                    errors.append(exc)

            threads = [threading.Thread(target=write, args=(store, half)) for half, store in enumerate((a, b))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert not errors, errors
        con = a.cursor()
        total = 2 * rounds * per
        for sid in sessions:
            rows = con.execute("SELECT started_ns, ended_ns FROM sessions WHERE session_id = ?", [sid]).fetchall()
            starts = con.execute("SELECT min(start_ns), max(end_ns), count(*), count(DISTINCT span_id || trace_id) "
                                 "FROM spans WHERE session_id = ?", [sid]).fetchone()
            assert rows == [starts[:2]] and starts[2:] == (total, total)
            # its task: step 0's question, whichever part came first (a lake appends a version of the row)
            assert con.execute("SELECT task FROM sessions WHERE session_id = ?", [sid]).fetchall() == [(f"{sid} q0",)]
            steps = a.get_session(sid)["steps"]
            assert [s["index"] for s in steps] == list(range(total))
            assert [s["input_messages"][1]["content"] for s in steps] == [f"{sid} q{n}" for n in range(total)]
            assert steps[0]["input_messages"][0] == SYSTEM
        assert a.stats()["sessions"] == len(sessions)
        a.compact()  # a message both stored at once (SYSTEM, first round) is kept once
        assert con.execute("SELECT count(*) - count(DISTINCT key) FROM messages").fetchone()[0] == 0
    finally:
        a.close()
        b.close()


def test_later_exports_of_long_sessions_append_beside_each_other_without_the_lake_wide_lock(lake):
    """Two collectors store the later exports of long sessions at the same moment, round
    after round: each its own sessions', and by turns a session both write. A later export
    only appends (a new version of its session's row, the steps after the stored ones), so
    DuckLake refuses none of them and none runs under the lake-wide lock; every session reads
    back exact: each span once, one row spanning its spans with the first export's user and
    the last one's outcome, its steps numbered once. Before, such an export merged into its
    session's row and steps in place (an UPDATE and a DELETE, which DuckLake refuses beside
    the other collector's appends), under the lake-wide lock."""
    from tracefix.collector.store import Store

    a = Store(lake[0], data_path=lake[1])
    b = Store(lake[0], data_path=lake[1])
    rounds, per = 5, 3
    own = {a: [f"own-a{k}-{uuid.uuid4().hex[:6]}" for k in range(2)],
           b: [f"own-b{k}-{uuid.uuid4().hex[:6]}" for k in range(2)]}
    both = f"both-{uuid.uuid4().hex[:6]}"

    def export(store, sid: str, r: int) -> None:
        batch = _chats(sid, uuid.uuid4().bytes, range(r * per, (r + 1) * per))
        if r == 0:
            batch.sessions[sid]["user_id"] = "u-first"
        if r == rounds - 1:
            batch.sessions[sid]["outcome"] = "failure"
        store.ingest(batch)

    try:
        for store in (a, b):  # the first exports create the sessions
            for sid in own[store] + ([both] if store is a else []):
                export(store, sid, 0)
        def locks() -> dict:
            return {name: {"lake-wide lock held s": store.lock.seconds["lake_held"], "refused": store.lock.conflicts,
                           "ran again under it": store.lock.escalated} for name, store in (("a", a), ("b", b))}

        before = locks()
        errors: list[BaseException] = []
        for r in range(1, rounds):
            start = threading.Barrier(2)
            takes_both = a if r % 2 else b  # the shared session's later exports reach both collectors

            def write(store) -> None:
                start.wait()
                try:
                    for sid in own[store] + ([both] if store is takes_both else []):
                        export(store, sid, r)
                except BaseException as exc:  # surfaced below
                    errors.append(exc)

            threads = [threading.Thread(target=write, args=(store,)) for store in (a, b)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert not errors, errors
        assert locks() == before, "a later export was refused or ran under the lake-wide lock"

        con = b.cursor()
        total = rounds * per
        for sid in own[a] + own[b] + [both]:
            rows = con.execute("SELECT started_ns, ended_ns, user_id, outcome FROM sessions WHERE session_id = ?",
                               [sid]).fetchall()
            spans = con.execute("SELECT min(start_ns), max(end_ns), count(*), count(DISTINCT span_id || trace_id) "
                                "FROM spans WHERE session_id = ?", [sid]).fetchone()
            assert rows == [(*spans[:2], "u-first", "failure")] and spans[2:] == (total, total), sid
            steps = b.get_session(sid)["steps"]
            assert [s["index"] for s in steps] == list(range(total))
            assert [s["input_messages"][1]["content"] for s in steps] == [f"{sid} q{n}" for n in range(total)]
        assert con.execute("SELECT count(*) - count(DISTINCT (session_id, idx)) FROM steps").fetchone()[0] == 0
        assert b.stats()["sessions"] == 5
        versions = a.compact()["session_versions_dropped"]  # the latest version of each row stays
        assert versions == 5 * (rounds - 1) and a.stats()["sessions"] == 5
        assert con.execute("SELECT user_id, outcome FROM sessions WHERE session_id = ?", [both]).fetchall() == [
            ("u-first", "failure")]
    finally:
        a.close()
        b.close()


def test_a_later_migration_altering_sessions_runs_on_a_lake_whose_sessions_keep_versions(lake):
    """On a lake `sessions` is a view of each session's latest row version (lake_appends), so
    a migration that alters it must find a table: migrate_lake turns the versions into one
    row each, runs the migration, and makes the view again. After a new migration adding a
    column, each session reads once with its latest fields and the new column, and a later
    export appends a version again (no merge in place, so no lake-wide lock)."""
    from tracefix.collector.store import Store
    from tracefix.collector.store.schema import MIGRATIONS, migrate_lake

    store = Store(lake[0], data_path=lake[1])
    try:
        sid = f"migrated-{uuid.uuid4().hex[:6]}"
        trace = uuid.uuid4().bytes
        store.ingest(_chats(sid, trace, range(0, 3)))
        later = _chats(sid, trace, range(3, 6))
        later.sessions[sid]["outcome"] = "failure"
        store.ingest(later)  # a second version of the session's row
        con = store.cursor()
        assert con.execute("SELECT count(*) FROM session_rows WHERE session_id = ?", [sid]).fetchone()[0] == 2
        version = MIGRATIONS[-1][0] + 1
        store.lock.acquire()
        try:
            assert migrate_lake(store.con, [*MIGRATIONS, (version, "a column on sessions (test)",
                                                          ["ALTER TABLE sessions ADD COLUMN probe VARCHAR"])]) == version
        finally:
            store.lock.release()
        con = store.cursor()
        assert con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'sessions' "
                           "AND database_name = current_database()").fetchone()[0] == 1
        assert con.execute("SELECT outcome, probe FROM sessions WHERE session_id = ?", [sid]).fetchall() == [
            ("failure", None)]
        assert con.execute("SELECT count(*) FROM session_rows WHERE session_id = ?", [sid]).fetchone()[0] == 1
        held = store.lock.seconds["lake_held"]
        store.ingest(_chats(sid, trace, range(6, 9)))
        assert con.execute("SELECT count(*) FROM session_rows WHERE session_id = ?", [sid]).fetchone()[0] == 2
        assert store.lock.seconds["lake_held"] == held and store.lock.escalated == 0
        assert [s["index"] for s in store.get_session(sid)["steps"]] == list(range(9))
    finally:
        store.close()
