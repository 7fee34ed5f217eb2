"""What a session list is sorted and filtered by, by name: the values the API, the CLI and the
web UI accept. Names only (the CLI reads them without loading the store); the SQL behind
each is tracefix.collector.store.sorting's."""
from __future__ import annotations

# what a list sorts by: the time it started (the default), the sessions row's own values,
# and what its spans, feedback and jobs add up to
SESSION_SORTS = ("time", "service", "latency", "outcome", "steps", "tokens", "cost", "feedback", "agents", "model",
                 "task", "diagnosis")
# the diagnosis states a session shows, in the order a sort by diagnosis puts them
DIAGNOSIS_STATES = ("none", "queued", "running", "analyzed", "replayed", "failed")
