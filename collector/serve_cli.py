"""`tracefix serve`: its options, checked before anything starts (the store location, the
webhook secret, the tokens, the TLS files), and the collector they configure
(tracefix.collector.server)."""
from __future__ import annotations

import os
import sys

import click

from tracefix.collector import DEFAULT_DB
from tracefix.collector.cli_options import PORT, db_option, token_option


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
@click.option("--http-port", default=4318, show_default=True, type=PORT, help="OTLP/HTTP + API port (0: any free port).")
@click.option("--grpc-port", default=4317, show_default=True, type=PORT, help="OTLP/gRPC port (0: any free port).")
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
