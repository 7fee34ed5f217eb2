"""The scripted OpenAI-compatible LLM server (a test and demo component, not a real model).

Serves `POST /v1/chat/completions` (non-streaming and SSE streaming with tool-call deltas
and a final usage chunk; `logprobs`/`top_logprobs`, `web_search_options` (url_citation
annotations) and the legacy `functions` → `function_call` shape as the API answers them,
:mod:`tracefix.demo.sim_protocol`), `GET /v1/models[/{id}]`, `GET /healthz`, `GET /_sim/stats`
and, with transcripts on, `GET /_sim/sessions/{session}` (every exchange and injected fault)
on the standard library's ThreadingHTTPServer. The models it answers are those of
:mod:`tracefix.demo.sim_models` (the banking and warehouse teams with fault injection, a plan
follower, the stand-in for tracefix's own LLM; tests add their own with `register_model`).

The app identifies itself in headers, so request bodies (what tracefix records and
fingerprints) stay clean: `X-Demo-Task`, `X-Demo-Step` (its 0-based count of LLM calls in
the run), `X-Demo-Session`, and `X-Demo-Replay: 1` inside a replay.

In-process use: ``server = SimServer(SimConfig(seed=1)); base_url = server.start(); ...;
server.stop()``.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .faults import FaultConfig, FaultInjector
from .sim_models import MODELS, RequestContext
from .sim_protocol import (ApiError, answer_message, completion, from_legacy_functions, model_card, parse_request,
                           stream_events, usage)

MAX_BODY_BYTES = 32 * 1024 * 1024


@dataclass
class SimConfig:
    host: str = "127.0.0.1"
    port: int = 0
    seed: int = 0
    latency_ms: float = 0.0
    faults: FaultConfig = field(default_factory=FaultConfig)
    # Keep every exchange per session (tests compare transcripts; off by default: memory).
    record_transcripts: bool = False
    plan_faults: tuple = ()  # plan_agent.PlanFault, e.g. parse_fault("refund.amount=200")
    # Answer a model name it does not know with this one (an app written for "gpt-4o-mini"
    # runs unchanged); None: unknown models get the API's 404, as a real endpoint answers.
    default_model: str | None = None


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms delayed-ACK stall

    def log_message(self, fmt: str, *args: Any) -> None:  # keep test output clean
        pass

    # --- plumbing ----------------------------------------------------------------------
    def _send_json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
                if len(body) > MAX_BODY_BYTES:
                    raise ApiError(413, f"request body over {MAX_BODY_BYTES} bytes", code="request_too_large")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise ApiError(400, "invalid Content-Length header") from None
        if length > MAX_BODY_BYTES:
            raise ApiError(413, f"request body over {MAX_BODY_BYTES} bytes", code="request_too_large")
        return self.rfile.read(length) if length > 0 else b""

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/healthz":
            self._send_json(200, {"status": "ok"})
        elif path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [model_card(name) for name in sorted(MODELS)]})
        elif path.startswith("/v1/models/"):
            name = path[len("/v1/models/"):]
            if name in MODELS:
                self._send_json(200, model_card(name))
            else:
                self._send_json(404, ApiError(404, f"The model '{name}' does not exist", param="model",
                                              code="model_not_found").body())
        elif path == "/_sim/stats":
            self._send_json(200, self.server.sim.stats())
        elif path.startswith("/_sim/sessions/"):
            sim, session = self.server.sim, path[len("/_sim/sessions/"):]
            if not sim.config.record_transcripts:
                self._send_json(404, ApiError(404, "transcripts are off: start the sim with --transcripts",
                                              code="not_found").body())
            else:
                self._send_json(200, {"session": session, "exchanges": sim.transcript(session),
                                      "faults": [g for g in sim.injector.injected if g["session"] == session]})
        else:
            self._send_json(404, ApiError(404, f"no route GET {path}", code="not_found").body())

    def _method_not_allowed(self) -> None:
        self._read_body_quietly()
        self._send_json(405, ApiError(405, f"method {self.command} not allowed on {self.path}",
                                      code="method_not_allowed").body())

    def _read_body_quietly(self) -> None:
        try:
            self._read_body()
        except (ApiError, ValueError):
            self.close_connection = True

    do_PUT = do_DELETE = do_PATCH = _method_not_allowed  # noqa: N815

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            body = self._read_body()
        except (ApiError, ValueError) as exc:
            error = exc if isinstance(exc, ApiError) else ApiError(400, f"unreadable request body: {exc}")
            self.close_connection = True  # the rest of the stream cannot be trusted
            self._send_json(error.status, error.body())
            return
        if path != "/v1/chat/completions":
            self._send_json(404, ApiError(404, f"no route POST {path}", code="not_found").body())
            return
        try:
            request = parse_request(body, self.server.sim.serves)
            self.server.sim.complete(self, request)
        except ApiError as exc:
            self._send_json(exc.status, exc.body())
        except Exception as exc:  # a bug in a model must not take the server down
            self._send_json(500, ApiError(500, f"scripted model failed: {type(exc).__name__}: {exc}",
                                          type_="server_error").body())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    sim: "SimServer"


class SimServer:
    """The scripted LLM server; usable in-process (`start()`/`stop()`) or via `tracefix sim`."""

    def __init__(self, config: SimConfig | None = None):
        self.config = config or SimConfig()
        self.injector = FaultInjector(self.config.faults)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stats_lock = threading.Lock()
        self._requests = 0
        self._by_session: dict[str, int] = {}
        self._transcripts: dict[str, list[dict]] = {}

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the sim server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> str:
        self._httpd = _Server((self.config.host, self.config.port), _Handler)
        self._httpd.sim = self
        # a short poll interval makes stop() quick (shutdown waits for the loop to notice)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="tracefix-sim", daemon=True)
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> "SimServer":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stats(self) -> dict:
        with self._stats_lock:
            return {"requests": self._requests, "by_session": dict(self._by_session),
                    "faults_injected": len(self.injector.injected)}

    def transcript(self, session: str) -> list[dict]:
        """[{"step", "messages", "tools", "response"}] of one session (record_transcripts=True)."""
        with self._stats_lock:
            return list(self._transcripts.get(session, []))

    def serves(self, model: str) -> bool:
        """Whether a request for `model` is answered (by that model, or the default one)."""
        return model in MODELS or self.config.default_model in MODELS

    # --- one completion ----------------------------------------------------------------
    def context(self, headers) -> RequestContext:
        step = headers.get("X-Demo-Step")
        try:
            step_index = int(step) if step is not None else None
        except ValueError:
            raise ApiError(400, f"X-Demo-Step must be an integer, got {step!r}") from None
        return RequestContext(
            session=headers.get("X-Demo-Session") or "anonymous", task=headers.get("X-Demo-Task"),
            step=step_index, replay=headers.get("X-Demo-Replay") in ("1", "true", "yes"),
            seed=self.config.seed, headers=dict(headers.items()), injector=self.injector,
            plan_faults=tuple(self.config.plan_faults))

    def complete(self, handler: _Handler, request: dict) -> None:
        ctx = self.context(handler.headers)
        with self._stats_lock:
            self._requests += 1
            self._by_session[ctx.session] = self._by_session.get(ctx.session, 0) + 1
        if self.config.latency_ms:
            time.sleep(self.config.latency_ms / 1000)
        handler_for = MODELS.get(request["model"]) or MODELS[self.config.default_model or ""]
        message, finish = answer_message(request, handler_for(from_legacy_functions(request), ctx))
        top = request.get("top_logprobs") if isinstance(request.get("top_logprobs"), int) else 0
        top_logprobs = top if request.get("logprobs") is True else None
        if self.config.record_transcripts:
            with self._stats_lock:
                self._transcripts.setdefault(ctx.session, []).append(
                    {"step": ctx.step, "messages": request["messages"], "tools": request.get("tools"),
                     "response": message})
        counts = usage(request, message)
        response_id = "chatcmpl-" + hashlib.sha256(
            f"{self.config.seed}|{ctx.session}|{ctx.step}|{uuid.uuid4()}".encode()).hexdigest()[:24]
        created = int(time.time())
        if not request.get("stream"):
            handler._send_json(200, completion(response_id, created, request["model"], message, finish, counts,
                                               top_logprobs))
            return
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        events = stream_events(response_id, created, request["model"], message, finish,
                               counts if include_usage else None, top_logprobs)
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Content-Length", str(sum(len(e) for e in events)))
        handler.end_headers()
        for event in events:
            handler.wfile.write(event)
        handler.wfile.flush()
