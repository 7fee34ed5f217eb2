"""The chat messages GenAI log events carry, in the shapes the official OpenTelemetry GenAI
instrumentations emit them (opentelemetry-instrumentation-openai-v2 and the others built on
opentelemetry-util-genai):

- semantic conventions v1.30 (their default): one event per message, `gen_ai.{system,user,
  assistant,tool}.message` (body: `content`, `tool_calls`, a tool message's `id`), and one
  `gen_ai.choice` per answer (body: `index`, `finish_reason`, `message`);
- the latest conventions (`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`): one
  `gen_ai.client.inference.operation.details` event whose attributes hold
  `gen_ai.input.messages` / `gen_ai.output.messages` as spans would (read by `llm_messages`).

Each message comes out canonical (`canonical_message`), as an LLM span's would.
"""
from __future__ import annotations

from typing import Any

from tracefix import semconv as sc
from tracefix.collector.normalize.dialects import canonical_message, llm_messages

GENAI_EVENT_PREFIX = "gen_ai."
MESSAGE_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                  "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
CHOICE_EVENT = "gen_ai.choice"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"


def is_genai_event(name: str | None) -> bool:
    return name is not None and name.startswith(GENAI_EVENT_PREFIX)


def event_messages(name: str, body: Any, attrs: dict) -> tuple[list[dict], dict | None] | None:
    """(input messages, output message) of one GenAI event; None for an event that carries no
    message (an evaluation, a tool definition list...)."""
    if name in MESSAGE_EVENTS:
        fields = body if isinstance(body, dict) else {"content": body}
        return [canonical_message({"role": fields.get("role") or MESSAGE_EVENTS[name],
                                   "content": fields.get("content"), "tool_calls": fields.get("tool_calls"),
                                   "tool_call_id": fields.get("id")})], None
    if name == CHOICE_EVENT:
        fields = body if isinstance(body, dict) else {}
        if fields.get("index", 0) not in (0, None):  # a step's answer is its first choice
            return [], None
        message: dict = fields["message"] if isinstance(fields.get("message"), dict) else {}
        return [], canonical_message({"role": message.get("role") or "assistant", "content": message.get("content"),
                                      "tool_calls": message.get("tool_calls")})
    if name == DETAILS_EVENT or sc.GEN_AI_INPUT_MESSAGES in attrs or sc.GEN_AI_OUTPUT_MESSAGES in attrs:
        inputs, output, _ = llm_messages(attrs)
        return inputs, output
    return None
