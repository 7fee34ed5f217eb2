"""Run an example of examples/ with a framework's OpenInference instrumentor active, as a
user who already has one would: `python with_openinference.py EXAMPLE both|only RUN_ID`.
OpenLLMetry's with INSTRUMENTATION=openllmetry; for the plain SDK (and, with OpenLLMetry,
the frameworks it has no instrumentor of here) the openai SDK's.

* both: `tracefix.init()` (the example's own) and the instrumentor on the same global
  provider, so each agent, tool and LLM call may be described by two spans;
* only: no tracefix.init(): the instrumentor (OpenLLMetry's with INSTRUMENTATION=openllmetry)
  on an SDK provider exporting OTLP to
  OTEL_EXPORTER_OTLP_ENDPOINT (the collector), the graph run in a session of OpenInference's
  `using_session` (LangGraph only).

The task ends with a line naming the run, by which the test finds its session.
"""
from __future__ import annotations

import importlib
import os
import sys

INSTRUMENTORS = {
    "openai_sdk_refund": ("openinference.instrumentation.openai", "OpenAIInstrumentor"),
    "langgraph_refund": ("openinference.instrumentation.langchain", "LangChainInstrumentor"),
    "openai_agents_refund": ("openinference.instrumentation.openai_agents", "OpenAIAgentsInstrumentor"),
    "ag2_refund": ("openinference.instrumentation.ag2", "AG2Instrumentor"),
}


# OpenLLMetry's own for LangGraph; its openai instrumentor (the SDK calls the others make) for the rest
OPENLLMETRY = {"langgraph_refund": ("opentelemetry.instrumentation.langchain", "LangchainInstrumentor"),
               **{example: ("opentelemetry.instrumentation.openai", "OpenAIInstrumentor")
                  for example in ("openai_sdk_refund", "openai_agents_refund", "ag2_refund")}}


def instrumentor(example: str):
    """The example's OpenInference instrumentor, or OpenLLMetry's with INSTRUMENTATION=openllmetry."""
    table = OPENLLMETRY if os.environ.get("INSTRUMENTATION") == "openllmetry" else INSTRUMENTORS
    module, cls = table[example]
    return getattr(importlib.import_module(module), cls)()


def run_both(example: str, session_id: str) -> None:
    module = importlib.import_module(example)  # calls tracefix.init(): the global provider is tracefix's
    instrumentor(example).instrument()
    if example == "openai_agents_refund":  # OpenInference's processor sees the SDK's spans only with its tracing on
        from agents import set_tracing_disabled

        set_tracing_disabled(os.environ.get("SDK_TRACING") != "1")
    task = module.shop.HANDOFF_TASK if example == "openai_agents_refund" else module.shop.TASK
    print(module.refund_order(f"{task}(run {session_id})"))  # the test finds its session by this line


def run_only(example: str, session_id: str) -> None:
    from openinference.instrumentation import using_session
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": f"oi-{example}"}))
    endpoint = os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)
    instrumentor(example).instrument(tracer_provider=provider)
    with using_session(session_id):  # OpenLLMetry's spans: one trace, a session of its own
        print(globals()[f"_plain_{example}"](session_id))
    provider.shutdown()


def _plain_langgraph_refund(session_id: str) -> str:
    """examples/langgraph_refund.py's graph with no tracefix in the process."""
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    import shop

    llm = ChatOpenAI(model=shop.MODEL, max_retries=0)
    lookup_tools, refund_tools = [tool(shop.get_order)], [tool(shop.refund)]
    lookup_llm, refund_llm = llm.bind_tools(lookup_tools), llm.bind_tools(refund_tools)
    graph = StateGraph(MessagesState)
    graph.add_node("lookup", lambda state: {"messages": [lookup_llm.invoke(state["messages"])]})
    graph.add_node("refunds", lambda state: {"messages": [refund_llm.invoke(state["messages"])]})
    graph.add_node("lookup_tools", ToolNode(lookup_tools, handle_tool_errors=True))
    graph.add_node("refund_tools", ToolNode(refund_tools, handle_tool_errors=True))
    graph.add_edge(START, "lookup")
    graph.add_conditional_edges("lookup", tools_condition, {"tools": "lookup_tools", END: "refunds"})
    graph.add_edge("lookup_tools", "lookup")
    graph.add_conditional_edges("refunds", tools_condition, {"tools": "refund_tools", END: END})
    graph.add_edge("refund_tools", "refunds")
    state = graph.compile(name="refund-desk").invoke({"messages": [("user", f"{shop.TASK}(run {session_id})")]})
    return state["messages"][-1].content


if __name__ == "__main__":
    example, mode, session_id = sys.argv[1], sys.argv[2], sys.argv[3]
    {"both": run_both, "only": run_only}[mode](example, session_id)
