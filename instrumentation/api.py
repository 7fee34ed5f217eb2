"""Sessions, agents and tracked state: the spans an application opens around its LLM calls."""
from __future__ import annotations

import functools
import inspect
import json
import uuid
from typing import Any, Callable

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from . import runtime, semconv as sc
from .attributes import dumps, warn_once
from .context import _agent, _global_tracked, _session, SessionState, current_agent, current_session, state_hash
from .entrypoints import mark
from .evaluators import entrypoint_of, get_evaluator, normalize_result
from .spans import add_snapshot_event, common_attributes, set_span_attributes


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _is_json_native(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return True
    except (TypeError, ValueError):
        return False


def _bind_inputs(signature: inspect.Signature | None, args: tuple, kwargs: dict) -> dict:
    """The call's arguments by parameter name (defaults filled in): what a replay passes back."""
    if signature is None:
        return dict(kwargs)
    try:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
    except TypeError:
        return dict(kwargs)
    inputs: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            inputs.update(value)
        else:
            inputs[name] = list(value) if kind is inspect.Parameter.VAR_POSITIONAL else value
    return inputs


def _signature(fn: Callable) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


class _Scope:
    """Shared shape of session() and agent(): a context manager (sync and async) that is
    also a decorator; each decorated call opens a fresh scope."""

    def __enter__(self):
        return self._start()

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._finish(exc)
        return False

    async def __aenter__(self):
        return self._start()

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        self._finish(exc)
        return False

    def _start(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _finish(self, exc: BaseException | None) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class _SessionScope(_Scope):
    def __init__(self, name: str | None = None, *, entrypoint: str | None = None, inputs: dict | None = None,
                 session_id: str | None = None, user_id: str | None = None, metadata: dict | None = None):
        self.name = name
        self.entrypoint = entrypoint
        self.inputs = inputs
        self.session_id = session_id
        self.user_id = user_id
        self.metadata = metadata
        self._state: SessionState | None = None
        self._nested = False
        self._tokens: tuple = ()
        self._replay_claim: dict | None = None

    def __call__(self, fn: Callable) -> Callable:
        entrypoint = self.entrypoint or entrypoint_of(fn)
        name = self.name or fn.__name__
        signature = _signature(fn)
        options = dict(session_id=self.session_id, user_id=self.user_id, metadata=self.metadata)

        def scope_for(args: tuple, kwargs: dict) -> _SessionScope:
            inputs = self.inputs if self.inputs is not None else _bind_inputs(signature, args, kwargs)
            return _SessionScope(name, entrypoint=entrypoint, inputs=inputs, **options)

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_session_wrapper(*args: Any, **kwargs: Any) -> Any:
                async with scope_for(args, kwargs) as state:
                    result = await fn(*args, **kwargs)
                    state.set_output(result)
                    return result
            wrapper = async_session_wrapper
        else:
            @functools.wraps(fn)
            def session_wrapper(*args: Any, **kwargs: Any) -> Any:
                with scope_for(args, kwargs) as state:
                    result = fn(*args, **kwargs)
                    state.set_output(result)
                    return result
            wrapper = session_wrapper
        wrapper.__tracefix_entrypoint__ = entrypoint  # type: ignore[attr-defined]
        mark(wrapper, entrypoint)  # a replay may call it under this name (tracefix.entrypoints)
        return wrapper

    def _start(self) -> SessionState:
        try:
            return self._open()
        except Exception:
            warn_once("session-start", "tracefix: could not open a session; the code runs untraced", exc_info=True)
            self._nested = True  # nothing to finish
            return SessionState(session_id=self.session_id or uuid.uuid4().hex, name=self.name or "session")

    def _open(self) -> SessionState:
        outer = current_session()
        if outer is not None:  # a session inside a session is the same session
            self._nested = True
            return outer
        controller = runtime.replay
        claim = controller.claim_session() if controller is not None else None
        self._replay_claim = claim
        session_id = (claim or {}).get("session_id") or self.session_id or uuid.uuid4().hex
        name = self.name or (self.entrypoint.rsplit(":", 1)[-1] if self.entrypoint else "session")
        capture = runtime.settings.capture_content
        state = SessionState(session_id=session_id, name=name, entrypoint=self.entrypoint, inputs=self.inputs)
        # "__main__:fn": a program whose main module cannot be imported again (interactive, stdin)
        state.replayable = (bool(self.entrypoint) and not self.entrypoint.startswith("__main__:") and capture
                            and _is_json_native(self.inputs or {}))
        attrs: dict[str, Any] = {
            sc.SESSION_SPAN: True,
            **common_attributes(state, current_agent(), step=0),
            sc.ENTRYPOINT: self.entrypoint,
            sc.INPUTS: dumps(self.inputs or {}) if capture else None,
            sc.USER_ID: self.user_id,
            sc.METADATA: dumps(self.metadata) if self.metadata else None,
        }
        if claim:
            intervention = claim.get("intervention")
            attrs[sc.PARENT_SESSION_ID] = claim.get("parent_session_id")
            if intervention:
                attrs[sc.INTERVENTION_ID] = intervention.get("id")
                attrs[sc.INTERVENTION] = dumps(intervention)
        span = runtime.tracer().start_span(f"session {name}")
        set_span_attributes(span, attrs, state)
        state.span = span
        self._state = state
        self._tokens = (otel_context.attach(trace.set_span_in_context(span)), _session.set(state))
        return state

    def _finish(self, exc: BaseException | None) -> None:
        if self._nested or self._state is None:
            return
        state, span = self._state, self._state.span
        evaluation = None
        try:
            controller = runtime.replay
            if self._replay_claim is not None and controller is not None:
                controller.before_session_end(state)
            # the state after the last step: its own event name, because it belongs to no step
            for key, value in state.tracked_objects().items():
                snap = value.snapshot()
                add_snapshot_event(span, key, snap, state_hash(snap), state.next_step, state,
                                   name=sc.SNAPSHOT_FINAL_EVENT)
            evaluation = _run_evaluator(state)
            capture = runtime.settings.capture_content
            attrs: dict[str, Any] = {
                sc.FINAL_OUTPUT: dumps(state.output) if capture and state.output is not None else None,
            }
            if evaluation is not None:
                attrs[sc.OUTCOME] = "success" if evaluation.get("success") else "failure"
                attrs[sc.OUTCOME_SCORE] = evaluation.get("score")
                attrs[sc.EVALUATION] = dumps(evaluation)
            set_span_attributes(span, attrs, state)
            # decided last: anything truncated above also makes the session not replayable
            span.set_attribute(sc.REPLAYABLE, state.replayable)
            if exc is not None:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, _error_text(exc)))
                span.set_attribute(sc.ERROR_TYPE, type(exc).__qualname__)
        except Exception:
            warn_once("session-finish", "tracefix: could not finish session %s", state.session_id, exc_info=True)
        finally:
            span.end()
            otel_token, session_token = self._tokens
            _session.reset(session_token)
            otel_context.detach(otel_token)
        controller = runtime.replay
        if self._replay_claim is not None and controller is not None:
            controller.on_session_end(state, evaluation, _error_text(exc) if exc is not None else None)


