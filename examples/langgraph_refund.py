"""LangGraph + langchain-openai: a lookup node and a refunds node, each with its ToolNode
(tracefix records nodes as agent turns and the ToolNodes' tools, with no tracefix code in the graph).

    tracefix sim --port 8765 &  tracefix serve &
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=sim python examples/langgraph_refund.py
"""
from __future__ import annotations

import tracefix

tracefix.init(service_name="example-langgraph")

from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode, tools_condition  # noqa: E402

import shop  # noqa: E402


def build():
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
    return graph.compile(name="refund-desk")


@tracefix.session
def refund_order(task: str) -> str:
    state = build().invoke({"messages": [("user", task)]})
    return state["messages"][-1].content


tracefix.evaluator(refund_order)(shop.fully_refunded)

if __name__ == "__main__":
    print(refund_order(shop.TASK))
