"""`tracefix serve` assembled: store, single writer, OTLP/HTTP + API (uvicorn), OTLP/gRPC,
alert delivery and the diagnosis job runner; clean shutdown on SIGTERM/SIGINT.

Shutdown order keeps every acknowledged span: stop the receivers (in-flight requests
finish and are acknowledged), drain the spool for a while (what is left stays on disk for the
next start), drain the writer, checkpoint the database, exit 0.
"""
from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import ssl
import sys
import threading
import time
from dataclasses import dataclass, field

import uvicorn

from tracefix.collector.alerts import AlertDeliverer
from tracefix.collector.api import build_app
from tracefix.collector.api.read_room import ReadRoom
from tracefix.collector.auth import UI_SESSION_IDLE_S, Tokens
from tracefix.collector.checkpointer import Checkpointer, commit_time_threshold
from tracefix.collector.decoding import Decoder
from tracefix.collector.grpc_receiver import start_grpc
from tracefix.collector.job_runner import DiagnosisJobRunner
from tracefix.collector.metrics import CollectorMetrics
from tracefix.collector.pipeline import ServePipeline
from tracefix.collector.spool import Ingest, Spool
from tracefix.collector.store import Store
from tracefix.collector.store.lake import redacted
from tracefix.collector.threadnames import name_os_thread
from tracefix.collector.writer import Writer

log = logging.getLogger("tracefix.collector")

DEFAULT_SPOOL_MAX_BYTES = 2 << 30


@dataclass
class Config:
    db: str  # a DuckDB file, or ducklake:postgres:... (tracefix.collector.store.lake)
    data_path: str | None = None  # a new lake's file directory or s3:// URL
    host: str = "127.0.0.1"
    http_port: int = 4318
    grpc_port: int = 4317
    token: str | None = None  # the API's (and workers') token; accepted on ingest too
    ingest_token: str | None = None  # the apps' token: spans and feedback only (tracefix.collector.auth)
    webhooks: list[str] = field(default_factory=list)
    public_url: str | None = None
    alert_threshold: float = 0.0
    alert_retry_max_s: float = 30.0
    webhook_max_attempts: int = 50  # then a delivery is dead-lettered (tracefix.collector.alerts)
    webhook_secret: str | None = field(default=None, repr=False)  # signs every webhook (Standard Webhooks); never shown
    diagnose: str = "full"
    diagnosis_workers: int = 1
    max_body_bytes: int = 32 * 1024 * 1024
    max_attribute_chars: int = 8 * 1024 * 1024
    max_pending_spans: int = 50_000
    # the durable spool for exports the writer's queue cannot take (tracefix.collector.spool):
    # its directory (default: beside the database, `<db>.spool`) and disk budget (0: no spool,
    # a full queue is refused at once)
    spool_dir: str | None = None
    spool_max_bytes: int = DEFAULT_SPOOL_MAX_BYTES
    max_inflight_bytes: int = 256 * 1024 * 1024  # OTLP/HTTP bodies being read/decoded at once
    # DuckDB worker threads: ingest is many small transactions, where extra workers mostly
    # spin (1 thread: ~1.7x more spans per CPU-second in bench/ingest.py)
    db_threads: int = 1
    # processes that decode OTLP/HTTP bodies beside the writer's (0: a thread of this process)
    decode_workers: int = 1
    # DuckDB keeps the blocks it read cached up to its memory limit (default 80% of RAM): one
    # read of a session with 400 MB of messages would hold 400 MB for good. Reads fetch a few
    # rows at a time, so a small cache costs them little (docs/contracts.md §1b, bench/read_memory.py).
    # The writer keeps what waits for a checkpoint within a share of it, and checkpoints run
    # with DuckDB's own limit (tracefix.collector.store.connection, bench/large_exports.py).
    db_memory_limit: str = "256MB"
    # TLS on both receivers and the API: PEM server certificate chain and its key; with a
    # client CA, every client must present a certificate it signed (mutual TLS)
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    ui_session_idle_s: float = UI_SESSION_IDLE_S  # a web UI sign-in ends after this long without a request

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None


def check_tls_files(config: Config) -> None:
    """Raise ValueError naming what is wrong with the TLS options, so that a missing key or an
    unreadable file stops `serve` at once instead of failing the first handshake."""
    if config.tls_cert is None:
        if config.tls_key is not None or config.tls_client_ca is not None:
            raise ValueError("--tls-key and --tls-client-ca need --tls-cert")
        return
    if config.tls_key is None:
        raise ValueError("--tls-cert needs --tls-key (the certificate's private key, PEM)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        # a password-protected key cannot be served: refuse it here rather than prompt on the terminal
        context.load_cert_chain(config.tls_cert, config.tls_key, password=lambda: b"")
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot use --tls-cert {config.tls_cert} with --tls-key {config.tls_key}: {exc}") from None
    if config.tls_client_ca is not None:
        try:
            context.load_verify_locations(cafile=config.tls_client_ca)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"cannot use --tls-client-ca {config.tls_client_ca}: {exc}") from None


