"""The public API without an LLM: import weight, sessions, agents, tools, snapshots, evaluators."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import tracefix
from tracefix import semconv as sc

from instr_support import by_name
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def test_import_tracefix_loads_no_heavy_dependency():
    code = ("import tracefix, sys; heavy = {'duckdb','torch','sklearn','numpy','openai'} & set(sys.modules); "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


class Counter:
    def __init__(self):
        self.value = 0

    def snapshot(self):
        return {"value": self.value}

    def restore(self, state):
        self.value = state["value"]


@tracefix.tool
def add(counter_box: Counter, amount: int) -> dict:
    counter_box.value += amount
    return {"value": counter_box.value}


@tracefix.tool(name="fail_tool")
def failing(reason: str) -> None:
    raise ValueError(reason)


@tracefix.session
def run_counter(task: str, amount: int = 2):
    counter = tracefix.track("counter", Counter())
    with tracefix.agent("Worker"):
        add(counter, amount)
    return {"final": counter.value, "session": tracefix.current_session_id()}


@tracefix.evaluator(run_counter)
def judge_counter(inputs, output, tracked):
    return {"success": tracked["counter"].value == inputs["amount"], "milestones": [{"name": "added",
                                                                                      "achieved": True}]}


def test_session_decorator_records_entrypoint_inputs_output_and_evaluation(spans):
    result = run_counter("t1")
    root = by_name(spans, "session ")[0]
    attrs = root.attributes
    assert attrs[sc.SESSION_SPAN] is True
    assert attrs[sc.ENTRYPOINT].endswith(":run_counter")
    assert json.loads(attrs[sc.INPUTS]) == {"task": "t1", "amount": 2}
    assert json.loads(attrs[sc.FINAL_OUTPUT]) == result
    assert attrs[sc.SESSION_ID] == result["session"] == attrs[sc.GEN_AI_CONVERSATION_ID]
    assert attrs[sc.OUTCOME] == "success" and attrs[sc.OUTCOME_SCORE] == 1.0
    assert json.loads(attrs[sc.EVALUATION])["milestones"][0]["achieved"] is True
    assert attrs[sc.REPLAYABLE] is True
    tool_span = by_name(spans, "execute_tool add")[0]
    assert tool_span.attributes[sc.GEN_AI_AGENT_NAME] == "Worker"
    assert tool_span.attributes[sc.SESSION_ID] == result["session"]
    assert json.loads(tool_span.attributes[sc.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"amount": 2}  # the object is left out
    assert json.loads(tool_span.attributes[sc.GEN_AI_TOOL_CALL_RESULT]) == {"value": 2}
    agent_span = by_name(spans, "invoke_agent Worker")[0]
    assert tool_span.parent.span_id == agent_span.context.span_id
    assert agent_span.parent.span_id == root.context.span_id
    # the final state of the tracked counter is recorded at the session's end
    final = [e for e in root.events if e.name == sc.SNAPSHOT_FINAL_EVENT]
    assert json.loads(final[0].attributes[sc.SNAPSHOT_STATE]) == {"value": 2}


def test_tool_error_is_recorded_and_reraised_untouched(spans):
    with tracefix.session("errors"):
        try:
            failing("boom")
        except ValueError as exc:
            assert str(exc) == "boom"
        else:
            raise AssertionError("the tool's exception was swallowed")
    span = by_name(spans, "execute_tool fail_tool")[0]
    assert span.attributes[sc.ERROR_TYPE] == "ValueError"
    assert span.status.status_code.name == "ERROR"


def test_session_context_manager_with_given_id_and_async_tasks(spans):
    @tracefix.tool
    async def lookup(key: str) -> str:
        await asyncio.sleep(0)
        return key.upper()

    async def main():
        async with tracefix.session("async", session_id="s-async", user_id="u1", metadata={"k": 1}) as s:
            assert s.id == "s-async"
            results = await asyncio.gather(*(asyncio.create_task(lookup(k)) for k in ("a", "b")))
            s.set_output(results)
        return results

    assert asyncio.run(main()) == ["A", "B"]
    tools = by_name(spans, "execute_tool lookup")
    assert len(tools) == 2 and all(t.attributes[sc.SESSION_ID] == "s-async" for t in tools)
    root = by_name(spans, "session async")[0]
    assert root.attributes[sc.USER_ID] == "u1"
    assert json.loads(root.attributes[sc.METADATA]) == {"k": 1}


def test_session_reaches_threads_through_the_context_executor(spans):
    seen = []

    @tracefix.tool
    def work(n: int) -> int:
        seen.append(tracefix.current_session_id())
        return n * 2

    with tracefix.session("threads", session_id="s-threads"):
        with tracefix.agent("Pool"):
            with tracefix.ContextThreadPoolExecutor(max_workers=2) as pool:
                assert list(pool.map(work, [1, 2, 3])) == [2, 4, 6]
            import threading

            t = threading.Thread(target=tracefix.wrap_context(work), args=(5,))
            t.start()
            t.join()
    assert seen == ["s-threads"] * 4
    for span in by_name(spans, "execute_tool work"):
        assert span.attributes[sc.SESSION_ID] == "s-threads"
        assert span.attributes[sc.GEN_AI_AGENT_NAME] == "Pool"


def test_explicit_snapshot_is_an_event_of_the_current_step(spans):
    with tracefix.session("snap"):
        tracefix.snapshot("memory", {"notes": ["a"]})
    root = by_name(spans, "session snap")[0]
    (event,) = [e for e in root.events if e.name == sc.SNAPSHOT_EVENT]
    assert event.attributes[sc.SNAPSHOT_KEY] == "memory"
    assert event.attributes[sc.STEP] == 0
    assert json.loads(event.attributes[sc.SNAPSHOT_STATE]) == {"notes": ["a"]}


def test_track_rejects_objects_without_snapshot_and_restore():
    try:
        tracefix.track("x", object())
    except TypeError as exc:
        assert "snapshot()" in str(exc)
    else:
        raise AssertionError("track accepted an object it cannot snapshot")


def test_replay_is_inactive_without_tracefix_replay():
    assert tracefix.replay_active() is False
    assert tracefix.current_session_id() is None


def test_tool_calls_are_matched_by_name_and_arguments_latest_response_first():
    from tracefix.context import SessionState

    state = SessionState(session_id="s", name="n")
    state.add_tool_calls(0, [("call_a", "transfer", {"amount": 5}), ("call_b", "transfer", {"amount": 7})])
    state.add_tool_calls(1, [("call_c", "transfer", {"amount": 5})])
    assert state.claim_tool_call("transfer", {"amount": 7}).call_id == "call_b"
    assert state.claim_tool_call("transfer", {"amount": 5}).call_id == "call_c"  # the latest response first
    # extra parameters the model did not send (defaults) still match
    assert state.claim_tool_call("transfer", {"amount": 5, "memo": None}).call_id == "call_a"
    assert state.claim_tool_call("transfer", {"amount": 5}) is None  # each call is claimed once
    state.add_tool_calls(2, [("call_d", "lookup", {"name": "Alice"})])
    assert state.claim_tool_call("lookup", {"name": "alice"}).call_id == "call_d"  # reshaped, but the only one


def test_second_init_warns_that_its_arguments_are_ignored_and_keeps_the_first(spans, caplog):
    other = InMemorySpanExporter()
    with caplog.at_level("WARNING", logger="tracefix"):
        handle = tracefix.init(span_processor=SimpleSpanProcessor(other))
    assert handle is tracefix.configure.current_handle()
    assert any("already active" in r.getMessage() and "span_processor" in r.getMessage() for r in caplog.records)
    with tracefix.session("still-first"):
        pass
    assert by_name(spans, "session still-first") and not other.get_finished_spans()
