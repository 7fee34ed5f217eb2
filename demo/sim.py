"""The scripted OpenAI-compatible LLM server (a test and demo component, not a real model).

Serves `POST /v1/chat/completions` (non-streaming and SSE streaming with tool-call deltas
and a final usage chunk; `logprobs`/`top_logprobs`, `web_search_options` (url_citation
annotations) and the legacy `functions` → `function_call` shape as the API answers them), `GET /v1/models[/{id}]`, `GET /healthz`, `GET /_sim/stats` and, with
transcripts on, `GET /_sim/sessions/{session}` (every exchange and injected fault) on the
standard library's ThreadingHTTPServer. Models are entries of :data:`MODELS`:
`handler(request_body, context) -> assistant message dict`; `bank-agent` plays the banking
demo's agents (:mod:`tracefix.demo.policy`) and `warehouse-crew` the warehouse demo's
(:mod:`tracefix.demo.warehouse_model`), both with fault injection
(:mod:`tracefix.demo.faults`); `plan-agent` plays any agent whose task spells out a tool plan
(:mod:`tracefix.demo.plan_agent`, faults from ``plan_faults``); `sim-analyst` stands in for
tracefix's own LLM (:mod:`tracefix.demo.analyst`). Tests add models with :func:`register_model`.

The app identifies itself in headers, so request bodies (what tracefix records and
fingerprints) stay clean: `X-Demo-Task`, `X-Demo-Step` (its 0-based count of LLM calls in
the run), `X-Demo-Session`, and `X-Demo-Replay: 1` inside a replay.

In-process use: ``server = SimServer(SimConfig(seed=1)); base_url = server.start(); ...;
server.stop()``.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from . import analyst
from .faults import FaultConfig, FaultInjector, unit_draw
from .plan_agent import MODEL as PLAN_MODEL, plan_agent
from .policy import decide
from .warehouse_model import MODEL as WAREHOUSE_MODEL, decide as warehouse_decide


@dataclass
class RequestContext:
    """What a model handler knows besides the request body."""
    session: str
    task: str | None
    step: int | None
    replay: bool
    seed: int
    headers: dict[str, str]
    injector: FaultInjector
    plan_faults: tuple = ()  # plan_agent.PlanFault: the plan-agent model's flaws

    def draw(self, purpose: str) -> float:
        """A reproducible number in [0, 1) for this session, step and purpose."""
        return unit_draw(self.seed, self.session, self.step, purpose)


ModelHandler = Callable[[dict, RequestContext], dict]
MAX_BODY_BYTES = 32 * 1024 * 1024


def _text(content: Any) -> Any:
    """Message content as plain text: the parts of a content array joined (the policy reads text)."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content


def scripted_team(decide_next: Callable[..., Any]) -> ModelHandler:
    """A model handler for a scripted team: `decide_next(messages, tools, reads_edits)` gives
    the next message with the faults it could host; the injector picks one or none."""
    def handle(body: dict, ctx: RequestContext) -> dict:
        messages = [{**m, "content": _text(m.get("content"))} for m in body["messages"]]
        reads_edits = ctx.injector.follow_draw(ctx.session, ctx.step)
        decision = decide_next(messages, body.get("tools"), reads_edits)
        faulty = ctx.injector.apply(decision, messages, task=ctx.task, session=ctx.session,
                                    step=ctx.step, replay=ctx.replay)
        return faulty or decision.message
    return handle


bank_agent = scripted_team(decide)

# the agents of the banking app and of the warehouse crew, a domain-free plan follower,
# and the scripted stand-in for tracefix's own LLM
MODELS: dict[str, ModelHandler] = {"bank-agent": bank_agent, WAREHOUSE_MODEL: scripted_team(warehouse_decide),
                                   analyst.MODEL: analyst.handle, PLAN_MODEL: plan_agent}


def register_model(name: str, handler: ModelHandler) -> None:
    """Serve `handler` under model `name` too (tests and benchmarks add their own)."""
    MODELS[name] = handler


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


class ApiError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def _model_card(name: str) -> dict:
    return {"id": name, "object": "model", "created": 0, "owned_by": "tracefix-sim"}


