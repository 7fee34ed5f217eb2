"""The replay result, its tested hypotheses and their runs (docs/contracts.md §5), as typed dicts.

What `tracefix replay --json`, `GET /api/v1/sessions/{id}/replay` and the store's
`get_replay` return, and what the report renders. They are declared in
`tracefix.collector.contracts`, because the collector stores the result and its API
validates what is posted, and the collector may not import the replay
(docs/architecture.md); this module names them for the part that produces them.
"""
from tracefix.collector.contracts import (Intervention, ReplayResult, ReplayRun, TestedHypothesis, Trial,
                                          Verdict)

__all__ = ["Intervention", "ReplayResult", "ReplayRun", "TestedHypothesis", "Trial", "Verdict"]
