"""tracefix: OpenTelemetry tracing for LLM agents, with sessions, tools, state snapshots and replay.

Usage::

    import tracefix
    tracefix.init(endpoint="http://127.0.0.1:4318", service_name="bank-demo")  # OTLP/HTTP
    tracefix.track("db", db)                       # anything with snapshot() / restore(state)

    @tracefix.session                              # entrypoint + inputs recorded: replayable
    def run_task(task_id: str): ...                # openai/anthropic calls inside are traced

``init()`` patches ``openai`` (``chat.completions.create`` — and so the ``.stream()``
helper — ``chat.completions.parse`` and ``responses.create``; sync, async and streaming)
and ``anthropic`` (``messages.create`` and the ``messages.stream()`` helper) when they are
imported, and the agent frameworks openai-agents, LangGraph/LangChain and AG2 (``autogen``):
their agents, nodes, handoffs and tools become ``invoke_agent`` / ``execute_tool`` spans
(``tracefix.frameworks``).

API
---
``init(endpoint=None, protocol=None, headers=None, service_name=None, capture_content=None,
tracer_provider=None, redact=None, max_payload_bytes=None, span_processor=None, exporter=None,
replay_key=None, metrics=None)``
    Sets up a ``TracerProvider`` with a ``BatchSpanProcessor`` and an OTLP exporter
    (``protocol`` "http/protobuf", the default, or "grpc"; an HTTP ``endpoint`` may be the
    base URL, ``/v1/traces`` is appended), patches the SDKs, reads ``TRACEFIX_REPLAY`` and
    registers a bounded flush at exit. If the app already set an SDK provider, tracefix
    attaches to it (and adds its own OTLP exporter only when ``endpoint`` is given);
    ``tracer_provider=`` attaches to that one. ``span_processor=`` / ``exporter=`` send
    spans there instead of OTLP (tests: ``SimpleSpanProcessor(InMemorySpanExporter())``),
    on a private provider. ``redact`` is a function ``fn(key, value) -> value`` or a list of
    them, run after the built-in secret redaction. ``replay_key`` (else
    ``TRACEFIX_REPLAY_KEY``) signs each session's entrypoint and inputs for replay
    (``tracefix.replay_signing``). ``metrics=True`` (else ``TRACEFIX_METRICS``, default off)
    also records the GenAI client metrics of each LLM call (``tracefix.genai_metrics``), exported
    where the spans go. Idempotent; returns a handle with
    ``force_flush()``, ``shutdown()`` (also restores the SDK methods) and ``stats()``.
``session(name=None, *, entrypoint=None, inputs=None, session_id=None, user_id=None, metadata=None)``
    Context manager (sync and async) or decorator (``@tracefix.session`` /
    ``@tracefix.session("name")``): the root span ``session {name}``. The decorator records
    ``"module:qualname"`` and the bound arguments (JSON) so the session can be replayed,
    and the return value as output, and marks the function replayable under that name. A
    registered evaluator runs at the end. The id (uuid4
    hex unless given) reaches every span inside as ``tracefix.session.id`` and
    ``gen_ai.conversation.id``; each LLM call gets ``tracefix.step`` (0, 1, ...). A session
    opened inside another one is that same session. The handle (``as s``) has ``s.id`` and
    ``s.set_output(value)``.
``replayable(fn)``
    Marks a function that opens its session with ``with tracefix.session(entrypoint=...)``
    as one a replay may call (``tracefix.entrypoints``); call it where ``fn`` is defined.
``agent(name)``
    Context manager or decorator: ``invoke_agent {name}`` span; spans inside carry
    ``gen_ai.agent.name``.
``tool`` / ``tool(name=...)``
    Decorator for sync and async tools: ``execute_tool {name}`` span with arguments, result,
    error, and ``gen_ai.tool.call.id`` of the LLM tool call it answers (matched by name and
    arguments against the session's latest LLM responses) and that call's step.
``track(key, obj)`` / ``untrack(key)`` / ``snapshot(key, state)``
    Tracked objects are snapshotted at each step boundary when their state changed (event
    ``tracefix.snapshot`` on the LLM span) and once more at session end
    (``tracefix.snapshot.final``); ``snapshot`` records one state explicitly. A replay
    restores them (``restore(state)``).
``evaluator("pkg.mod:function")``
    Registers ``fn(inputs, output, tracked) -> bool | float | dict`` judging that
    entrypoint's sessions: ``tracefix.session.outcome / score / evaluation``.
``feedback(session_id, score, comment=None, server=None, token=None, *, step=None, label=None)``
    POSTs user feedback to the collector (``/api/v1/feedback``), or with ``step=N`` a mark on
    that step (label, score or both: ``/api/v1/sessions/{id}/annotations``); raises ``FeedbackError``.
``current_session_id()``, ``replay_active()``
``wrap_context(fn)``, ``ContextThreadPoolExecutor``
    Threads do not inherit contextvars: run work for a session through these (asyncio tasks
    inherit the session on their own).
``TracefixInstrumentor``
    The ``BaseInstrumentor`` (``tracefix.instrumentor``), also the
    ``opentelemetry_instrumentor`` entry point for ``opentelemetry-instrument``.

Environment
-----------
``TRACEFIX_CAPTURE_CONTENT=0``
    No message content, tool arguments/results, raw responses, inputs/outputs or snapshot
    states are recorded (sessions are then not replayable). Default on.
``TRACEFIX_METRICS=1``
    ``gen_ai.client.operation.duration`` and ``gen_ai.client.token.usage`` for every LLM call
    (the OpenTelemetry metrics SDK, imported only then). Default off.
``TRACEFIX_MAX_PAYLOAD_BYTES`` (default 524288)
    Longer attributes are cut with a marker, the span gets ``tracefix.truncated=true`` and
    the session ``tracefix.session.replayable=false`` (logged once).
``TRACEFIX_REPLAY_KEY``
    The replay key: each session's entrypoint, inputs and id are signed with it (HMAC-SHA256)
    so a replay worker holding the same key runs only what the app recorded. Keep it from the
    collector; it never needs it.
``TRACEFIX_REPLAY=/path/replay.json``
    Replay mode (see ``tracefix.replay_mode``); ``python -m tracefix.replay_run`` runs one.
``TRACEFIX_SERVER`` (default http://127.0.0.1:4318), ``TRACEFIX_INGEST_TOKEN`` (else ``TRACEFIX_TOKEN``)
    Where ``feedback()`` posts, and its bearer token. For spans, give the same token as
    ``OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20<token>`` (or ``init(headers=...)``).
``TRACEFIX_SERVICE_NAME``, ``TRACEFIX_EXIT_TIMEOUT`` (seconds, default 5)
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_PROTOCOL`` /
``_TRACES_PROTOCOL``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_BSP_*``
    Honoured as by any OpenTelemetry exporter.

Instrumentation never breaks the host: a failure inside tracefix is logged once (logger
``tracefix``) and the application's call proceeds; exceptions from the SDK are re-raised
untouched.
"""
from __future__ import annotations

from .api import agent, current_session_id, replay_active, replayable, session, snapshot, track, untrack
from .configure import TracefixHandle
from .start import init
from .context import ContextThreadPoolExecutor, wrap_context
from .evaluators import evaluator
from .feedback import FeedbackError, feedback
from .tools import tool
from .version import __version__

__all__ = [
    "init", "session", "replayable", "agent", "tool", "track", "untrack", "snapshot", "evaluator", "feedback",
    "current_session_id", "replay_active", "wrap_context", "ContextThreadPoolExecutor",
    "TracefixHandle", "FeedbackError", "__version__",
]


def __getattr__(name: str):
    if name == "TracefixInstrumentor":  # imported on demand: it pulls opentelemetry-instrumentation
        from .instrumentor import TracefixInstrumentor

        return TracefixInstrumentor
    raise AttributeError(f"module 'tracefix' has no attribute {name!r}")
