"""`StoreAccess`: the store through a `Store` object, the DuckDB file opened by this process
(a CLI without a server) or, inside `tracefix serve`, writes through its single writer."""
from __future__ import annotations

from typing import Any, Mapping

from tracefix.collector.access_base import AccessBase, AccessError
from tracefix.collector.contracts import JsonDict, SessionDocument


class StoreAccess(AccessBase):
    """Access bound to a Store object. With `writer` (inside `tracefix serve`) writes go
    through the single writer thread; without, the store is written directly (CLI on a file)."""

    kind = "file"

    def __init__(self, store, writer=None, owns_store: bool = False, read_only: bool = False):
        self.store = store
        self.writer = writer
        self.owns_store = owns_store
        self.read_only = read_only  # a file this process may only read: browsing works, writes are refused
        if writer is not None:
            self.kind = "in-process"

    def _write(self, fn):
        if self.read_only:
            raise AccessError(f"the store {self.store.path} is read-only here (this user may not write it or its "
                              "folder): it can be browsed, not changed; copy it somewhere writable to change it")
        return self.writer.run(fn, timeout=300) if self.writer is not None else fn(self.store)

    def close(self) -> None:
        if self.owns_store:
            self.store.close()

    def list_sessions(self, feedback=None, outcome=None, service=None, agent=None, since=None, until=None,
                      limit=50, offset=0, parent_session_id=None, sort="time", descending=True, model=None,
                      task=None, diagnosis=None, min_cost=None, max_cost=None) -> list[dict]:
        return self.store.list_sessions(feedback=feedback, outcome=outcome, service=service, agent=agent, since=since,
                                        until=until, limit=limit, offset=offset, parent_session_id=parent_session_id,
                                        sort=sort, descending=descending, model=model, task=task, diagnosis=diagnosis,
                                        min_cost=min_cost, max_cost=max_cost)

    def get_session(self, session_id: str) -> SessionDocument | None:
        return self.store.get_session(session_id)

    def get_spans(self, session_id: str) -> list[dict]:
        return self.store.get_spans(session_id)

    def session_page(self, session_id: str, offset: int = 0, limit: int = 100, max_chars: int = 2000) -> dict | None:
        return self.store.session_page(session_id, offset, limit, max_chars)

    def add_feedback(self, session_id: str, score: float, comment: str | None = None) -> dict:
        return self._write(lambda s: s.add_feedback(session_id, score, comment, source="cli"))

    def import_sessions(self, docs: list[dict]) -> list[str]:
        return self._write(lambda s: s.import_sessions(docs))

    def import_new_sessions(self, docs: list[dict]) -> tuple[list[str], list[str]]:
        """(ids imported, ids left out as stored already): see Store.import_new_sessions."""
        return self._write(lambda s: s.import_new_sessions(docs))

    def training_sessions(self, criterion: str = "success") -> list[SessionDocument]:
        return self.store.training_sessions(criterion)

    def save_analysis(self, session_id: str, result: Mapping[str, Any]) -> None:
        self._write(lambda s: s.save_analysis(session_id, result))

    def get_analysis(self, session_id: str) -> JsonDict | None:
        return self.store.get_analysis(session_id)

    def save_replay(self, session_id: str, result: Mapping[str, Any]) -> None:
        self._write(lambda s: s.save_replay(session_id, result))

    def get_replay(self, session_id: str) -> JsonDict | None:
        return self.store.get_replay(session_id)

    def list_jobs(self, state: str | None = None, session_id: str | None = None, kind: str | None = None, *,
                  newest: int | None = None) -> list[dict]:
        """Every job matching, oldest first; with `newest`, the newest that many, newest first."""
        return self.store.list_jobs(state, session_id, kind=kind, limit=newest, newest_first=bool(newest))

    def enqueue_job(self, session_id: str, reason: str = "manual", kind: str = "diagnosis",
                    options: dict | None = None) -> dict:
        return self._write(lambda s: s.enqueue_job(session_id, reason, kind, options))

    def claim_job(self, kind: str, worker: str, lease_s: float) -> dict | None:
        return self._write(lambda s: s.claim_job(kind, worker, lease_s))

    def renew_lease(self, job_id: str, worker: str, lease_s: float) -> bool:
        return self._write(lambda s: s.renew_lease(job_id, worker, lease_s))

    def finish_job(self, job_id: str, *, worker: str, state: str, error: str | None = None) -> bool:
        return self._write(lambda s: s.finish_job(job_id, error=error, state=state, worker=worker))

    def list_alerts(self, session_id: str | None = None, *, newest: int | None = None) -> list[dict]:
        """Every alert of the session (None: of all), oldest first; with `newest`, the newest
        that many, newest first."""
        return self.store.list_alerts(session_id, limit=newest, newest_first=bool(newest))

    # --- datasets of sessions, regression results (collector.datasets) ------------------------
    def add_to_dataset(self, dataset: str, session_ids: list[str]) -> dict:
        from tracefix.collector.store import datasets as store_datasets

        return self._write(lambda s: store_datasets.add_to_dataset(s, dataset, session_ids))

    def import_dataset_items(self, dataset: str | None, items: list[dict]) -> dict:
        from tracefix.collector.store import datasets as store_datasets

        return self._write(lambda s: store_datasets.import_items(s, dataset or store_datasets.DEFAULT_DATASET, items))

    def list_datasets(self) -> list[dict]:
        from tracefix.collector.store import datasets as store_datasets

        return store_datasets.list_datasets(self.store)

    def dataset_items(self, dataset: str | None = None, *, full: bool = False, **filters) -> list[dict]:
        """The items (summaries; `full`: whole, as exported) of `dataset`, else of all, filtered
        by `service`, `since`, `kind`, `session_ids`."""
        from tracefix.collector import datasets

        return (datasets.export_items if full else datasets.list_items)(self.store, dataset, **filters)

    def save_regress_result(self, run_id: str, session_id: str, result: Mapping[str, Any]) -> None:
        from tracefix.collector.store import datasets as store_datasets

        self._write(lambda s: store_datasets.save_regress_result(s, run_id, session_id, result))

    def regress_results(self, run_id: str) -> list[dict]:
        from tracefix.collector.store import datasets as store_datasets

        return store_datasets.regress_results(self.store, run_id)

    def queue_regress(self, run_id: str, entries: list[tuple[str, str]], options: dict) -> list[str]:
        from tracefix.collector.store import datasets as store_datasets

        return self._write(lambda s: store_datasets.queue_regress(s, run_id, entries, options))