def _run_evaluator(state: SessionState) -> dict | None:
    fn = get_evaluator(state.entrypoint)
    if fn is None:
        return None
    try:
        return normalize_result(fn(state.inputs or {}, state.output, state.tracked_objects()))
    except Exception as exc:
        warn_once(f"evaluator:{state.entrypoint}", "tracefix: evaluator for %s failed", state.entrypoint,
                  exc_info=True)
        return {"success": False, "score": 0.0, "error": _error_text(exc)}


def session(name: str | Callable | None = None, *, entrypoint: str | None = None, inputs: dict | None = None,
            session_id: str | None = None, user_id: str | None = None, metadata: dict | None = None):
    """Open a session (one task run): ``with tracefix.session(...) as s:`` or ``@tracefix.session``.

    The decorator records the function's "module:qualname" as entrypoint and its bound
    arguments as JSON inputs, and its return value as the session output: exactly what a
    replay needs to call it again. Inside a session every span carries its id.
    """
    if callable(name):
        return _SessionScope()(name)
    return _SessionScope(name, entrypoint=entrypoint, inputs=inputs, session_id=session_id,
                         user_id=user_id, metadata=metadata)


def replayable(fn: Callable) -> Callable:
    """Mark `fn` as an entrypoint a replay may call, by its "module:qualname": a function
    that opens its session itself (``with tracefix.session(entrypoint="pkg.mod:fn", ...)``).
    Call it where the function is defined (``tracefix.replayable(fn)`` or as a decorator), so
    the mark is there when a replay imports the module. ``@tracefix.session`` marks its own."""
    mark(fn, entrypoint_of(fn))
    return fn


