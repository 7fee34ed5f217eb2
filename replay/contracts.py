"""The replay result, its tested hypotheses and their runs, as typed dicts
(docs/contracts.md §5).

What `tracefix replay --json`, `GET /api/v1/sessions/{id}/replay` and the store's
`get_replay` return, and what the report renders. Plain JSON at run time; checked by mypy
(tests/test_typing.py).
"""
from __future__ import annotations

from typing import Any, Literal, TypedDict

Verdict = Literal["validated", "partially_validated", "refuted", "inconclusive"]


class Intervention(TypedDict, total=False):
    """The edit a hypothesis is tested with (docs/contracts.md §4); `id`, `step`, `kind` and
    `text` always, the rest by kind."""
    id: str
    step: int
    kind: Literal["replace_output", "add_message", "replace_tool_result"]
    category: str
    text: str
    role: str
    tool_call_id: str
    before: str | None  # the original text at the step


class ReplayRun(TypedDict, total=False):
    """One replay of the session with the intervention applied."""
    child_session_id: str | None
    success: bool | None
    score: float | None
    fulfilled: bool | None
    progress: float | None
    judged_by: dict[str, str]
    counts: dict[str, int]
    divergence: dict[str, Any] | None
    output: Any
    wall_s: float
    error: str | None


class TestedHypothesis(TypedDict, total=False):
    id: str
    round: int
    trial: int | None
    step: int
    agent: str | None
    reason: str
    source: str
    intervention: Intervention | None
    runs: list[ReplayRun]
    verdict: Verdict
    verdict_reason: str


class Trial(TypedDict, total=False):
    index: int
    start: int
    end: int
    plan_step: int | None
    failed: bool


class ReplayResult(TypedDict):
    session_id: str
    created_at: str
    rounds: int
    stages: dict[str, str]  # stage -> "llm" | "fallback" | "evaluator" | ...
    trials: list[Trial]
    hypotheses: list[TestedHypothesis]
