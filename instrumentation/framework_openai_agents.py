"""openai-agents (the ``agents`` package, tested with 0.24): agents, handoffs, function tools.

* ``invoke_agent {Agent.name}`` per turn of the run loop (``run_single_turn`` and its
  streamed twin): the model call of that turn carries the agent's name;
* ``execute_tool {tool}`` per function tool run, with the SDK's ``tool_call_id``; served from
  the cassette in a replay (the tool does not run again);
* ``execute_tool transfer_to_...`` per handoff with ``tracefix.handoff.from/to`` (never
  served: the handoff itself must happen in a replay too).

The SDK's own tracing (its trace processors) is separate and untouched: turning it off
(``set_tracing_disabled``) does not turn these spans off. When one of its processors already
bridges its spans to OpenTelemetry (OpenInference, OpenLLMetry, Logfire) while its tracing is
on, these patches pass through, so agents and tools are recorded once.
"""
from __future__ import annotations

import sys
from typing import Any

from . import semconv as sc
from .frameworks import Patch, agent_turn, arun_tool, begin_tool, decoded_arguments, may_defer, said_aside

FRAMEWORK = "openai-agents"
# trace processors that turn the SDK's spans into OpenTelemetry spans
_OTEL_BRIDGES = ("openinference.", "opentelemetry.", "logfire.", "traceloop.")


def _otel_bridge() -> str | None:
    """The module of the SDK trace processor that exports OpenTelemetry spans while the SDK's
    tracing is on (OpenInference's or OpenLLMetry's instrumentor, Logfire), else None: an
    instrumentor whose processor sees no span (tracing off) records nothing."""
    try:
        from agents.tracing import get_trace_provider

        provider = get_trace_provider()
        if getattr(provider, "_disabled", False):
            return None
        processors = getattr(getattr(provider, "_multi_processor", None), "_processors", ())
        return next((type(p).__module__ for p in processors if type(p).__module__.startswith(_OTEL_BRIDGES)), None)
    except Exception:
        return None


def _stepping_aside() -> bool:
    try:
        return may_defer() and said_aside(FRAMEWORK, _otel_bridge())
    except Exception:
        return False


async def _turn(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    if _stepping_aside():
        return await wrapped(*args, **kwargs)
    try:
        name = kwargs["bindings"].public_agent.name
    except Exception:  # a signature we do not know: run it untraced
        return await wrapped(*args, **kwargs)
    async with agent_turn(name, FRAMEWORK):
        return await wrapped(*args, **kwargs)


async def _function_tool(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    function_tool, context = kwargs.get("function_tool"), kwargs.get("context")
    if function_tool is None or _stepping_aside():
        return await wrapped(*args, **kwargs)
    call = begin_tool(function_tool.name, decoded_arguments(kwargs.get("arguments")),
                      getattr(context, "tool_call_id", None), FRAMEWORK)
    result_type = getattr(sys.modules.get(wrapped.__module__), "_FunctionToolInvocationResult", None)

    def serve(result: Any, error: str | None) -> Any:
        # the SDK hands a failing tool's message to the model as its output: so did the recording
        return result_type(result) if result_type is not None else result

    return await arun_tool(call, lambda: wrapped(*args, **kwargs),
                           record=lambda out: (getattr(out, "output", out), None), serve=serve)


async def _handoffs(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    run_handoffs = kwargs.get("run_handoffs") or []
    if not run_handoffs or _stepping_aside():
        return await wrapped(*args, **kwargs)
    chosen = run_handoffs[0]  # the SDK follows the first handoff the model asked for
    from_agent = getattr(kwargs.get("public_agent"), "name", None)
    tool_call = chosen.tool_call
    call = begin_tool(chosen.handoff.tool_name, decoded_arguments(tool_call.arguments),
                      getattr(tool_call, "call_id", None), FRAMEWORK, servable=False,
                      attributes={sc.HANDOFF_FROM: from_agent, sc.HANDOFF_TO: chosen.handoff.agent_name})

    def record(out: Any) -> tuple[Any, Any]:
        new_agent = getattr(getattr(out, "next_step", None), "new_agent", None)
        return {"handoff_to": getattr(new_agent, "name", chosen.handoff.agent_name)}, None

    return await arun_tool(call, lambda: wrapped(*args, **kwargs), record=record)


def patches() -> list[Patch]:
    return [
        # run.py imports run_single_turn by name; the streamed loop looks it up in run_loop
        ("agents.run", "run_single_turn", _turn),
        ("agents.run_internal.run_loop", "run_single_turn", _turn),
        ("agents.run_internal.run_loop", "run_single_turn_streamed", _turn),
        ("agents.run_internal.tool_execution", "_invoke_function_tool_with_metadata", _function_tool),
        ("agents.run_internal.turn_resolution", "execute_handoffs", _handoffs),
        ("agents.run_internal.run_loop", "execute_handoffs", _handoffs),
    ]