def _tokens(value: Any) -> int:
    """A deterministic token estimate: about four characters per token."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return max(1, len(text) // 4)


def _split(text: str, parts: int) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


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
            self._send_json(200, {"object": "list", "data": [_model_card(name) for name in sorted(MODELS)]})
        elif path.startswith("/v1/models/"):
            name = path[len("/v1/models/"):]
            if name in MODELS:
                self._send_json(200, _model_card(name))
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
            request = self._parse(body)
            self.server.sim.complete(self, request)
        except ApiError as exc:
            self._send_json(exc.status, exc.body())
        except Exception as exc:  # a bug in a model must not take the server down
            self._send_json(500, ApiError(500, f"scripted model failed: {type(exc).__name__}: {exc}",
                                          type_="server_error").body())

    def _parse(self, body: bytes) -> dict:
        try:
            request = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ApiError(400, f"request body is not valid JSON: {exc}") from None
        if not isinstance(request, dict):
            raise ApiError(400, "request body must be a JSON object")
        model = request.get("model")
        if not isinstance(model, str) or not model:
            raise ApiError(400, "you must provide a model parameter", param="model", code="missing_required_parameter")
        if model not in MODELS and self.server.sim.config.default_model not in MODELS:
            raise ApiError(404, f"The model '{model}' does not exist", param="model", code="model_not_found")
        messages = request.get("messages")
        if messages is None:
            raise ApiError(400, "missing required parameter: 'messages'", param="messages",
                           code="missing_required_parameter")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "'messages' must be a non-empty array", param="messages")
        for i, m in enumerate(messages):
            _check_message(i, m)
        tools = request.get("tools")
        if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)):
            raise ApiError(400, "'tools' must be an array of objects", param="tools")
        return request


def _check_message(i: int, m: Any) -> None:
    """The shape checks the OpenAI API makes, so models only ever see well-formed messages."""
    where = f"messages[{i}]"
    if not isinstance(m, dict) or m.get("role") not in ("system", "developer", "user", "assistant", "tool",
                                                        "function"):
        raise ApiError(400, f"{where} must be an object with a valid role", param=where)
    content = m.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise ApiError(400, f"{where}.content must be a string or an array of parts", param=f"{where}.content")
    calls = m.get("tool_calls")
    if calls is not None:
        if m["role"] != "assistant" or not isinstance(calls, list):
            raise ApiError(400, f"{where}.tool_calls must be an array on an assistant message",
                           param=f"{where}.tool_calls")
        for j, call in enumerate(calls):
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) \
                    or not isinstance(fn.get("arguments", ""), str) or not isinstance(call.get("id", ""), str):
                raise ApiError(400, f"{where}.tool_calls[{j}] needs an id and a function with a name and "
                               "string arguments", param=f"{where}.tool_calls[{j}]")
    if m["role"] == "function" and not isinstance(m.get("name"), str):
        raise ApiError(400, f"{where}.name is required on a function message", param=f"{where}.name")
    if m["role"] == "tool" and not isinstance(m.get("tool_call_id"), str):
        raise ApiError(400, f"{where}.tool_call_id is required on a tool message", param=f"{where}.tool_call_id")


def _from_legacy_functions(request: dict) -> dict:
    """A request in the legacy `functions` shape as the tools shape the models read: the
    functions as tools, an assistant `function_call` as one tool call, a `function` message
    as its tool result (ids made up from the order)."""
    if not request.get("functions") or request.get("tools"):
        return request
    messages = []
    for i, m in enumerate(request["messages"]):
        if m.get("role") == "assistant" and m.get("function_call"):
            call = {"id": f"call_legacy_{i}", "type": "function", "function": m["function_call"]}
            messages.append({**{k: v for k, v in m.items() if k != "function_call"}, "tool_calls": [call]})
        elif m.get("role") == "function":
            messages.append({"role": "tool", "tool_call_id": f"call_legacy_{i - 1}", "content": m.get("content")})
        else:
            messages.append(m)
    return {**request, "messages": messages,
            "tools": [{"type": "function", "function": f} for f in request["functions"]]}


def _as_legacy_function_call(message: dict) -> dict:
    """The model's answer in the legacy shape: its first tool call as `function_call`."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    return {"role": "assistant", "content": message.get("content"), "function_call": calls[0]["function"]}


def _token_logprobs(text: str, top: int) -> list[dict]:
    """Deterministic logprobs of `text`, one entry per word-ish token (a scripted model
    has no probabilities: these only exercise the protocol)."""
    tokens = re.findall(r"\s*\S+|\s+", text)
    out = []
    for token in tokens:
        logprob = -round((len(token) % 7) / 10, 4)
        alternatives = [{"token": token, "bytes": list(token.encode()), "logprob": logprob}]
        alternatives += [{"token": f"{token}~{k}", "bytes": list(f"{token}~{k}".encode()), "logprob": logprob - k - 1}
                         for k in range(max(0, top - 1))]
        out.append({"token": token, "bytes": list(token.encode()), "logprob": logprob,
                    "top_logprobs": alternatives[:top]})
    return out


