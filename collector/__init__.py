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
    ``Retry-After`` / ``RESOURCE_EXHAUSTED`` when ``--max-queue-spans`` spans (or 256 MiB)
    wait for the writer. Spans are normalized from tracefix/GenAI, OpenInference and
    OpenLLMetry conventions; a span without a session attribute joins its trace's session,
    else the trace id is the session id. The same span sent twice is stored once.

Store (``tracefix.collector.store``, the only SQL)
    One DuckDB file (``--db`` / ``TRACEFIX_DB``), numbered migrations in ``schema_version``.
    Chat messages and tool definitions are content-addressed (``messages``); spans keep
    their other attributes whole; steps are re-derived per touched session after each
    commit. One writer thread owns the write connection (``tracefix.collector.writer``).

HTTP API (JSON; ``Authorization: Bearer`` ``--token`` / ``TRACEFIX_TOKEN`` on all but /healthz)
    ``GET /healthz`` -> {"status", "db", "pending_spans", "committed_spans", "transactions", "checkpoints"}
    ``GET /api/v1/sessions?feedback=negative|positive|any&outcome=&service=&agent=&since=&until=&limit=&offset=``
        -> {"sessions": [summary]}; a summary has session_id, service, name, entrypoint, task,
        outcome, score, started_at, ended_at, duration_ms, steps, spans, errors, agents, models,
        feedback_score (latest), feedback_count, parent_session_id, replayable, source
    ``GET /api/v1/sessions/{id}?offset=&limit=&max_chars=&content=`` -> one page of the session
        document, long contents cut, inputs by message key (docs/contracts.md §1b)
    ``GET /api/v1/sessions/{id}/steps/{index}``, ``.../messages/{key}``: one step / message in full;
    ``.../messages?offset=&limit=``, ``.../spans?offset=&limit=`` -> streamed pages (contracts §1b)
    ``POST /api/v1/feedback`` {session_id, score, comment} -> 201 feedback (+ alert_id, job_id)
    ``GET|POST /api/v1/sessions/{id}/analysis`` and ``.../replay`` (contracts §3, §5, stored as-is)
    ``GET /api/v1/sessions/{id}/report`` (HTML from tracefix.analysis.report.render_html)
    ``POST /api/v1/import`` {"sessions": [doc]} -> {"session_ids"}
    ``GET /api/v1/training_sessions?criterion=success|positive|all`` -> {"sessions": [document]}
    ``GET|POST /api/v1/jobs`` (diagnosis queue), ``GET /api/v1/alerts`` (outbox and deliveries)

Alerts and diagnosis
    Feedback with score below ``--alert-threshold`` (default 0; also a
    ``gen_ai.evaluation.result`` span event) writes, in its transaction, an alert per
    ``--webhook`` and a diagnosis job. Webhooks get a Slack-compatible ``text`` plus
    ``alert_id, session_id, score, task, final_answer, comment, link`` (link =
    ``--public-url`` + /api/v1/sessions/{id}/report) and an ``Idempotency-Key`` header;
    delivery retries with exponential backoff (cap ``--alert-retry-max``) across restarts.
    ``--diagnose full|analysis|off`` chooses what the job runs (analysis, then replay when
    the session is replayable), ``--diagnosis-workers N`` how many run at once. Jobs left
    running by a crash run again at the next start. Replay children export back to this
    collector (its token is put in ``OTEL_EXPORTER_OTLP_HEADERS`` for them).

Tuning: ``--db-threads`` (DuckDB workers, default 1: ingest is many small transactions),
``--max-queue-spans``, ``--max-body-mb``, ``--host`` (0.0.0.0 to listen on all interfaces),
``TRACEFIX_DB_THREADS``, ``TRACEFIX_CHECKPOINT_THRESHOLD`` (the WAL size that triggers a
checkpoint, default 16MB; larger means fewer checkpoints and a longer WAL replay after a crash;
in ``tracefix serve`` a background thread runs them beside the writer, commits never wait for one),
``--decode-workers N`` / ``TRACEFIX_DECODE_WORKERS`` (processes that decode OTLP bodies, HTTP and gRPC,
over 64 KiB beside the writer, default 1; 0 decodes on a thread of the server).

Access from other code: ``tracefix.collector.access.connect(server=None, db=None, token=None)``.
"""

import os as _os

DEFAULT_DB = _os.path.join(".tracefix", "tracefix.duckdb")  # the embedded default store, relative to the cwd
