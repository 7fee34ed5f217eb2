"""AG2 (classic ConversableAgent API, the `autogen` package): a group chat of a clerk, a
refunder and a desk that executes their registered functions (tracefix records each
speaker's turn and each function run, with no tracefix code in the agents).

    tracefix sim --port 8765 &  tracefix serve &
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=sim python examples/ag2_refund.py
"""
from __future__ import annotations

import os

import tracefix

tracefix.init(service_name="example-ag2")

from autogen import ConversableAgent, GroupChat, GroupChatManager, register_function  # noqa: E402

import shop  # noqa: E402


def build() -> tuple[ConversableAgent, GroupChatManager]:
    llm_config = {"config_list": [{"model": shop.MODEL, "api_key": os.environ.get("OPENAI_API_KEY", "sim"),
                                   "base_url": os.environ.get("OPENAI_BASE_URL")}],
                  "cache_seed": None}  # no on-disk response cache: every run asks the model
    clerk = ConversableAgent("clerk", system_message="You look orders up.", llm_config=llm_config)
    refunder = ConversableAgent("refunder", system_message="You refund orders.", llm_config=llm_config)
    desk = ConversableAgent("desk", llm_config=False, human_input_mode="NEVER")
    register_function(shop.get_order, caller=clerk, executor=desk, description="Look an order up by its id.")
    register_function(shop.refund, caller=refunder, executor=desk, description="Refund an amount of an order.")

    def next_speaker(last, chat: GroupChat):
        message = chat.messages[-1]
        if message.get("tool_calls"):
            return desk
        if last is desk and len(chat.messages) == 1:  # the desk brought the customer's task
            return clerk
        if last is desk:  # a function result: back to whoever asked for it
            return chat.agent_by_name(chat.messages[-2]["name"])
        if last is clerk:
            return refunder
        return None  # the refunder has answered: the chat ends

    chat = GroupChat([clerk, refunder, desk], messages=[], max_round=10, speaker_selection_method=next_speaker)
    return desk, GroupChatManager(chat, llm_config=False)


@tracefix.session
def refund_order(task: str) -> str:
    desk, manager = build()
    result = desk.initiate_chat(manager, message=task, summary_method="last_msg", silent=True)
    return shop.as_text(result.summary)


tracefix.evaluator(refund_order)(shop.fully_refunded)

if __name__ == "__main__":
    print(refund_order(shop.TASK))