class _AgentScope(_Scope):
    def __init__(self, name: str, attributes: dict | None = None):
        self.name = name
        self.attributes = attributes  # the framework patches add where the agent came from
        self._span = None
        self._tokens: tuple = ()

    def __call__(self, fn: Callable) -> Callable:
        name = self.name
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_agent_wrapper(*args: Any, **kwargs: Any) -> Any:
                async with _AgentScope(name):
                    return await fn(*args, **kwargs)
            return async_agent_wrapper

        @functools.wraps(fn)
        def agent_wrapper(*args: Any, **kwargs: Any) -> Any:
            with _AgentScope(name):
                return fn(*args, **kwargs)
        return agent_wrapper

    def _start(self) -> "_AgentScope":
        state = current_session()
        try:
            span = runtime.tracer().start_span(f"invoke_agent {self.name}")
            set_span_attributes(span, {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
                                       **common_attributes(state, self.name), **(self.attributes or {})}, state)
        except Exception:
            warn_once("agent-start", "tracefix: could not open an agent span", exc_info=True)
            span = trace.INVALID_SPAN
        self._span = span
        self._tokens = (otel_context.attach(trace.set_span_in_context(span)), _agent.set(self.name))
        return self

    def _finish(self, exc: BaseException | None) -> None:
        span = self._span
        try:
            if exc is not None:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, _error_text(exc)))
                span.set_attribute(sc.ERROR_TYPE, type(exc).__qualname__)
        finally:
            span.end()
            otel_token, agent_token = self._tokens
            _agent.reset(agent_token)
            otel_context.detach(otel_token)


def agent(name: str | Callable):
    """``with tracefix.agent("Orchestrator"):`` or ``@tracefix.agent("Orchestrator")``: an
    `invoke_agent {name}` span; LLM and tool spans inside carry gen_ai.agent.name."""
    if callable(name):
        return _AgentScope(name.__name__)(name)
    return _AgentScope(name)


def track(key: str, obj: Any) -> Any:
    """Snapshot `obj` (it has snapshot() -> JSON state and restore(state)) at every step
    boundary where its state changed; a replay restores it. Returns `obj`.

    Called inside a session it is tracked for that session; outside, for every session.
    """
    if not (callable(getattr(obj, "snapshot", None)) and callable(getattr(obj, "restore", None))):
        raise TypeError(f"tracefix.track({key!r}, ...): the object needs snapshot() and restore(state) methods")
    state = current_session()
    if state is not None:
        state.tracked[key] = obj
    else:
        _global_tracked[key] = obj
    return obj


def untrack(key: str) -> None:
    state = current_session()
    if state is not None:
        state.tracked.pop(key, None)
    _global_tracked.pop(key, None)


def snapshot(key: str, state_value: Any) -> None:
    """Record `state_value` (JSON) as the state `key` at the current step, as an event on the
    current span."""
    try:
        session_state = current_session()
        span = trace.get_current_span()
        if not span.is_recording() and session_state is not None:
            span = session_state.span
        digest = state_hash(state_value)
        step = session_state.current_step if session_state is not None else None
        if session_state is not None:
            with session_state.lock:
                session_state.last_hashes[key] = digest
        add_snapshot_event(span, key, state_value, digest, step, session_state)
    except Exception:
        warn_once("snapshot", "tracefix: could not record snapshot %r", key, exc_info=True)


def current_session_id() -> str | None:
    state = current_session()
    return state.session_id if state is not None else None


def replay_active() -> bool:
    """True in a process that replays a recorded session (TRACEFIX_REPLAY was set at init)."""
    return runtime.replay is not None
