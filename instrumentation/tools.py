"""`@tracefix.tool`: an `execute_tool {name}` span per call, linked to the LLM call that asked for it.

The application does not pass the tool call id; we find it by matching the tool's name
and arguments against the tool calls the session's latest LLM responses requested. The
framework patches (`tracefix.frameworks`) run their tools through the same `ToolCall`,
with the id the framework knows; a `@tracefix.tool` function run by such a framework tool
of the same name is that tool, so it adds no second span.
"""
from __future__ import annotations

import builtins
import contextvars
import functools
import inspect
import json
from typing import Any, Callable

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from . import runtime, semconv as sc
from .attributes import dumps, to_jsonable, warn_once
from .context import current_agent, current_session
from .fingerprints import fingerprint_tool
from .spans import common_attributes, set_span_attributes

_OMIT = object()

# The tool execution running in this context (its span is current inside it).
_active_tool: contextvars.ContextVar["ToolCall | None"] = contextvars.ContextVar("tracefix_tool", default=None)


def _json_value(value: Any) -> Any:
    """`value` as JSON data, or _OMIT for objects that have no stable JSON form (a db handle)."""
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        pass
    if callable(getattr(value, "model_dump", None)):
        return to_jsonable(value)
    return _OMIT


def tool_arguments(signature: inspect.Signature | None, args: tuple, kwargs: dict) -> dict:
    """The call's JSON arguments by parameter name; `self`/`cls` and non-JSON objects left out."""
    if signature is None:
        pairs = dict(kwargs)
    else:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            pairs = dict(kwargs)
        else:
            pairs = {}
            for name, value in bound.arguments.items():
                kind = signature.parameters[name].kind
                if kind is inspect.Parameter.VAR_KEYWORD:
                    pairs.update(value)
                elif name not in ("self", "cls"):
                    pairs[name] = list(value) if kind is inspect.Parameter.VAR_POSITIONAL else value
    out = {}
    for name, value in pairs.items():
        converted = _json_value(value)
        if converted is not _OMIT:
            out[name] = converted
    return out


class RecordedToolError(Exception):
    """A tool error replayed from a cassette whose exception type is not a builtin."""


def recorded_exception(error: str) -> Exception:
    type_name, _, message = error.partition(": ")
    exc_type = getattr(builtins, type_name, None)
    if isinstance(exc_type, type) and issubclass(exc_type, Exception):
        try:
            return exc_type(message)
        except Exception:
            pass
    return RecordedToolError(error)


