"""AG2's classic API (the ``autogen`` package, tested with 0.14): ``ConversableAgent`` and
everything built on it (``AssistantAgent``, ``UserProxyAgent``, ``GroupChatManager``).

* ``invoke_agent {agent.name}`` per ``generate_reply`` / ``a_generate_reply``, with
  ``tracefix.framework.sender`` (whose message it answers): a two-agent chat's turns and a
  group chat's speaker turns (the manager's turn holds its speakers' turns);
* ``execute_tool {function}`` per ``execute_function`` / ``a_execute_function`` (registered
  functions and tools), with the ``call_id`` AG2 passes; an unsuccessful execution (AG2
  hands the model an "Error: ..." message) is an error. Served from the cassette in a replay.

Agents that AG2's own OpenTelemetry instrumentation (``autogen.opentelemetry``) wraps are
left to it: it records the same turns and tools.
"""
from __future__ import annotations

from typing import Any

from . import semconv as sc
from .frameworks import Patch, agent_turn, arun_tool, begin_tool, decoded_arguments, run_tool, traced_elsewhere

FRAMEWORK = "autogen"


def _instrumented_by_ag2(instance: Any, method: str) -> bool:
    """AG2's own instrumentation replaces the method on the instance, marked `__otel_wrapped__`."""
    try:
        return hasattr(vars(instance).get(method), "__otel_wrapped__")
    except TypeError:
        return False


def _turn(instance: Any, args: tuple, kwargs: dict, method: str):
    if _instrumented_by_ag2(instance, method) or traced_elsewhere(FRAMEWORK):
        return None
    name = getattr(instance, "name", None)
    if not isinstance(name, str):
        return None
    sender = kwargs.get("sender", args[1] if len(args) > 1 else None)
    return agent_turn(name, FRAMEWORK, **{sc.FRAMEWORK_SENDER: getattr(sender, "name", None)})


def _generate_reply(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    scope = _turn(instance, args, kwargs, "generate_reply")
    if scope is None:
        return wrapped(*args, **kwargs)
    with scope:
        return wrapped(*args, **kwargs)


async def _a_generate_reply(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    scope = _turn(instance, args, kwargs, "a_generate_reply")
    if scope is None:
        return await wrapped(*args, **kwargs)
    async with scope:
        return await wrapped(*args, **kwargs)


def _tool_call(instance: Any, args: tuple, kwargs: dict, method: str) -> Any:
    if _instrumented_by_ag2(instance, method) or traced_elsewhere(FRAMEWORK):
        return None
    func_call = args[0] if args else kwargs.get("func_call")
    if not isinstance(func_call, dict):
        return None
    call_id = kwargs.get("call_id", args[1] if len(args) > 1 else None)
    return begin_tool(str(func_call.get("name", "")), decoded_arguments(func_call.get("arguments", "{}")),
                      call_id, FRAMEWORK)


def _record(out: Any) -> tuple[Any, Any]:
    success, reply = out
    content = reply.get("content") if isinstance(reply, dict) else reply
    return content, (None if success else str(content))


def _server(args: tuple, kwargs: dict):
    func_call = (args[0] if args else kwargs.get("func_call")) or {}

    def serve(result: Any, error: str | None) -> Any:
        content = result if result is not None else error
        return error is None, {"name": func_call.get("name", ""), "role": "function", "content": content}
    return serve


def _execute_function(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    call = _tool_call(instance, args, kwargs, "execute_function")
    return run_tool(call, lambda: wrapped(*args, **kwargs), record=_record, serve=_server(args, kwargs))


async def _a_execute_function(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    call = _tool_call(instance, args, kwargs, "a_execute_function")
    return await arun_tool(call, lambda: wrapped(*args, **kwargs), record=_record, serve=_server(args, kwargs))


def patches() -> list[Patch]:
    module = "autogen.agentchat.conversable_agent"
    return [
        (module, "ConversableAgent.generate_reply", _generate_reply),
        (module, "ConversableAgent.a_generate_reply", _a_generate_reply),
        (module, "ConversableAgent.execute_function", _execute_function),
        (module, "ConversableAgent.a_execute_function", _a_execute_function),
    ]
