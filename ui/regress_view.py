"""The regression page (`/regress`): the runs of `tracefix regress`, newest first, and one
run's items, each with its runs beside the session it ran again (collector.store.datasets)."""
from __future__ import annotations

from tracefix.collector.store import datasets as store_datasets

RUNS_LISTED = 50


def regress_context(store, run_id: str | None) -> dict:
    """What regress.html shows: the runs, or with `run_id` that run's item results."""
    if run_id is None:
        return {"run_id": None, "runs": store_datasets.list_regress_runs(store, RUNS_LISTED), "results": []}
    results = store_datasets.regress_results(store, run_id)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.get("verdict") or "?"] = counts.get(r.get("verdict") or "?", 0) + 1
    return {"run_id": run_id, "runs": [], "results": results, "counts": counts}
