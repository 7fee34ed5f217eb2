"""The analysis result and its hypotheses (docs/contracts.md §3), as typed dicts.

What `tracefix analyze --json`, `GET /api/v1/sessions/{id}/analysis` and the store's
`get_analysis` return, and what the replay reads its hypotheses from. They are declared in
`tracefix.collector.contracts`, beside the session document, because the collector stores
the result and its API validates what is posted, and the collector may not import the
analysis (docs/architecture.md); this module names them for the part that produces them.
"""
from tracefix.collector.contracts import AnalysisResult, Graph, GraphEdge, GraphNode, Hypothesis, StepScore

__all__ = ["AnalysisResult", "Graph", "GraphEdge", "GraphNode", "Hypothesis", "StepScore"]