def spool_of(config: Config) -> Spool | None:
    """The spool `config` asks for; none for an in-memory store (nothing there survives a
    restart) unless a directory is named."""
    if config.spool_max_bytes <= 0 or (config.db == ":memory:" and not config.spool_dir):
        return None
    return Spool(config.spool_dir or f"{config.db}.spool", max_bytes=config.spool_max_bytes)


def listening_socket(host: str, port: int, option: str) -> socket.socket:
    """A TCP socket listening on host:port, or an OSError naming the address and `option`.
    SO_REUSEADDR only lets a port that the last run left in TIME_WAIT be bound again; on
    Linux a port another socket listens on stays refused, so two collectors never share one."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        hint = (": another process listens there (a tracefix serve already running?); stop it or pass another "
                f"{option} (0: any free port)") if exc.errno == errno.EADDRINUSE else ""
        raise OSError(f"cannot listen on {host}:{port} ({option}): {exc.strerror}{hint}") from None
    return sock


def check_ports_free(config: Config) -> None:
    """Refuse a fixed port someone listens on before the store is opened (or created): a
    collector that cannot listen leaves no database files behind."""
    for option, port in (("--http-port", config.http_port), ("--grpc-port", config.grpc_port)):
        if port:
            listening_socket(config.host, port, option).close()


class Collector:
    """`pipeline`: the diagnosis and the report renderer, given by the composition root
    (tracefix.collector.pipeline); without them diagnoses fail and the report route answers 404."""

    def __init__(self, config: Config, pipeline: ServePipeline | None = None):
        self.config = config
        self.pipeline = pipeline or ServePipeline()
        self.tokens = Tokens(config.token, config.ingest_token, config.ui_session_idle_s)
        # checkpoints run beside the writer (tracefix.collector.checkpointer), not in its commits
        self.store = Store(config.db, threads=config.db_threads,
                           checkpoint_threshold=commit_time_threshold(config.db_memory_limit),
                           memory_limit=config.db_memory_limit, data_path=config.data_path)
        self.read_room = ReadRoom(self.store)  # reads the store's memory limit cannot hold run again with room
        self.spool = spool_of(config)
        self.metrics = CollectorMetrics(self)
        self.writer = Writer(self.store, max_pending_spans=config.max_pending_spans,
                             on_created=self._created, on_commit=self.metrics.commit_seconds.observe)
        self.checkpointer = Checkpointer(self.store, on_invalidated=self.writer.reopen_soon)
        self.decoder = Decoder(workers=config.decode_workers, max_body_bytes=config.max_body_bytes,
                               max_attribute_chars=config.max_attribute_chars)
        self.ingest = Ingest(self.writer, self.decoder, self.spool, on_spooled=self.metrics.spooled)
        self.alerts = AlertDeliverer(self, max_delay=config.alert_retry_max_s,
                                     max_attempts=config.webhook_max_attempts, secret=config.webhook_secret)
        self.diagnosis = DiagnosisJobRunner(self, self.pipeline.diagnosis, mode=config.diagnose,
                                            workers=config.diagnosis_workers)
        self.http_url: str | None = None
        self.grpc_addr: str | None = None
        self._uvicorn: uvicorn.Server | None = None
        self._http_thread: threading.Thread | None = None
        self._grpc = None

    # --- hooks used by the receivers and the API ---------------------------------------------
    def feedback_options(self) -> dict:
        return {"alert_threshold": self.config.alert_threshold, "webhooks": self.config.webhooks,
                "public_url": self.config.public_url or self.http_url}

    def feedback_recorded(self, fb: dict) -> None:
        if fb.get("alert_id"):  # a session's feedback, or a person's mark on one of its steps
            what = (f"mark {fb.get('label') or ''} {'' if fb['score'] is None else format(fb['score'], 'g')} on step "
                    f"{fb['step']} of" if fb.get("step") is not None else f"feedback {fb['score']:g} on")
            log.warning("ALERT %s: negative %s session %s%s", fb["alert_id"], " ".join(what.split()),
                        fb["session_id"], f" ({fb['comment']})" if fb.get("comment") else "")
            self.alerts.wake()
        if fb.get("job_id"):
            self.diagnosis.wake()

    def wake_diagnosis(self) -> None:
        self.diagnosis.wake()

    def _created(self, created: dict) -> None:
        """Feedback that arrived as a span event (written by the writer thread)."""
        for fb in created.get("feedback", []):
            alert = next((a for a in created.get("alerts", []) if a["payload"]["session_id"] == fb["session_id"]), None)
            job = next((j for j in created.get("jobs", []) if j["session_id"] == fb["session_id"]), None)
            self.feedback_recorded({**fb, "alert_id": alert and alert["alert_id"], "job_id": job and job["job_id"]})

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.config
        self.writer.ingest_options = {}  # set once the public URL is known (below)
        if self.spool is not None:
            self.spool.open()  # what the last process left is replayed first
        self.decoder.start()
        self.checkpointer.start()
        self.writer.start()
        self.ingest.start()
        sock = listening_socket(cfg.host, cfg.http_port, "--http-port")
        host, port = sock.getsockname()[:2]
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        self.http_url = f"{'https' if cfg.tls else 'http'}://{shown}:{port}"
        self.writer.ingest_options = {"alert_threshold": cfg.alert_threshold, "webhooks": cfg.webhooks,
                                      "public_url": cfg.public_url or self.http_url}
        requeued = self.writer.run(lambda s: s.requeue_running_jobs("diagnosis"))
        if requeued:
            log.warning("re-queued %d diagnosis jobs left running by the last process", requeued)
        if cfg.webhooks:  # alerts recorded while no collector ran (CLI on the file)
            self.writer.run(lambda s: s.fan_out_alerts(cfg.webhooks, cfg.public_url or self.http_url))

        self._grpc, gport = start_grpc(self, cfg.host, cfg.grpc_port)
        self.grpc_addr = f"{shown}:{gport}"

        app = build_app(self)
        if self.pipeline.web_ui is not None:  # the web UI at / beside the API (tracefix.ui)
            try:
                app = self.pipeline.web_ui()(app, self)
            except ImportError as exc:
                log.warning("no web UI at /: %s", exc)
        tls = {}
        if cfg.tls:
            tls = {"ssl_certfile": cfg.tls_cert, "ssl_keyfile": cfg.tls_key}
            if cfg.tls_client_ca:
                tls.update(ssl_ca_certs=cfg.tls_client_ca, ssl_cert_reqs=ssl.CERT_REQUIRED)
        uconfig = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                 timeout_keep_alive=30, limit_concurrency=None, **tls)
        self._uvicorn = uvicorn.Server(uconfig)
        def run_http() -> None:
            name_os_thread("tf-http")
            self._uvicorn.run(sockets=[sock])

        self._http_thread = threading.Thread(target=run_http, name="tracefix-http", daemon=True)
        self._http_thread.start()
        deadline = time.monotonic() + 30
        while not self._uvicorn.started:
            if time.monotonic() > deadline or not self._http_thread.is_alive():
                raise RuntimeError("the HTTP server did not start")
            time.sleep(0.01)
        self.alerts.start()
        self.diagnosis.start()

    def stop(self) -> None:
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
            if self._http_thread is not None:
                self._http_thread.join(15)
        if self._grpc is not None:
            self._grpc.stop(grace=5).wait(10)
        self.alerts.stop()
        self.diagnosis.stop()
        self.ingest.close()  # drains the spool a while; what is left waits for the next start
        self.decoder.close()
        self.writer.close()
        self.checkpointer.stop()
        try:
            self.store.checkpoint()
        except Exception as exc:  # the WAL is durable; the next open replays it
            log.warning("checkpoint at shutdown failed: %s", exc)
        finally:
            self.store.close()


def serve_forever(config: Config, pipeline: ServePipeline | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s tracefix serve %(levelname)s %(message)s")
    logging.getLogger("tracefix").setLevel(logging.INFO)  # alerts, deliveries, diagnoses
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    check_ports_free(config)
    collector = Collector(config, pipeline)
    if collector.tokens.shared:
        log.warning("one token for apps and the API: every instrumented app can read all sessions; "
                    "give apps their own with --ingest-token")
    collector.start()
    print(f"tracefix serve: http={collector.http_url} grpc={collector.grpc_addr} db={redacted(collector.store.path)}",
          flush=True)
    if config.diagnose == "full":
        log.info("replays of thumbs-down sessions are queued for workers: run `tracefix worker --server %s "
                 "--allow-module YOUR_AGENT_PACKAGE` where your agent's code is installed", collector.http_url)
    if config.diagnose != "off" and config.diagnosis_workers == 0:
        log.info("diagnosis jobs wait for workers: run `tracefix worker --server %s --jobs diagnosis`",
                 collector.http_url)
    while not stop.wait(0.5):
        pass
    print("tracefix serve: shutting down (draining the write queue)", flush=True)
    collector.stop()
    print("tracefix serve: stopped", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # worker threads may still sit in a webhook call or an analysis; they are daemons and
    # everything they wrote is committed, so leave without waiting for them
    os._exit(0)
