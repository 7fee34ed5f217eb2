"""The analysis result and its hypotheses, as typed dicts (docs/contracts.md §3).

What `tracefix analyze --json`, `GET /api/v1/sessions/{id}/analysis` and the store's
`get_analysis` return, and what the replay reads its hypotheses from. Plain JSON at run
time; checked by mypy (tests/test_typing.py).
"""
from __future__ import annotations

from typing import Any, TypedDict


class StepScore(TypedDict, total=False):
    """One step's scores: `step`, `phase`, `agent`, and one float per detector by its name
    (`isolation_forest`, `hgt`, ...), so the keys beyond the first three vary."""
    step: int
    phase: str | None
    agent: str | None
    isolation_forest: float
    hgt: float
    ranker: float  # the learned step ranker's score (failed sessions, when a ranker is used)


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