def _url_citations(text: str) -> list[dict]:
    """What a search model cites for `text` (requests with `web_search_options`)."""
    return [{"type": "url_citation", "url_citation": {"start_index": 0, "end_index": min(len(text), 24),
                                                      "title": "tracefix sim source",
                                                      "url": "https://sim.tracefix.invalid/source"}}]


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
        message = handler_for(_from_legacy_functions(request), ctx)
        message = {"role": "assistant", "content": message.get("content"),
                   **({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {})}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        if request.get("functions") and not request.get("tools"):
            message = _as_legacy_function_call(message)
            finish = "function_call" if message.get("function_call") else "stop"
        if request.get("web_search_options") is not None and message.get("content"):
            message["annotations"] = _url_citations(message["content"])
        top = request.get("top_logprobs") if isinstance(request.get("top_logprobs"), int) else 0
        logprobs = request.get("logprobs") is True
        if self.config.record_transcripts:
            with self._stats_lock:
                self._transcripts.setdefault(ctx.session, []).append(
                    {"step": ctx.step, "messages": request["messages"], "tools": request.get("tools"),
                     "response": message})
        usage = {"prompt_tokens": _tokens(request["messages"]) + (_tokens(request["tools"]) if request.get("tools") else 0),
                 "completion_tokens": _tokens(message.get("content") or message.get("tool_calls") or "")}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        response_id = "chatcmpl-" + hashlib.sha256(
            f"{self.config.seed}|{ctx.session}|{ctx.step}|{uuid.uuid4()}".encode()).hexdigest()[:24]
        created = int(time.time())
        if request.get("stream"):
            include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
            self._stream(handler, response_id, created, request["model"], message, finish,
                         usage if include_usage else None, top if logprobs else None)
            return
        choice_logprobs = {"content": _token_logprobs(message.get("content") or "", top), "refusal": None} \
            if logprobs else None
        handler._send_json(200, {
            "id": response_id, "object": "chat.completion", "created": created, "model": request["model"],
            "system_fingerprint": "tracefix-sim",
            "choices": [{"index": 0, "message": message, "logprobs": choice_logprobs, "finish_reason": finish}],
            "usage": usage})

    @staticmethod
    def _stream(handler: _Handler, response_id: str, created: int, model: str, message: dict,
                finish: str, usage: dict | None, top_logprobs: int | None = None) -> None:
        """SSE chunks as the API sends them: content in pieces (each with its tokens' logprobs
        when asked), then annotations, tool-call deltas or the legacy function_call in
        pieces, the finish reason, usage last."""
        def chunk(delta: dict, finish_reason: str | None = None, choices: bool = True, logprobs: Any = None,
                  **extra: Any) -> bytes:
            payload = {"id": response_id, "object": "chat.completion.chunk", "created": created, "model": model,
                       "system_fingerprint": "tracefix-sim",
                       "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}]
                       if choices else [], **extra}
            return b"data: " + json.dumps(payload).encode() + b"\n\n"

        events = [chunk({"role": "assistant", "content": ""})]
        if message.get("content"):
            events += [chunk({"content": piece}, logprobs=None if top_logprobs is None else
                             {"content": _token_logprobs(piece, top_logprobs), "refusal": None})
                       for piece in _split(message["content"], 3)]
        if message.get("annotations"):
            events.append(chunk({"annotations": message["annotations"]}))
        if message.get("function_call"):
            fn = message["function_call"]
            events.append(chunk({"function_call": {"name": fn["name"], "arguments": ""}}))
            events += [chunk({"function_call": {"arguments": piece}}) for piece in _split(fn["arguments"], 3)]
        for index, call in enumerate(message.get("tool_calls") or []):
            fn = call["function"]
            events.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                                 "function": {"name": fn["name"], "arguments": ""}}]}))
            events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                       for piece in _split(fn["arguments"], 3)]
        events.append(chunk({}, finish))
        if usage is not None:
            events.append(chunk({}, choices=False, usage=usage))
        events.append(b"data: [DONE]\n\n")
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Content-Length", str(sum(len(e) for e in events)))
        handler.end_headers()
        for event in events:
            handler.wfile.write(event)
        handler.wfile.flush()