class ToolCall:
    """One tool execution: its span, its link to the LLM call, and the replay decision."""

    def __init__(self, name: str, arguments: Any, call_id: str | None = None, *, framework: str | None = None,
                 servable: bool = True, attributes: dict | None = None):
        """`call_id`: the LLM tool call it answers, when the caller knows it (frameworks do).
        `framework`: who ran it ("openai-agents", ...). `servable=False`: a replay matches it
        against the recording but never serves it: framework control flow (a handoff) must
        really happen."""
        self.name = name
        self.framework = framework
        self.session = current_session()
        self.arguments = arguments
        self.inner_error: BaseException | None = None  # raised inside and handled by the framework
        pending = self.session.claim_tool_call(name, arguments, call_id) if self.session is not None else None
        self.call_id = pending.call_id if pending else call_id
        self.step = pending.step if pending else (self.session.current_step if self.session else None)
        self.fingerprint = fingerprint_tool(name, arguments)
        self.decision = None
        self.servable = servable
        controller = runtime.replay
        if controller is not None and self.session is not None and controller.owns(self.session):
            self.decision = controller.on_tool_call(self.step, self.call_id, name, self.fingerprint)
        capture = runtime.settings.capture_content
        attrs = {
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
            sc.GEN_AI_TOOL_NAME: name,
            sc.GEN_AI_TOOL_CALL_ID: self.call_id,
            sc.GEN_AI_TOOL_CALL_ARGUMENTS: dumps(arguments) if capture else None,
            sc.TOOL_FINGERPRINT: self.fingerprint,
            # a tool run outside any agent scope (a graph's tool node) belongs to the agent that asked for it
            **common_attributes(self.session, current_agent() or (pending.agent if pending else None), self.step),
            sc.CALL_SEQ: self.session.next_seq() if self.session is not None else None,
            sc.REPLAY_SOURCE: self.decision.source if self.decision is not None else None,
            sc.FRAMEWORK: framework,
            **(attributes or {}),
        }
        if self.decision is not None and self.decision.divergence is not None:
            attrs[sc.DIVERGENCE] = dumps(self.decision.divergence)
        self.span = runtime.tracer().start_span(f"execute_tool {name}")
        set_span_attributes(self.span, attrs, self.session)
        self._token = None

    @property
    def served(self) -> bool:
        """True when the result comes from the cassette or the intervention: the tool does not run."""
        return self.servable and self.decision is not None and self.decision.source != "live"

    def serve(self) -> Any:
        decision = self.decision
        if decision.error:
            exc = recorded_exception(decision.error)
            self.fail(exc)
            raise exc
        self.finish(decision.result)
        return decision.result

    def enter(self) -> None:
        self._token = (otel_context.attach(trace.set_span_in_context(self.span)), _active_tool.set(self))

    def exit(self) -> None:
        if self._token is not None:
            otel_token, tool_token = self._token
            _active_tool.reset(tool_token)
            otel_context.detach(otel_token)
            self._token = None

    def finish(self, result: Any, error: BaseException | str | None = None) -> None:
        """Record the result; `error` (or an error raised inside and handled by the
        framework, which then hands the model a message) marks the span failed too."""
        try:
            if runtime.settings.capture_content:
                set_span_attributes(self.span, {sc.GEN_AI_TOOL_CALL_RESULT: dumps(result)}, self.session)
            error = error if error is not None else self.inner_error
            if error is not None:
                self._set_error(error)
        except Exception:
            warn_once("tool-result", "tracefix: could not record a tool result", exc_info=True)
        self.span.end()

    def _set_error(self, error: BaseException | str) -> None:
        if isinstance(error, BaseException):
            self.span.record_exception(error)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            self.span.set_attribute(sc.ERROR_TYPE, type(error).__qualname__)
        else:
            self.span.set_status(Status(StatusCode.ERROR, str(error)))
            self.span.set_attribute(sc.ERROR_TYPE, "ToolError")

    def fail(self, exc: BaseException) -> None:
        try:
            self._set_error(exc)
        except Exception:
            warn_once("tool-error", "tracefix: could not record a tool error", exc_info=True)
        self.span.end()


def _framework_runs(tool_name: str) -> ToolCall | None:
    """The framework tool execution this call of `tool_name` is the body of, if any."""
    outer = _active_tool.get()
    return outer if outer is not None and outer.framework and outer.name == tool_name else None


def _begin(name: str, signature: inspect.Signature | None, args: tuple, kwargs: dict) -> ToolCall | None:
    try:
        return ToolCall(name, tool_arguments(signature, args, kwargs))
    except Exception:
        warn_once("tool-begin", "tracefix: could not trace tool %s; it runs untraced", name, exc_info=True)
        return None


def tool(fn: Callable | None = None, *, name: str | None = None) -> Callable:
    """``@tracefix.tool`` / ``@tracefix.tool(name="transfer")`` on sync or async functions."""
    if fn is None:
        return lambda f: tool(f, name=name)
    tool_name = name or fn.__name__
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def async_tool_wrapper(*args: Any, **kwargs: Any) -> Any:
            outer = _framework_runs(tool_name)
            if outer is not None:  # the framework's span is this tool's span
                try:
                    return await fn(*args, **kwargs)
                except Exception as exc:
                    outer.inner_error = exc
                    raise
            call = _begin(tool_name, signature, args, kwargs)
            if call is None:
                return await fn(*args, **kwargs)
            if call.served:
                return call.serve()
            call.enter()
            try:
                result = await fn(*args, **kwargs)
            except BaseException as exc:
                call.exit()
                call.fail(exc)
                raise
            call.exit()
            call.finish(result)
            return result
        async_tool_wrapper.__tracefix_tool__ = tool_name  # type: ignore[attr-defined]
        return async_tool_wrapper

    @functools.wraps(fn)
    def tool_wrapper(*args: Any, **kwargs: Any) -> Any:
        outer = _framework_runs(tool_name)
        if outer is not None:  # the framework's span is this tool's span
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                outer.inner_error = exc
                raise
        call = _begin(tool_name, signature, args, kwargs)
        if call is None:
            return fn(*args, **kwargs)
        if call.served:
            return call.serve()
        call.enter()
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            call.exit()
            call.fail(exc)
            raise
        call.exit()
        call.finish(result)
        return result
    tool_wrapper.__tracefix_tool__ = tool_name  # type: ignore[attr-defined]
    return tool_wrapper
