"""Per-session state and how it travels: contextvars for the session and the agent.

asyncio tasks copy the context when they are created, so sessions follow them for free.
Threads do not: run work through :class:`ContextThreadPoolExecutor` or wrap the callable
with :func:`wrap_context` so a worker thread sees the session (and the current span).
"""
from __future__ import annotations

import contextvars
import functools
import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from .attributes import canonical_json, from_json_text

_session: contextvars.ContextVar["SessionState | None"] = contextvars.ContextVar("tracefix_session", default=None)
_agent: contextvars.ContextVar["str | None"] = contextvars.ContextVar("tracefix_agent", default=None)

# Objects registered with track() outside any session: every session snapshots them.
_global_tracked: dict[str, Any] = {}


@dataclass
class PendingToolCall:
    """A tool call an LLM response asked for and no tool execution has claimed yet."""
    call_id: str
    name: str
    written_arguments: Any  # as the response wrote them: JSON text, or already a value
    step: int
    agent: str | None = None  # the agent whose LLM call asked for it

    @functools.cached_property
    def arguments(self) -> Any:
        """Decoded JSON when it parses, else the text as written: decoded when a tool call is
        matched against it, not for every response (most are never matched this way)."""
        return from_json_text(self.written_arguments)


# Tool calls a model asked for that no traced tool has claimed yet. A session whose tools are
# not wrapped with @tracefix.tool never claims them: unbounded, the list grew for the whole
# session and each claim scanned all of it. A claim comes within a few steps of its call, so
# the oldest are dropped past this many.
MAX_PENDING_TOOL_CALLS = 256


@dataclass
class SessionState:
    session_id: str
    name: str
    entrypoint: str | None = None
    inputs: dict | None = None
    span: Any = None
    replayable: bool = True
    output: Any = None
    next_step: int = 0
    current_step: int = 0
    seq: int = 0
    pending: list[PendingToolCall] = field(default_factory=list)
    tracked: dict[str, Any] = field(default_factory=dict)
    last_hashes: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def id(self) -> str:
        return self.session_id

    def set_output(self, value: Any) -> None:
        """The session's result (recorded as tracefix.session.output; the decorator sets it)."""
        self.output = value

    def begin_step(self) -> int:
        """Number a new LLM call: steps are 0..n-1 in the order calls start."""
        with self.lock:
            step = self.next_step
            self.next_step += 1
            self.current_step = step
            return step

    def next_seq(self) -> int:
        with self.lock:
            seq = self.seq
            self.seq += 1
            return seq

    def add_tool_calls(self, step: int, calls: list[tuple[str, str, Any]], agent: str | None = None) -> None:
        """Calls (id, name, arguments as the response wrote them) a tool may claim."""
        with self.lock:
            self.pending.extend(PendingToolCall(cid, name, args, step, agent) for cid, name, args in calls)
            if len(self.pending) > MAX_PENDING_TOOL_CALLS:
                del self.pending[:-MAX_PENDING_TOOL_CALLS]

    def claim_tool_call(self, name: str, arguments: dict, call_id: str | None = None) -> PendingToolCall | None:
        """The pending call for tool `name` whose arguments match, latest response first.

        A framework that knows the call's id (`call_id`) gets exactly that call. Else an
        exact match wins; otherwise the tool's arguments may hold extra parameters the
        model did not send (defaults, injected objects) as long as every argument the
        model sent agrees; otherwise the only call for this tool in the latest step that
        asked for it.
        """
        with self.lock:
            if call_id is not None:
                by_id = next((p for p in self.pending if p.call_id == call_id), None)
                if by_id is not None:
                    self.pending.remove(by_id)
                    return by_id
            candidates = [p for p in reversed(self.pending) if p.name == name]
            chosen = next((p for p in candidates if p.arguments == arguments), None)
            if chosen is None:
                chosen = next((p for p in candidates if isinstance(p.arguments, dict)
                               and all(k in arguments and arguments[k] == v for k, v in p.arguments.items())),
                              None)
            if chosen is None and candidates:
                # arguments the app reshaped (types coerced, renamed): link anyway when the
                # latest step that asked for this tool asked for it exactly once
                latest = [p for p in candidates if p.step == candidates[0].step]
                if len(latest) == 1:
                    chosen = latest[0]
            if chosen is not None:
                self.pending.remove(chosen)
            return chosen

    def tracked_objects(self) -> dict[str, Any]:
        return {**_global_tracked, **self.tracked}

    def changed_snapshots(self) -> list[tuple[str, Any, str]]:
        """(key, state, hash) of tracked objects whose state changed since this session last saw them."""
        changed = []
        for key, obj in self.tracked_objects().items():
            state = obj.snapshot()
            digest = state_hash(state)
            with self.lock:
                if self.last_hashes.get(key) == digest:
                    continue
                self.last_hashes[key] = digest
            changed.append((key, state, digest))
        return changed


def state_hash(state: Any) -> str:
    return hashlib.sha256(canonical_json(state).encode("utf-8")).hexdigest()


def current_session() -> SessionState | None:
    return _session.get()


def current_agent() -> str | None:
    return _agent.get()


def wrap_context(fn: Callable) -> Callable:
    """`fn` bound to a copy of the caller's context (session, agent, current span).

    Each call runs in its own copy, so the wrapper may be called from several threads.
    """
    ctx = contextvars.copy_context()

    def run_in_context(*args: Any, **kwargs: Any) -> Any:
        return ctx.copy().run(fn, *args, **kwargs)

    return run_in_context


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """A ThreadPoolExecutor whose tasks run in the submitter's context (session, agent, span)."""

    def submit(self, fn: Callable, /, *args: Any, **kwargs: Any):  # type: ignore[override]
        return super().submit(contextvars.copy_context().run, fn, *args, **kwargs)
