"""The plain openai SDK: one agent loop with tool calls (tracefix.agent() and
@tracefix.tool, in shop.py, name the agent and the tools).

    tracefix sim --port 8765 &  tracefix serve &
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=sim python examples/openai_sdk_refund.py
"""
from __future__ import annotations

import json

import openai

import tracefix

import shop

tracefix.init(service_name="example-openai-sdk")

TOOLS = {"get_order": shop.get_order, "refund": shop.refund}
SPECS = [{"type": "function", "function": {"name": name, "description": fn.__doc__,
                                           "parameters": {"type": "object", "properties": {}}}}
         for name, fn in TOOLS.items()]


@tracefix.session
def refund_order(task: str) -> str:
    client = openai.OpenAI(max_retries=0)
    messages = [{"role": "system", "content": "You run the order desk."}, {"role": "user", "content": task}]
    with tracefix.agent("desk"):
        for _ in range(8):
            message = client.chat.completions.create(model=shop.MODEL, messages=messages, tools=SPECS) \
                .choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return message.content
            for call in message.tool_calls:
                try:
                    result = TOOLS[call.function.name](**json.loads(call.function.arguments))
                except Exception as exc:  # the model reads the error and goes on
                    result = {"error": f"{type(exc).__name__}: {exc}"}
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    return "gave up"


tracefix.evaluator(refund_order)(shop.fully_refunded)

if __name__ == "__main__":
    print(refund_order(shop.TASK))
