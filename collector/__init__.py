"""tracefix.collector: `tracefix serve`, the process that stores agent traces and alerts.

Usage::

    tracefix serve --db ./.tracefix/tracefix.duckdb --webhook https://hooks.slack.com/...
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python my_agent.py   # any OTel GenAI instrumentation
    tracefix sessions --feedback negative ; tracefix show SESSION ; tracefix feedback SESSION --down

Receivers
    OTLP/HTTP ``POST /v1/traces`` (protobuf or JSON, gzip; port ``--http-port``, default 4318)
    and OTLP/gRPC ``TraceService/Export`` (``--grpc-port``, default 4317). A request is
    answered only after its spans are committed. Partial success for spans that cannot be
    stored (bad ids, an attribute over 8 M characters); 400 when nothing in it can be;
    413 above ``--max-body-mb`` (also after gunzip); 415 for other content types; 429 with
    ``Retry-After`` / ``RESOURCE_EXHAUSTED`` with ``google.rpc.RetryInfo`` (the writer's
    drain time, 0.5–10 s, so exporters retry) when ``--max-queue-spans`` spans (or 256 MiB)
    wait for the writer, or 32 gRPC exports are in progress. Spans are normalized from tracefix/GenAI, OpenInference and
    OpenLLMetry conventions; a span without a session attribute joins its trace's session,
    else the trace id is the session id. The same span sent twice is stored once.
    OTLP logs (``/v1/logs``, ``LogsService/Export``) and metrics (``/v1/metrics``,
    ``MetricsService/Export``) the same way: GenAI events and GenAI metrics' points are stored,
    other records acknowledged (tracefix.collector.otlp_signals).

Store (``tracefix.collector.store``, the only SQL)
    One DuckDB file (``--db`` / ``TRACEFIX_DB``), numbered migrations in ``schema_version``.
    Chat messages and tool definitions are content-addressed (``messages``); spans keep
    their other attributes whole; steps are re-derived per touched session after each
    commit. One writer thread owns the write connection (``tracefix.collector.writer``).

HTTP API (JSON; ``Authorization: Bearer`` on all but /healthz: the API token ``--token`` /
``TRACEFIX_TOKEN`` everywhere, the ingest token ``--ingest-token`` / ``TRACEFIX_INGEST_TOKEN`` on
OTLP and ``POST /api/v1/feedback`` only; tracefix.collector.auth)
    ``GET /healthz`` -> {"status", "reason", "store_id", "pending_spans", "committed_spans", "transactions",
    "checkpoints", ...}: 503 with status "unhealthy" and the reason while the store cannot write
        (store_id: a hash of the DuckDB file's identity, never its path; see access.store_identity)
    ``GET /api/v1/store`` -> {"db", "store_id"} (the file's path, to token holders only)
    ``GET /api/v1/sessions?feedback=negative|positive|any&outcome=&service=&agent=&since=&until=&limit=&offset=``
        -> {"sessions": [summary]}; a summary has session_id, service, name, entrypoint, task,
        outcome, score, started_at, ended_at, duration_ms, steps, spans, errors, agents, models,
        feedback_score (latest), feedback_count, parent_session_id, source, marked_replayable
        (the app's mark; whether a replay runs it is the document's `replayable`)
    ``GET /api/v1/sessions/{id}?offset=&limit=&max_chars=&content=`` -> one page of the session
        document, long contents cut, inputs by message key (docs/contracts.md §1b)
    ``GET /api/v1/sessions/{id}/steps/{index}``, ``.../messages/{key}``: one step / message in full;
    ``.../messages?offset=&limit=``, ``.../spans?offset=&limit=`` -> streamed pages (contracts §1b)
    ``POST /api/v1/feedback`` {session_id, score, comment} -> 201 feedback (+ alert_id, job_id)
    ``GET|POST /api/v1/sessions/{id}/analysis`` and ``.../replay`` (contracts §3, §5, stored as-is)
    ``GET /api/v1/sessions/{id}/report`` (HTML or ``?format=md``, drawn by the report part that
        ``tracefix serve`` is given: docs/architecture.md)
    ``POST /api/v1/import`` {"sessions": [doc], "skip_stored"?} -> {"session_ids", "skipped"} (skip_stored:
        the sessions whose id is stored already are left as they are, and listed under skipped)
    ``GET /api/v1/training_sessions?criterion=success|positive|all&offset=&limit=`` -> a streamed page
        {"sessions": [document], "page"} (a page also ends after PAGE_BUDGET_CHARS of documents)
    ``GET /api/v1/jobs?state=&session_id=&kind=&job_id=&order=oldest|newest&offset=&limit=`` -> a streamed
        page {"jobs", "page"} (job_id repeats: only those jobs), ``POST /api/v1/jobs`` {session_id, kind: diagnosis|replay,
        steps: [int]?, edit: str?} (a replay of the given steps, with the person's own edit at one step)
    ``POST /api/v1/jobs/claim`` {worker, lease_s, kind: replay|diagnosis} -> 200 job leased to the worker
        (a diagnosis job says what it runs: ``diagnose``, the collector's --diagnose), or 204
    ``POST /api/v1/jobs/{id}/lease`` {worker, lease_s}, ``.../finish`` {worker, state: done|failed|refused,
        error} -> 200, or 409 when the job is no longer that worker's
    ``GET /api/v1/alerts?session_id=&order=&offset=&limit=`` -> a streamed page {"alerts", "page"}
        (outbox and deliveries)
    A session id in a path is one percent-encoded segment (``a/b`` -> ``a%2Fb``). A query
    parameter the store cannot use answers 422 {"error", "parameter"}; a NaN/infinite
    feedback score answers 422. JSON answers and webhook bodies write stored NaN/Infinity as
    null. Every answer carries nosniff, no-referrer and a CSP (the report: inline styles and
    data: images only).

Alerts and diagnosis
    Feedback with score below ``--alert-threshold`` (default 0; also a
    ``gen_ai.evaluation.result`` span event) writes, in its transaction, an alert per
    ``--webhook`` and a diagnosis job. Webhooks get a Slack-compatible ``text`` plus
    ``alert_id, session_id, score, task, final_answer, comment, link`` (link =
    ``--public-url`` + /api/v1/sessions/{id}/report) and an ``Idempotency-Key`` header;
    delivery retries with exponential backoff (cap ``--alert-retry-max``) across restarts.
    ``--diagnose full|analysis|off`` chooses what the job runs (tracefix.analysis.diagnosis, given
    to the collector by the `tracefix` command line): the analysis here, then (full,
    replayable session) a replay job that a ``tracefix worker`` claims: the collector never
    runs agent code (tracefix.replay.worker). ``--diagnosis-workers N`` analyses run at once here;
    0 leaves them to ``tracefix worker --jobs diagnosis`` processes, which claim them with a lease.
    Diagnosis jobs left running by a crash run again at the next start; a job whose worker
    stops renewing its lease is queued again (failed after 3 attempts).

Tuning: ``--db-threads`` (DuckDB workers, default 1: ingest is many small transactions),
``--max-queue-spans``, ``--max-body-mb``, ``--host`` (0.0.0.0 to listen on all interfaces),
``TRACEFIX_DB_THREADS``, ``TRACEFIX_CHECKPOINT_THRESHOLD`` (the WAL size that triggers a
checkpoint, default 16MB; larger means fewer checkpoints and a longer WAL replay after a crash;
in ``tracefix serve`` a background thread runs them beside the writer, commits never wait for one,
at 32MB by default, within half the writer's WAL budget),
``--decode-workers N`` / ``TRACEFIX_DECODE_WORKERS`` (processes that decode OTLP bodies, HTTP and gRPC,
over 64 KiB beside the writer, default 1; 0 decodes on a thread of the server),
``TRACEFIX_OTLP_C_READER=off`` (decode every OTLP/protobuf trace body with protobuf, not the
C reader built by ``pip install``: ``tracefix.collector.normalize.wire_spans``).

Access from other code: ``tracefix.collector.access.connect(server=None, db=None, token=None)``.
"""

import os as _os

DEFAULT_DB = _os.path.join(".tracefix", "tracefix.duckdb")  # the embedded default store, relative to the cwd


def db_path(db: str | _os.PathLike | None = None) -> str:
    """The store file a command means: `db` when given, else TRACEFIX_DB, else DEFAULT_DB.
    Every part that opens or names the store file resolves it here."""
    return str(db or _os.environ.get("TRACEFIX_DB") or DEFAULT_DB)
