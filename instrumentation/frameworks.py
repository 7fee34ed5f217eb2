"""Framework capture: agents and tools as the agent frameworks themselves define them.

A "drop-in" user of openai-agents, LangGraph or AG2 writes ``Agent(name=...)``, graph nodes,
``ToolNode``s, ``register_function`` — not ``tracefix.agent()`` / ``@tracefix.tool``. The
patches listed in :data:`FRAMEWORKS` turn that structure into the same spans those two write:

* ``invoke_agent {name}`` per agent turn (an openai-agents turn, a LangGraph node, an AG2
  ``generate_reply``), so LLM calls inside carry ``gen_ai.agent.name``;
* ``execute_tool {name}`` per tool run, with arguments, result, error and the
  ``gen_ai.tool.call.id`` the framework passed along (the LLM call that asked for it), run
  through :class:`tracefix.tools.ToolCall`, so a replay serves recorded tool results
  instead of running the tool again (a ``@tracefix.tool`` function inside adds no span).

Each framework module is imported only when the framework is (a post-import hook in the
instrumentor) and returns ``(module, "Class.method", wrapper)`` triples that the
instrumentor wraps with wrapt and unwraps on ``uninstrument()``, like the SDK patches.
Spans are tagged ``tracefix.framework``. Where another instrumentation already records
the framework's agents and tools (OpenInference, OpenLLMetry, AG2's own OpenTelemetry
instrumentation), the patch passes calls through (:func:`traced_elsewhere`): recorded once.
"""
from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

from . import semconv as sc
from .attributes import warn_once
from .other_instrumentors import active_other_instrumentor

# module whose import triggers the patch -> "tracefix module:function" returning the patches
FRAMEWORKS: dict[str, str] = {
    "agents": "framework_openai_agents:patches",
    "langgraph.pregel": "framework_langgraph:graph_patches",
    "langchain_core.tools": "framework_langgraph:tool_patches",
    "autogen.agentchat": "framework_autogen:patches",
}

Patch = tuple[str, str, Callable]  # (module, "Class.method" or "function", wrapt wrapper)


def agent_turn(name: str, framework: str, **attributes: Any):
    """An ``invoke_agent {name}`` scope (sync and async context manager)."""
    from .api import _AgentScope

    return _AgentScope(name, {sc.FRAMEWORK: framework, **attributes})


def decoded_arguments(arguments: Any) -> Any:
    """A tool call's arguments as the model sent them: JSON text decoded, else kept."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return arguments
    return arguments


def begin_tool(name: str, arguments: Any, call_id: str | None, framework: str, **kwargs: Any):
    """A :class:`ToolCall` for a framework's tool run, or None when it cannot be traced."""
    from .tools import ToolCall

    try:
        return ToolCall(name, arguments, call_id, framework=framework, **kwargs)
    except Exception:
        warn_once(f"tool-begin:{framework}", "tracefix: could not trace a %s tool; it runs untraced", framework,
                  exc_info=True)
        return None


def _raise_recorded(result: Any, error: str | None) -> Any:
    from .tools import recorded_exception

    if error:
        raise recorded_exception(error)
    return result


Record = Callable[[Any], tuple[Any, Any]]  # framework's return value -> (result, error or None)
Serve = Callable[[Any, "str | None"], Any]  # recorded (result, error) -> the framework's return value


def run_tool(call: Any, invoke: Callable[[], Any], record: Record = lambda out: (out, None),
             serve: Serve = _raise_recorded) -> Any:
    """Run a framework's tool call traced as `call`, or serve it from the replay cassette."""
    if call is None:
        return invoke()
    if call.served:
        result, error = call.decision.result, call.decision.error
        call.finish(result, error=error)
        return serve(result, error)
    call.enter()
    try:
        out = invoke()
    except BaseException as exc:
        call.exit()
        call.fail(exc)
        raise
    call.exit()
    _finish(call, out, record)
    return out


async def arun_tool(call: Any, invoke: Callable[[], Awaitable[Any]], record: Record = lambda out: (out, None),
                    serve: Serve = _raise_recorded) -> Any:
    if call is None:
        return await invoke()
    if call.served:
        result, error = call.decision.result, call.decision.error
        call.finish(result, error=error)
        return serve(result, error)
    call.enter()
    try:
        out = await invoke()
    except BaseException as exc:
        call.exit()
        call.fail(exc)
        raise
    call.exit()
    _finish(call, out, record)
    return out


def _finish(call: Any, out: Any, record: Record) -> None:
    try:
        result, error = record(out)
    except Exception:
        warn_once(f"tool-record:{call.framework}", "tracefix: could not read a %s tool result", call.framework,
                  exc_info=True)
        result, error = None, None
    call.finish(result, error=error)


# framework -> (module, instrumentor class, who) of the instrumentations that record its
# agents and tools as spans; a module not imported yet cannot have instrumented anything
# (openai-agents is not here: its instrumentors are trace processors of the SDK's own tracing,
# which record nothing while that is off; framework_openai_agents asks the SDK instead)
OTHER_FRAMEWORK_INSTRUMENTORS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "langgraph": (("openinference.instrumentation.langchain", "LangChainInstrumentor", "OpenInference"),
                  ("opentelemetry.instrumentation.langchain", "LangchainInstrumentor", "OpenLLMetry")),
    "autogen": (("openinference.instrumentation.autogen", "AutogenInstrumentor", "OpenInference"),
                ("openinference.instrumentation.ag2", "AG2Instrumentor", "OpenInference")),
}


def traced_elsewhere(framework: str) -> bool:
    """True while another instrumentation records `framework`'s agents and tools: the patch
    then passes calls through (said once). Asked at call time, like the SDK check."""
    try:
        if not may_defer():
            return False
        who = active_other_instrumentor(framework, OTHER_FRAMEWORK_INSTRUMENTORS)
    except Exception:
        return False
    return said_aside(framework, who)


def may_defer() -> bool:
    """Whether a patch may leave a framework to another instrumentation: never in a replay
    (tracefix serves the recorded tool results) nor with TRACEFIX_DEFER_TO_OTHER_INSTRUMENTORS=0."""
    from . import runtime
    from .other_instrumentors import DEFER_ENV

    return runtime.replay is None and runtime.env_flag(DEFER_ENV, True)


def said_aside(framework: str, who: str | None) -> bool:
    """True when `who` (another instrumentation) records `framework`; said once."""
    if who is not None:
        warn_once(f"defer-framework:{framework}", "tracefix: %s agents and tools are already traced by %s; "
                  "tracefix leaves them to it (recorded once).", framework, who)
    return who is not None
