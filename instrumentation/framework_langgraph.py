"""LangGraph (tested with 1.2) and LangChain tools (langchain-core 1.x).

* ``Pregel.invoke`` / ``ainvoke`` outside any tracefix session opens one (``session
  {graph name}``): a graph run is one session; inside a session it is part of that one;
* ``invoke_agent {node}`` per node run (``tracefix.framework.node``); a ``ToolNode`` opens no
  agent turn of its own: its tools belong to the agent whose LLM call asked for them;
* ``execute_tool {tool}`` per ``BaseTool.run`` / ``arun`` (what ``ToolNode`` and agents call),
  with the ``tool_call_id`` LangChain passes; served from the cassette in a replay.
"""
from __future__ import annotations

from typing import Any

from . import semconv as sc
from .frameworks import Patch, agent_turn, arun_tool, begin_tool, decoded_arguments, run_tool, traced_elsewhere

FRAMEWORK = "langgraph"


def _node(task: Any) -> str | None:
    """The node a Pregel task runs, or None for LangGraph's own nodes and tool nodes."""
    name = getattr(task, "name", None)
    if not isinstance(name, str) or name.startswith("__") or traced_elsewhere(FRAMEWORK):
        return None
    try:
        from langgraph.prebuilt import ToolNode
    except ImportError:
        return name
    proc = getattr(task, "proc", None)
    steps = getattr(proc, "steps", None) or [proc]
    return None if any(isinstance(s, ToolNode) for s in steps) else name


def _run_node(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    node = _node(args[0] if args else kwargs.get("task"))
    if node is None:
        return wrapped(*args, **kwargs)
    with agent_turn(node, FRAMEWORK, **{sc.FRAMEWORK_NODE: node}):
        return wrapped(*args, **kwargs)


async def _arun_node(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    node = _node(args[0] if args else kwargs.get("task"))
    if node is None:
        return await wrapped(*args, **kwargs)
    async with agent_turn(node, FRAMEWORK, **{sc.FRAMEWORK_NODE: node}):
        return await wrapped(*args, **kwargs)


def _graph_session(instance: Any):
    """A session for this graph run when none is open, else None."""
    from .api import session
    from .context import current_session

    if current_session() is not None:
        return None
    name = getattr(instance, "name", None) or "LangGraph"
    return session(name, metadata={"framework": FRAMEWORK})


def _invoke(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    scope = _graph_session(instance)
    if scope is None:
        return wrapped(*args, **kwargs)
    with scope:
        return wrapped(*args, **kwargs)


async def _ainvoke(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    scope = _graph_session(instance)
    if scope is None:
        return await wrapped(*args, **kwargs)
    async with scope:
        return await wrapped(*args, **kwargs)


# --- tools ----------------------------------------------------------------------------------

def _tool_call(instance: Any, args: tuple, kwargs: dict) -> Any:
    if traced_elsewhere(FRAMEWORK):
        return None
    tool_input = args[0] if args else kwargs.get("tool_input")
    return begin_tool(instance.name, decoded_arguments(tool_input), kwargs.get("tool_call_id"), "langchain")


def _record(out: Any) -> tuple[Any, Any]:
    """A ToolMessage's content as it reached the model (its text kept exactly: a replay hands
    the same bytes back); a tool error LangChain turned into a message is an error too."""
    content = getattr(out, "content", out)
    return content, (content if getattr(out, "status", None) == "error" else None)


def _server(instance: Any, kwargs: dict):
    def serve(result: Any, error: str | None) -> Any:
        from langchain_core.tools.base import _format_output

        from .tools import recorded_exception

        if error and result is None:
            raise recorded_exception(error)
        return _format_output(result, None, kwargs.get("tool_call_id"), instance.name,
                              "error" if error else "success")
    return serve


def _tool_run(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    call = _tool_call(instance, args, kwargs)
    return run_tool(call, lambda: wrapped(*args, **kwargs), record=_record, serve=_server(instance, kwargs))


async def _tool_arun(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    call = _tool_call(instance, args, kwargs)
    return await arun_tool(call, lambda: wrapped(*args, **kwargs), record=_record, serve=_server(instance, kwargs))


def graph_patches() -> list[Patch]:
    return [
        ("langgraph.pregel._runner", "run_with_retry", _run_node),
        ("langgraph.pregel._runner", "arun_with_retry", _arun_node),
        ("langgraph.pregel.main", "Pregel.invoke", _invoke),
        ("langgraph.pregel.main", "Pregel.ainvoke", _ainvoke),
    ]


def tool_patches() -> list[Patch]:
    return [
        ("langchain_core.tools.base", "BaseTool.run", _tool_run),
        ("langchain_core.tools.base", "BaseTool.arun", _tool_arun),
    ]
