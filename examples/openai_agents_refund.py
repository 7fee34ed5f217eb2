"""openai-agents: a triage agent hands off to a refunds agent (tracefix records agents,
the handoff and both tools with no tracefix code inside the agents).

    tracefix sim --port 8765 &  tracefix serve &
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=sim python examples/openai_agents_refund.py
"""
from __future__ import annotations

import asyncio

import tracefix

tracefix.init(service_name="example-openai-agents")

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

import shop  # noqa: E402

set_tracing_disabled(True)  # the SDK's own trace export goes to OpenAI's platform; tracefix records the run


def build() -> Agent:
    model = OpenAIChatCompletionsModel(model=shop.MODEL, openai_client=AsyncOpenAI(max_retries=0))
    refunds = Agent(name="refunds", instructions="You refund orders.", model=model,
                    tools=[function_tool(shop.refund)])
    return Agent(name="triage", instructions="You look orders up and hand refunds to the refunds agent.",
                 model=model, tools=[function_tool(shop.get_order)], handoffs=[refunds])


@tracefix.session
def refund_order(task: str) -> str:
    result = asyncio.run(Runner.run(build(), task, max_turns=8))
    return shop.as_text(result.final_output)


tracefix.evaluator(refund_order)(shop.fully_refunded)


if __name__ == "__main__":
    print(refund_order(shop.HANDOFF_TASK))
