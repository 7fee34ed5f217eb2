"""Realistic agent spans for the collector benchmarks (not a test fixture of the product).

A session is what the instrumented banking demo emits: a root span, and per step an
`invoke_agent` span, a `chat` span whose `gen_ai.input.messages` carry the growing history
(system prompt, task, earlier turns) and an `execute_tool` span. Everything is built as
OTLP protobuf directly so generation cost stays out of the measured path.
"""
from __future__ import annotations

import json
import os
import random

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

WORDS = ("account balance transfer customer savings checking policy verify amount limit fraud "
         "statement overdraft orchestrator plan step review answer close open deposit withdraw").split()


def _text(rng: random.Random, n_bytes: int) -> str:
    out, size = [], 0
    while size < n_bytes:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def _kv(key: str, value) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    if isinstance(value, list):
        from opentelemetry.proto.common.v1.common_pb2 import ArrayValue

        return KeyValue(key=key, value=AnyValue(array_value=ArrayValue(values=[AnyValue(string_value=v) for v in value])))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


TOOLS = json.dumps([{"type": "function", "function": {
    "name": name, "description": f"{name.replace('_', ' ')} for a customer of the bank; " + "details " * 12,
    "parameters": {"type": "object", "properties": {"account_id": {"type": "string", "description": "ACC-nnnn"},
                                                     "amount": {"type": "number"}}, "required": ["account_id"]}}}
    for name in ("lookup_customer", "get_accounts", "get_balance", "transfer", "close_account")])


MODEL = "bank-agent"  # the LLM calls' model (bench/normalize.py --model: a priced one)


def session_spans(session_id: str, steps: int, rng: random.Random, *, growing: bool = True,
                  window: int = 6, t0: int | None = None) -> list[Span]:
    """Spans of one agent session. With `growing`, each LLM call resends the whole history
    (the demo's shape); otherwise only the last `window` messages (1-4 KB per call)."""
    import time

    t0 = time.time_ns() if t0 is None else t0
    trace_id = os.urandom(16)
    root_id = os.urandom(8)
    system = {"role": "system", "content": "You are the bank's agent team. " + _text(rng, 900)}
    task = {"role": "user", "content": "Task: " + _text(rng, 200)}
    history = [system, task]
    spans: list[Span] = []
    t = t0
    for step in range(steps):
        agent = "Orchestrator" if step % 3 == 0 else "AccountAgent"
        call_id = f"call_{step}_{rng.randrange(1 << 30):x}"
        args = json.dumps({"account_id": f"ACC-{rng.randrange(1000, 9999)}", "amount": rng.randrange(100, 9000)})
        out = {"role": "assistant", "content": _text(rng, rng.randrange(150, 600)),
               "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "transfer", "arguments": args}}]}
        sent = history if growing else history[:1] + history[-window:]
        raw = json.dumps({"id": f"chatcmpl-{rng.randrange(1 << 60):x}", "object": "chat.completion",
                          "model": MODEL, "choices": [{"index": 0, "finish_reason": "tool_calls", "message": out}],
                          "usage": {"prompt_tokens": 40 * len(sent), "completion_tokens": 60}})
        agent_id, chat_id, tool_id = os.urandom(8), os.urandom(8), os.urandom(8)
        common = [_kv("tracefix.session.id", session_id), _kv("gen_ai.conversation.id", session_id),
                  _kv("tracefix.step", step)]
        spans.append(Span(trace_id=trace_id, span_id=agent_id, parent_span_id=root_id, name=f"invoke_agent {agent}",
                          kind=1, start_time_unix_nano=t, end_time_unix_nano=t + 9_000_000,
                          attributes=[_kv("gen_ai.operation.name", "invoke_agent"), _kv("gen_ai.agent.name", agent),
                                      *common]))
        spans.append(Span(trace_id=trace_id, span_id=chat_id, parent_span_id=agent_id, name=f"chat {MODEL}",
                          kind=3, start_time_unix_nano=t + 1_000, end_time_unix_nano=t + 5_000_000, attributes=[
                              _kv("gen_ai.operation.name", "chat"), _kv("gen_ai.provider.name", "openai"),
                              _kv("gen_ai.request.model", MODEL), _kv("gen_ai.response.model", MODEL),
                              _kv("gen_ai.agent.name", agent), *common,
                              _kv("gen_ai.tool.definitions", TOOLS), _kv("tracefix.response.raw", raw),
                              _kv("gen_ai.input.messages", json.dumps(sent)),
                              _kv("gen_ai.output.messages", json.dumps([out])),
                              _kv("gen_ai.response.finish_reasons", ["tool_calls"]),
                              _kv("gen_ai.usage.input_tokens", 40 * len(sent)), _kv("gen_ai.usage.output_tokens", 60),
                              _kv("tracefix.call.seq", 2 * step)],
                          events=[Span.Event(time_unix_nano=t, name="tracefix.snapshot", attributes=[
                              _kv("tracefix.snapshot.key", "db"),
                              _kv("tracefix.snapshot.state", json.dumps({"accounts": {
                                  f"ACC-{1000 + a}": {"balance_cents": 1000 * a + step} for a in range(12)}}))])]
                          if step % 10 == 0 else []))
        result = json.dumps({"ok": True, "balance": rng.randrange(0, 100000) / 100})
        spans.append(Span(trace_id=trace_id, span_id=tool_id, parent_span_id=agent_id, name="execute_tool transfer",
                          kind=1, start_time_unix_nano=t + 5_100_000, end_time_unix_nano=t + 5_300_000, attributes=[
                              _kv("gen_ai.operation.name", "execute_tool"), _kv("gen_ai.tool.name", "transfer"),
                              _kv("gen_ai.tool.call.id", call_id), _kv("gen_ai.tool.call.arguments", args),
                              _kv("gen_ai.tool.call.result", result), _kv("gen_ai.agent.name", agent), *common,
                              _kv("tracefix.call.seq", 2 * step + 1)]))
        history = history + [out, {"role": "tool", "tool_call_id": call_id, "content": result}]
        t += 10_000_000
    spans.append(Span(trace_id=trace_id, span_id=root_id, name="session run_task", kind=1,
                      start_time_unix_nano=t0 - 1000, end_time_unix_nano=t + 1000, attributes=[
                          _kv("tracefix.session.id", session_id), _kv("tracefix.session.root", True),
                          _kv("tracefix.entrypoint", "tracefix.demo.bank:run_task"),
                          _kv("tracefix.inputs", json.dumps({"task_id": "t03", "seed": 7})),
                          _kv("tracefix.session.output", json.dumps({"final_answer": _text(rng, 120)})),
                          _kv("tracefix.session.outcome", "success"), _kv("tracefix.session.score", 1.0),
                          _kv("tracefix.session.replayable", True)]))
    return spans


def request(spans: list[Span], service: str = "bank-demo") -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource={"attributes": [_kv("service.name", service)]},
        scope_spans=[ScopeSpans(scope={"name": "tracefix"}, spans=spans)])])
