"""The JSON contracts between the parts, as typed dicts, each declared once (docs/contracts.md).

- §1 the session document and its parts: what `Store.get_session`,
  `GET /api/v1/sessions/{id}` and the access layer hand the analysis and the replay;
- §3 the analysis result (re-exported by `tracefix.analysis.contracts`, whose part produces it);
- §5 the replay result (re-exported by `tracefix.replay.contracts`).

The results live here, in the lowest part that handles them, because the collector stores
and serves them and its API validates what is posted (`tracefix.collector.schemas` derives
its pydantic models from these), and the collector may not import the parts above it.

The values stay plain JSON (dicts, lists), so these types cost nothing at run time; a type
checker holds producers and consumers to them (mypy, run by tests/test_typing.py).
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
    cost_usd: float | None  # the price table's cost of this call (genai-prices); None: unknown model or no usage
    tool_calls: list[ToolCall]
    error: str | None
    snapshots: dict[str, Any]  # tracked key -> its state at the start of this step (changed keys only)
    replay_source: str | None  # "cassette" | "intervention" | "live" on replayed sessions


class Feedback(TypedDict):
    feedback_id: str
    score: float | None  # None: a non-finite score an older collector stored
    comment: str | None
    source: str | None
    created_at: str | None


class StepAnnotation(TypedDict):
    """A person's mark on one step (label, score, comment), as Phoenix annotates a span and
    Langfuse scores an observation; `negative`: collector.marks.is_negative."""
    annotation_id: str
    session_id: str
    step: int
    label: str | None
    score: float | None
    comment: str | None
    source: str | None
    negative: bool
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
    replayable: bool  # `tracefix replay` runs it as recorded (default options)
    replayable_reason: str | None  # why not, and what to do (collector.document.why_not_replayable)
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
    cost_usd: float | None  # the steps' known costs added up; None when no step has one
    cost_by_agent: dict[str, float | None]  # agent -> its steps' known costs (None: none known)
    cost_by_model: dict[str, float | None]  # model -> its steps' known costs (None: not in the price table)
    feedback: list[Feedback]
    annotations: list[StepAnnotation]  # people's marks on its steps, oldest first
    steps: list[Step]


# --- §3 the analysis result ------------------------------------------------------------------

class StepScore(TypedDict, total=False):
    """One step's scores: `step`, `phase`, `agent`, and one float per detector by its name
    (`isolation_forest`, `hgt`, ...), so the keys beyond the first three vary."""
    step: int
    phase: str | None
    agent: str | None
    isolation_forest: float
    hgt: float
    ranker: float  # the learned step ranker's score (failed sessions, when a ranker is used)
    recovered_by: int  # an error step the run got past: the step that made its calls again


class GraphNode(TypedDict):
    step: int
    agent: str | None
    phase: str | None
    status: str


class GraphEdge(TypedDict):
    src: int
    dst: int
    type: str


class Graph(TypedDict):
    nodes: list[GraphNode]
    edges: list[GraphEdge]


class Hypothesis(TypedDict):
    """A suspected decisive step, ranked."""
    rank: int
    step: int
    agent: str | None
    score: float
    source: str  # "detectors", "ranker", "llm", ...
    rationale: str
    evidence: dict[str, Any]  # detectors, features, path, tool, error, ranker {score, reasons}


class AnalysisResult(TypedDict):
    """contracts §3: the analysis of one session (the API checks its outline only and keeps it as posted)."""
    session_id: str
    created_at: str
    model_version: str | None
    ranker_version: str | None  # the learned step ranker that ordered the hypotheses, if any
    detectors: list[str]
    notes: list[str]
    llm_used: bool
    scores: list[StepScore]
    frontier: dict[str, list[int]]  # detector -> its flagged steps
    graph: Graph
    hypotheses: list[Hypothesis]


# --- §5 the replay result --------------------------------------------------------------------

Verdict = Literal["validated", "partially_validated", "refuted", "inconclusive", "error"]  # replay.verdicts.VERDICTS


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
    """contracts §5: the replay of one session's hypotheses (the API checks its outline only and keeps it as posted)."""
    session_id: str
    created_at: str
    rounds: int
    stages: dict[str, str]  # stage -> "llm" | "fallback" | "evaluator" | ...
    trials: list[Trial]
    hypotheses: list[TestedHypothesis]
    notes: list[str]
