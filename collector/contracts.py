"""The session document and its parts, as typed dicts (docs/contracts.md §1).

What `Store.get_session`, `GET /api/v1/sessions/{id}` and the access layer hand the
analysis and the replay. The values stay plain JSON (dicts, lists), so these types cost
nothing at run time; a type checker holds producers and consumers to them (mypy, run by
tests/test_typing.py).
"""
from __future__ import annotations

from typing import Any, Literal, TypedDict

JsonDict = dict[str, Any]


class ToolCallRequest(TypedDict):
    """A tool call as the LLM asked for it (OpenAI shape), inside an output message."""
    id: str | None
    type: str
    function: dict[str, Any]  # {"name": ..., "arguments": JSON text}


class ChatMessage(TypedDict, total=False):
    """A canonical chat message: role and content always, the rest when set."""
    role: str
    content: str | None
    name: str
    tool_calls: list[ToolCallRequest]
    tool_call_id: str


class ToolCall(TypedDict):
    """One tool execution caused by a step (matched by call id)."""
    id: str | None
    name: str | None
    arguments: Any  # decoded from JSON
    result: Any  # decoded from JSON
    error: str | None  # "ExceptionType: message"
    span_id: str
    duration_ms: float | None


class Step(TypedDict):
    """One decision: an LLM call (kind "llm") plus the tools it caused, or one imported
    message (kind "message"), numbered 0..n-1 in session order."""
    index: int
    kind: Literal["llm", "message"]
    agent: str | None
    span_id: str
    model: str | None
    started_at: str | None
    duration_ms: float | None
    input_messages: list[ChatMessage]
    output_message: ChatMessage | None
    finish_reason: str | None
    input_tokens: int | None
    output_tokens: int | None
    tool_calls: list[ToolCall]
    error: str | None
    snapshots: dict[str, Any]  # tracked key -> its state at the start of this step (changed keys only)
    replay_source: str | None  # "cassette" | "intervention" | "live" on replayed sessions


class Feedback(TypedDict):
    feedback_id: str
    score: float
    comment: str | None
    source: str
    created_at: str | None


class SessionDocument(TypedDict):
    """A session whole: its header fields and its steps."""
    session_id: str
    service: str | None
    name: str | None
    entrypoint: str | None
    inputs: Any
    user_id: str | None
    metadata: Any
    task: str | None
    ground_truth: Any
    outcome: str | None  # "success" | "failure" | None
    score: float | None
    output: Any
    evaluation: Any
    replayable: bool
    parent_session_id: str | None
    intervention_id: str | None
    intervention: Any
    source: str | None
    started_at: str | None
    ended_at: str | None
    duration_ms: float | None
    agents: list[str]
    models: list[str]
    tokens: dict[str, int]  # {"input": n, "output": n}
    feedback: list[Feedback]
    steps: list[Step]
