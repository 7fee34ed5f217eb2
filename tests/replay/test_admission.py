"""What a replay is built from and when it runs, on documents as the collector writes them:
the cassette takes each step's LLM span by the document's `step.span_id` (beside another
instrumentation one call has two spans, the other's stamped with the step before), and
`check_replayable` refuses with the document's own `replayable_reason`
(tests/examples/test_replay_beside_other_instrumentations.py runs the same end to end)."""
from __future__ import annotations

import json

import pytest

from tracefix import semconv as sc
from tracefix.collector import document
from tracefix.replay import cassette
from tracefix.replay.admission import ReplayError, check_replayable

ANSWER = {"id": "r1", "choices": [{"message": {"role": "assistant", "content": "done"}}]}


def _span(span_id: str, step: int, scope: str, response: dict | None) -> dict:
    attrs = {sc.STEP: step, sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT, sc.GEN_AI_REQUEST_MODEL: "m",
             sc.GEN_AI_INPUT_MESSAGES: json.dumps([{"role": "user", "content": "hi"}])}
    if response is not None:
        attrs[sc.RESPONSE_RAW] = json.dumps(response)
    return {"span_id": span_id, "kind": "llm", "scope": scope, "attributes": attrs}


def _doc(steps: list[dict], **fields) -> dict:
    return {"session_id": "s1", "entrypoint": "app:run", "inputs": {}, "replayable": True,
            "replayable_reason": None, "steps": steps, **fields}


def test_the_cassette_takes_the_span_the_document_chose_for_each_step():
    # OpenInference's span of step 1's call started before tracefix's and carries step 0's
    # number; stored after step 0's own spans, it came last among "step 0" spans
    spans = [_span("tf0", 0, "tracefix", ANSWER), _span("oi1", 0, "openinference.instrumentation.langchain", None),
             _span("tf1", 1, "tracefix", {**ANSWER, "id": "r2"})]
    steps = [{"index": 0, "kind": "llm", "span_id": "tf0", "tool_calls": []},
             {"index": 1, "kind": "llm", "span_id": "tf1", "tool_calls": []}]
    built = cassette.build(_doc(steps), spans)
    assert [s["response"]["id"] for s in built["steps"]] == ["r1", "r2"]


def test_a_refusal_says_the_documents_reason():
    reason = document.why_not_replayable("app:run", [{"index": 0, "kind": "llm"}],
                                         llm_scopes={0: "openinference.instrumentation.openai"})
    assert reason.startswith("step 0's LLM call was recorded by openinference.instrumentation.openai only")
    with pytest.raises(ReplayError, match="TRACEFIX_DEFER_TO_OTHER_INSTRUMENTORS=0"):
        check_replayable(_doc([{"index": 0, "kind": "llm"}], replayable=False, replayable_reason=reason), "s1",
                         allow_live_tools=True)


def test_live_tools_only_is_run_with_allow_live_tools_and_nothing_else_is():
    asked = {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "lookup", "arguments": "{}"}}]}
    steps = [{"index": 0, "kind": "llm", "output_message": asked, "tool_calls": []},
             {"index": 1, "kind": "llm", "output_message": {"role": "assistant", "content": "ok"}, "tool_calls": []}]
    reason = document.why_not_replayable("app:run", steps)
    assert reason == document.live_tools_reason(["lookup"])
    doc = _doc(steps, replayable=False, replayable_reason=reason)
    with pytest.raises(ReplayError, match="live tools only: lookup"):
        check_replayable(doc, "s1")
    assert check_replayable(doc, "s1", allow_live_tools=True) is doc
    truncated = _doc(steps, replayable=False, replayable_reason=document.why_not_replayable("app:run", steps,
                                                                                            truncated=True))
    with pytest.raises(ReplayError, match="truncated"):
        check_replayable(truncated, "s1", allow_live_tools=True)
