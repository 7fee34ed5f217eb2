"""CLI verbs of the collector: `tracefix serve`, `sessions`, `show`, `feedback`, `import`.

The store verbs go through `tracefix.collector.access.connect`: a running collector's
API when one answers, else the DuckDB file.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import click

from tracefix.collector import DEFAULT_DB, document
from tracefix.collector.access import AccessError, connect
from tracefix.collector.cli_options import db_option, store_options, token_option
from tracefix.collector.jobs import JOB_KINDS, JOB_STATES


def _store_options(fn):
    fn = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(fn)
    return store_options(fn)


def _connect(db, server, token):
    try:
        return connect(server=server, db=db, token=token)
    except AccessError as exc:
        raise click.ClickException(str(exc)) from exc


def _check_webhook_secret(ctx, param, value):
    """Refuse a secret that cannot be decoded now, not at the first alert."""
    if value is not None:
        from tracefix.collector.alerts import webhook_secret_key

        try:
            webhook_secret_key(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


@click.command()
@db_option(default=DEFAULT_DB)
@click.option("--store", "store_location", envvar="TRACEFIX_STORE", default=None, metavar="ducklake:postgres:CONNINFO",
              help="Store in a DuckLake whose catalog is this PostgreSQL database instead of the --db file, so several "
                   "collectors share one store, e.g. 'ducklake:postgres:dbname=tracefix host=db user=tracefix'.")
@click.option("--data-path", envvar="TRACEFIX_DATA_PATH", default=None, metavar="DIR|s3://...",
              help="Where a new DuckLake puts its Parquet files (a shared directory or an S3-compatible URL); "
                   "the catalog remembers it.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0 for all).")
@click.option("--http-port", default=4318, show_default=True, type=int, help="OTLP/HTTP + API port (0: any free port).")
@click.option("--grpc-port", default=4317, show_default=True, type=int, help="OTLP/gRPC port (0: any free port).")
@token_option(help="Require 'Authorization: Bearer TOKEN' on every route (the API's and workers' token).")
@click.option("--ingest-token", envvar="TRACEFIX_INGEST_TOKEN", default=None,
              help="A second token that may only send spans and feedback: give it to instrumented apps.")
@click.option("--webhook", "webhooks", multiple=True, help="POST alerts here (repeatable; Slack-compatible).")
@click.option("--public-url", default=None, help="Base URL used in alert links (default: the HTTP address).")
@click.option("--alert-threshold", default=0.0, show_default=True, type=float,
              help="Feedback scores below this raise an alert.")
@click.option("--alert-retry-max", default=30.0, show_default=True, type=float,
              help="Longest wait between webhook retries, seconds.")
@click.option("--webhook-max-attempts", default=50, show_default=True, type=click.IntRange(1),
              help="Tries per alert and webhook; after the last failure the delivery is dead-lettered "
                   "(state 'dead' in GET /api/v1/alerts) and never retried.")
@click.option("--webhook-secret", envvar="TRACEFIX_WEBHOOK_SECRET", default=None, callback=_check_webhook_secret,
              help="Sign every webhook as Standard Webhooks says (webhook-id, webhook-timestamp, webhook-signature) "
                   "with this whsec_<base64> secret.")
@click.option("--diagnose", type=click.Choice(["off", "analysis", "full"]), default="full", show_default=True,
              help="What a negative feedback starts: nothing, the analysis, or the analysis and a replay job "
                   "for a `tracefix worker` (the collector itself never runs agent code).")
@click.option("--diagnosis-workers", default=1, show_default=True, type=click.IntRange(0, 16),
              help="Diagnosis jobs this collector runs at the same time; 0 runs none here and leaves them "
                   "to `tracefix worker --jobs diagnosis` processes.")
@click.option("--max-body-mb", default=32, show_default=True, type=int, help="Largest accepted request body.")
@click.option("--max-queue-spans", default=50_000, show_default=True, type=int,
              help="Spans waiting in memory to be written; beyond, exports go to the spool on disk.")
@click.option("--spool-dir", envvar="TRACEFIX_SPOOL_DIR", default=None,
              help="Directory of the durable spool [default: the database's path + '.spool'].")
@click.option("--spool-max-mb", default=2048.0, show_default=True, type=click.FloatRange(0),
              help="Disk budget of the spool; once spent, receivers answer 429 / RESOURCE_EXHAUSTED "
                   "with a retry delay (0: no spool, a full queue is refused at once).")
@click.option("--db-threads", default=1, show_default=True, type=int,
              help="DuckDB worker threads (raise for large analytical reads).")
@click.option("--decode-workers", envvar="TRACEFIX_DECODE_WORKERS", default=1, show_default=True,
              type=click.IntRange(0, 16),
              help="Processes decoding OTLP/HTTP bodies beside the writer (0: a thread of the server).")
@click.option("--tls-cert", envvar="TRACEFIX_TLS_CERT", default=None,
              help="Serve TLS on the HTTP and gRPC ports with this PEM certificate (chain); needs --tls-key.")
@click.option("--tls-key", envvar="TRACEFIX_TLS_KEY", default=None, help="PEM private key of --tls-cert (unencrypted).")
@click.option("--tls-client-ca", envvar="TRACEFIX_TLS_CLIENT_CA", default=None,
              help="Mutual TLS: only clients with a certificate signed by this PEM CA may connect (both ports).")
@click.option("--ui-session-idle-minutes", envvar="TRACEFIX_UI_SESSION_IDLE_MINUTES", default=720.0,
              show_default=True, type=click.FloatRange(0, min_open=True),
              help="A web UI sign-in ends after this long without a request (and at logout, and at a restart).")
@click.pass_obj
def serve(pipeline, db, store_location, data_path, host, http_port, grpc_port, token, ingest_token, webhooks,
          public_url, alert_threshold, alert_retry_max, webhook_max_attempts, webhook_secret, diagnose,
          diagnosis_workers, max_body_mb, max_queue_spans, spool_dir, spool_max_mb, db_threads, decode_workers,
          tls_cert, tls_key, tls_client_ca, ui_session_idle_minutes):
    """Run the collector: OTLP/gRPC + OTLP/HTTP receivers, DuckDB store, API, alerts."""
    # `pipeline`: the diagnosis and report renderer, injected by the composition root (tracefix.cli)
    from tracefix.collector.server import Config, check_tls_files, serve_forever

    from tracefix.collector.store.lake import catalog_conninfo, is_lake

    if store_location is not None:
        try:
            if not is_lake(store_location):
                raise ValueError(f"--store {store_location!r}: use ducklake:postgres:CONNINFO (or --db for a DuckDB file)")
            catalog_conninfo(store_location)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--store") from None
    elif data_path is not None:
        raise click.UsageError("--data-path goes with --store ducklake:...")
    if data_path is not None and "://" not in data_path:
        data_path = os.path.abspath(data_path)
    if store_location is not None and spool_dir is None:
        # the spool is this collector's own, on its local disk: beside --db, never in the lake;
        # a collector restarted with the same --db replays what it acknowledged before it died
        spool_dir = os.path.abspath(db) + ".spool"
    config = Config(db=store_location or os.path.abspath(db), data_path=data_path, host=host, http_port=http_port, grpc_port=grpc_port, token=token,
                    ingest_token=ingest_token, webhooks=list(webhooks), public_url=public_url, alert_threshold=alert_threshold,
                    alert_retry_max_s=alert_retry_max, webhook_max_attempts=webhook_max_attempts,
                    webhook_secret=webhook_secret,
                    diagnose=diagnose, diagnosis_workers=diagnosis_workers,
                    max_body_bytes=max_body_mb * 1024 * 1024, max_pending_spans=max_queue_spans,
                    spool_dir=spool_dir and os.path.abspath(spool_dir), spool_max_bytes=int(spool_max_mb * 1024 * 1024),
                    db_threads=db_threads, decode_workers=decode_workers,
                    tls_cert=tls_cert, tls_key=tls_key, tls_client_ca=tls_client_ca,
                    ui_session_idle_s=ui_session_idle_minutes * 60)
    import duckdb

    from tracefix.collector.auth import Tokens

    try:
        Tokens(token, ingest_token)
        check_tls_files(config)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    try:
        sys.exit(serve_forever(config, pipeline))
    except OSError as exc:
        raise click.ClickException(f"cannot start: {exc}") from exc
    except duckdb.Error as exc:
        hint = " (another tracefix serve holds this file: one collector per database)" if "lock" in str(exc).lower() else ""
        raise click.ClickException(f"cannot open the store {config.db}: {exc}{hint}") from exc


def _fmt_score(v):
    return "" if v is None else f"{v:g}"


@click.command()
@_store_options
@click.option("--feedback", type=click.Choice(["negative", "positive", "any"]), default=None)
@click.option("--outcome", type=click.Choice(["success", "failure"]), default=None)
@click.option("--service", default=None)
@click.option("--agent", default=None)
@click.option("--since", default=None, help="ISO-8601 time (or epoch seconds).")
@click.option("--until", default=None)
@click.option("--limit", default=50, show_default=True, type=int)
@click.option("--offset", default=0, type=int)
def sessions(db, server, token, as_json, feedback, outcome, service, agent, since, until, limit, offset):
    """List stored sessions, newest first."""
    def line(r: dict) -> str:
        task = (r.get("task") or "").replace("\n", " ")[:60]
        return (f"{r['session_id'][:38]:<38} {(r['started_at'] or '')[:19]:<20} {r['steps']:>5} "
                f"{(r['outcome'] or '-'):<8} {_fmt_score(r['feedback_score']):>8}  {task}")

    _print_listing(db, server, token, as_json, lambda store: store.list_sessions(
        feedback=feedback, outcome=outcome, service=service, agent=agent, since=since, until=until, limit=limit,
        offset=offset), "no sessions", f"{'SESSION':<38} {'STARTED':<20} {'STEPS':>5} {'OUTCOME':<8} {'FEEDBACK':>8}  TASK",
        line)


def _print_listing(db, server, token, as_json: bool, read: Callable[[Any], list[dict]], nothing: str, header: str,
                   line: Callable[[dict], str]) -> None:
    """What a listing verb prints: `read(store)`'s rows as JSON, or as a table under `header`."""
    with _connect(db, server, token) as store:
        try:
            rows = read(store)
        except (AccessError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    elif not rows:
        click.echo(nothing)
    else:
        click.echo(header)
        for row in rows:
            click.echo(line(row))


@click.command()
@_store_options
@click.option("--state", type=click.Choice(JOB_STATES), default=None)
@click.option("--kind", type=click.Choice(JOB_KINDS), default=None)
@click.option("--session", "session_id", default=None, help="Only this session's jobs.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100_000))
def jobs(db, server, token, as_json, state, kind, session_id, limit):
    """List diagnosis and replay jobs, newest first."""
    def line(r: dict) -> str:
        return (f"{r['job_id']:<22} {r['session_id'][:34]:<34} {r['kind']:<9} {r['state']:<8} "
                f"{(r['created_at'] or '')[:19]:<20} {(r['worker'] or '-')[:16]:<16} {_short(r['error'] or '', 80)}")

    _print_listing(db, server, token, as_json, lambda store: store.list_jobs(state, session_id, kind, newest=limit),
                   "no jobs", f"{'JOB':<22} {'SESSION':<34} {'KIND':<9} {'STATE':<8} {'CREATED':<20} {'WORKER':<16} ERROR",
                   line)


@click.command()
@_store_options
@click.option("--session", "session_id", default=None, help="Only this session's alerts.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100_000))
def alerts(db, server, token, as_json, session_id, limit):
    """List the alerts thumbs-downs raised and how their webhook deliveries went, newest first."""
    def line(r: dict) -> str:
        payload = r["payload"] if isinstance(r["payload"], dict) else {}
        states: dict[str, int] = {}
        for d in r["deliveries"]:
            states[d["state"]] = states.get(d["state"], 0) + 1
        deliveries = ", ".join(f"{n} {state}" for state, n in sorted(states.items())) or "no webhook"
        return (f"{r['alert_id']:<20} {r['session_id'][:34]:<34} {(r['created_at'] or '')[:19]:<20} "
                f"{_fmt_score(payload.get('score')):>5}  {deliveries:<24} {_short(payload.get('comment') or '', 60)}")

    _print_listing(db, server, token, as_json, lambda store: store.list_alerts(session_id, newest=limit), "no alerts",
                   f"{'ALERT':<20} {'SESSION':<34} {'CREATED':<20} {'SCORE':>5}  {'DELIVERIES':<24} COMMENT", line)


def _short(value, n=160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = (text or "").replace("\n", " ")
    return text if len(text) <= n else text[: n - 1] + "…"


# `show` reads a session page by page: a session of any size prints in bounded memory.
SHOW_PAGE_STEPS = 100
SHOW_MAX_CHARS = 400


@click.command()
@_store_options
@click.argument("session_id")
@click.option("--spans", is_flag=True, help="Show the raw spans instead of the steps.")
def show(db, server, token, as_json, session_id, spans):
    """Show one session's steps (or its spans); --json prints the whole document."""
    with _connect(db, server, token) as store:
        try:
            if as_json or spans:
                doc = store.get_session(session_id)
                if doc is None:
                    raise click.ClickException(f"unknown session {session_id!r}")
                if spans:
                    raw = store.get_spans(session_id)
                    if as_json:
                        click.echo(json.dumps(raw, indent=2, ensure_ascii=False))
                    for s in raw if not as_json else []:
                        click.echo(f"{s['start_time']}  {s['kind']:<8} {s['name']}  ({s['duration_ms']} ms)")
                else:
                    click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
                return
            _show_pages(store, session_id)
        except AccessError as exc:
            raise click.ClickException(str(exc)) from exc


def _show_pages(store, session_id: str) -> None:
    doc = store.session_page(session_id, 0, SHOW_PAGE_STEPS, SHOW_MAX_CHARS)
    if doc is None:
        raise click.ClickException(f"unknown session {session_id!r}")
    click.echo(f"session {doc['session_id']}  service={doc['service']}  outcome={doc['outcome']}  "
               f"score={doc['score']}  replayable={doc['replayable']}")
    if doc.get("task"):
        click.echo(f"task: {_short(doc['task'], 200)}")
    click.echo(f"agents: {', '.join(doc['agents'])}  tokens: {doc['tokens']['input']} in / {doc['tokens']['output']} out")
    page, unrecorded = doc, []
    last_index = doc["page"]["total"] - 1
    while True:
        unrecorded += [n for n in document.unrecorded_tools(page["steps"], last_index) if n not in unrecorded]
        for st in page["steps"]:
            out = st.get("output_message") or {}
            click.echo(f"[Step {st['index']}] {st['agent'] or '-'} ({st['kind']}, {st['model'] or '-'})"
                       + (f"  ERROR {st['error']}" if st.get("error") else ""))
            if out.get("content"):
                click.echo(f"    says: {_short(out['content'])}")
            for tc in st["tool_calls"]:
                click.echo(f"    tool {tc['name']}({_short(tc['arguments'], 80)}) -> "
                           f"{_short(tc['error'] or tc['result'], 80)}")
            if st.get("snapshots"):
                click.echo(f"    snapshots: {', '.join(st['snapshots'])}")
        offset = page["page"]["next_offset"]
        if offset is None:
            break
        page = store.session_page(session_id, offset, SHOW_PAGE_STEPS, SHOW_MAX_CHARS)
        if page is None:
            break
    for fb in doc["feedback"]:
        click.echo(f"feedback {fb['score']:g} at {fb['created_at']}: {fb.get('comment') or ''}")
    if unrecorded and doc["replayable"]:
        click.echo(f"replayable with live tools only: {', '.join(unrecorded)} ran without @tracefix.tool, so a "
                   "replay runs them again for real (tracefix replay --allow-live-tools)")
    if doc.get("output") is not None:
        click.echo(f"output: {_short(doc['output'], 300)}")


@click.command()
@_store_options
@click.argument("session_id")
@click.option("--down", "direction", flag_value="down", help="Thumbs down (score -1).")
@click.option("--up", "direction", flag_value="up", help="Thumbs up (score 1).")
@click.option("--score", type=float, default=None, help="An explicit score instead of --up/--down.")
@click.option("--comment", default=None)
def feedback(db, server, token, as_json, session_id, direction, score, comment):
    """Record feedback on a session; a thumbs-down raises an alert and queues a diagnosis."""
    if score is None:
        if direction is None:
            raise click.UsageError("give --down, --up or --score")
        score = -1.0 if direction == "down" else 1.0
    with _connect(db, server, token) as store:
        try:
            fb = store.add_feedback(session_id, score, comment)
        except KeyError as exc:
            raise click.ClickException(f"unknown session {session_id!r}") from exc
        except (AccessError, ValueError) as exc:  # ValueError: a NaN or infinite --score
            raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(fb, indent=2))
        return
    click.echo(f"feedback {fb['score']:g} recorded on {session_id}"
               + (f"; alert {fb['alert_id']} raised" if fb.get("alert_id") else "")
               + (f"; diagnosis job {fb['job_id']} queued" if fb.get("job_id") else ""))


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="Print the created session ids as a JSON list.")
@store_options
def import_(file: str, as_json: bool, server: str | None, db: str | None, token: str | None) -> None:
    """Import message-log conversations (JSON object, JSON list or JSONL) as sessions.

    Each conversation has its messages under `messages` or `history` (each with `content`
    and a speaker in `name` or `role`), optionally a `task` and a `ground_truth`. Every
    message becomes one step, numbered from 0.
    """
    from tracefix.collector.imports import ImportFormatError, documents_from_text

    text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    try:
        docs = documents_from_text(text)
    except ImportFormatError as exc:
        raise click.ClickException(f"{file}: {exc}") from exc
    try:
        access = connect(server=server, db=db, token=token)
    except Exception as exc:
        raise click.ClickException(f"cannot open the store ({exc})") from exc
    with access:
        # Ids are content hashes: a conversation imported before is already stored, and importing
        # it again would write it over the stored session (its messages by position, its times
        # anew). The store leaves those out (import_new_sessions), and a conversation the file
        # holds twice, and says which they were.
        ids: list[str] = []
        pending = list(_import_batches(docs))[::-1]  # a stack: the next batch on top
        with click.progressbar(length=len(docs), label="importing", file=sys.stderr) as bar:
            while pending:
                batch = pending.pop()
                try:
                    imported, stored = access.import_new_sessions(batch)
                except Exception as exc:
                    # refused as too large (413, or a reset connection: the collector answers
                    # before reading the rest): the same sessions again, in halves
                    if isinstance(exc, AccessError) and exc.status in (None, 413) and len(batch) > 1:
                        pending += [batch[len(batch) // 2:], batch[:len(batch) // 2]]
                        continue
                    for sid in ids:  # what is stored, so a script can go on from it
                        click.echo(sid)
                    raise click.ClickException(
                        f"import stopped after {len(ids)} of {len(docs)} new sessions: a request of {len(batch)} "
                        f"session(s), {len(json.dumps(batch)) / 1e6:.1f} MB, failed and none of it was created ({exc}). "
                        "Run the same import again to go on: stored sessions are skipped.") from exc
                ids += imported
                for sid in stored:
                    click.echo(f"already stored: {sid}", err=True)
                bar.update(len(batch))
    if as_json:
        click.echo(json.dumps(ids))
    else:
        for sid in ids:
            click.echo(sid)
        click.echo(f"imported {len(ids)} session(s)", err=True)


# An import goes to the store in requests of at most this much JSON (a collector refuses a body
# over its --max-body-mb, 32 MB by default) and this many sessions (each request is one transaction).
IMPORT_BATCH_BYTES = 8 * 1024 * 1024
IMPORT_BATCH_SESSIONS = 200


def _import_batches(docs: list[dict]) -> Iterator[list[dict]]:
    """`docs` in order, in batches of IMPORT_BATCH_BYTES / IMPORT_BATCH_SESSIONS at most: a
    session larger than a batch goes alone."""
    batch: list[dict] = []
    size = 0
    for doc in docs:
        n = len(json.dumps(doc))  # as HttpAccess sends it (ASCII)
        if batch and (size + n > IMPORT_BATCH_BYTES or len(batch) >= IMPORT_BATCH_SESSIONS):
            yield batch
            batch, size = [], 0
        batch.append(doc)
        size += n
    if batch:
        yield batch
