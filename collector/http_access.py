"""`HttpAccess`: the store through a running `tracefix serve`'s HTTP API, the session read
back whole from its bounded pages (docs/contracts.md §1b), with the shapes `StoreAccess` returns."""
from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping

from tracefix.client_tls import certificate_hint, client_context
from tracefix.collector.access_base import AccessBase, AccessError
from tracefix.collector.assemble import restore_message_attributes
from tracefix.collector.contracts import JsonDict, SessionDocument
from tracefix.collector.document import stored_message
from tracefix.errors import UnknownSession


class HttpAccess(AccessBase):
    kind = "http"

    def __init__(self, server: str, token: str | None = None, timeout: float = 60.0):
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _request(self, method: str, path: str, body: Any = None, query: dict | None = None,
                 missing_ok: bool = False) -> Any:
        url = self.server + path
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=client_context()) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                detail, code = exc.read().decode(errors="replace"), None
            except (http.client.HTTPException, OSError):  # the server closed before its body was read:
                detail, code = str(exc.reason), None  # a refused upload (413) it stopped reading
            try:  # the API's error shape (tracefix.collector.schemas.ErrorBody)
                answer = json.loads(detail)
                detail, code = answer.get("error", detail), answer.get("code")
            except (ValueError, AttributeError):
                pass
            if exc.code == 404 and missing_ok:
                return None
            if exc.code == 404 and code == "unknown_session":
                sid = urllib.parse.unquote(path.removeprefix("/api/v1/sessions/").split("/", 1)[0])
                raise UnknownSession(sid, str(detail)) from None
            raise AccessError(f"{method} {path}: HTTP {exc.code}: {detail}", exc.code) from None
        except (http.client.HTTPException, OSError) as exc:
            # Nobody answers (URLError), or the connection opened, then closed or broke: a
            # collector that went away, or one that refuses this client's certificate (under
            # TLS 1.3 after the handshake).
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else f"{type(exc).__name__}: {exc}"
            raise AccessError(f"cannot reach tracefix serve at {self.server}: {reason}"
                              f"{certificate_hint(self.server)}") from None

    def _sid(self, session_id: str) -> str:
        return urllib.parse.quote(session_id, safe="")

    def list_sessions(self, feedback=None, outcome=None, service=None, agent=None, since=None, until=None,
                      limit=50, offset=0, parent_session_id=None, sort="time", descending=True, model=None,
                      task=None, diagnosis=None, min_cost=None, max_cost=None) -> list[dict]:
        return self._request("GET", "/api/v1/sessions", query=dict(
            feedback=feedback, outcome=outcome, service=service, agent=agent, since=since, until=until,
            limit=limit, offset=offset, parent_session_id=parent_session_id, sort=sort,
            order="desc" if descending else "asc", model=model, task=task, diagnosis=diagnosis,
            min_cost=min_cost, max_cost=max_cost))["sessions"]

    # The API answers a session in bounded pages (docs/contracts.md §1b); these reads ask for
    # every page and put the whole document back together, as StoreAccess returns it.
    PAGE_STEPS = 200
    PAGE_ITEMS = 1000
    FULL_CHARS = 1_000_000  # contents cut only past this; such a step is then read on its own

    def _paged(self, path: str, field: str, limit: int, query: dict | None = None,
               most: int | None = None) -> tuple[dict, list] | None:
        """(first page, every page's `field` items, or the first `most`) of a paged read; None
        when not found."""
        first, items, offset = None, [], 0
        while offset is not None and (most is None or len(items) < most):
            if most is not None:
                limit = min(limit, most - len(items))
            page = self._request("GET", path, query={**(query or {}), "offset": offset, "limit": limit},
                                 missing_ok=True)
            if page is None:
                return None
            first = first or page
            items += page[field]
            offset = page["page"]["next_offset"]
        return first, items if most is None else items[:most]

    def _message_texts(self, session_id: str) -> dict[str, str]:
        """The stored text of every message of the session, by key ref."""
        res = self._paged(f"/api/v1/sessions/{self._sid(session_id)}/messages", "messages", self.PAGE_ITEMS)
        return {m["key"]: m["text"] for m in res[1]} if res else {}

    def get_session(self, session_id: str) -> SessionDocument | None:
        path = f"/api/v1/sessions/{self._sid(session_id)}"
        res = self._paged(path, "steps", self.PAGE_STEPS, {"max_chars": self.FULL_CHARS, "content": "keys"})
        if res is None:
            return None
        doc, steps = res
        for i, step in enumerate(steps):
            if step.get("truncated"):  # a tool result or snapshot longer than FULL_CHARS
                steps[i] = self._request("GET", f"{path}/steps/{step['index']}")["step"]
        texts = self._message_texts(session_id) if steps else {}
        parsed: dict[str, dict] = {}  # one dict per message, shared by every step that shows it

        def message(ref: str) -> dict:
            if ref not in parsed:
                parsed[ref] = stored_message(texts[ref]) if ref in texts else {"role": "unknown", "content": None}
            return parsed[ref]

        for step in steps:
            step["input_messages"] = [message(r) for r in step.pop("input_message_keys")]
            ref = step.pop("output_message_key")
            if step.get("output_message") is None and ref is not None:
                step["output_message"] = message(ref)
        doc.pop("page", None)
        doc.pop("messages", None)
        doc["steps"] = steps
        return doc

    def session_page(self, session_id: str, offset: int = 0, limit: int = 100, max_chars: int = 2000) -> dict | None:
        """One page of the session as the API answers it (contracts §1b)."""
        return self._request("GET", f"/api/v1/sessions/{self._sid(session_id)}", missing_ok=True,
                             query={"offset": offset, "limit": limit, "max_chars": max_chars})

    def get_spans(self, session_id: str) -> list[dict]:
        res = self._paged(f"/api/v1/sessions/{self._sid(session_id)}/spans", "spans", self.PAGE_ITEMS)
        spans = res[1] if res else []
        texts = self._message_texts(session_id) if any("message_keys" in s for s in spans) else {}
        for span in spans:
            refs = span.pop("message_keys", None)
            if refs:
                restore_message_attributes(span["attributes"], refs, texts)
        return spans

    def add_feedback(self, session_id: str, score: float, comment: str | None = None) -> dict:
        return self._request("POST", "/api/v1/feedback",
                             {"session_id": session_id, "score": score, "comment": comment})

    def import_sessions(self, docs: list[dict]) -> list[str]:
        return self._request("POST", "/api/v1/import", {"sessions": docs})["session_ids"]

    def import_new_sessions(self, docs: list[dict]) -> tuple[list[str], list[str]]:
        answer = self._request("POST", "/api/v1/import", {"sessions": docs, "skip_stored": True})
        return answer["session_ids"], answer["skipped"]

    def training_sessions(self, criterion: str = "success") -> list[SessionDocument]:
        res = self._paged("/api/v1/training_sessions", "sessions", self.PAGE_ITEMS, query={"criterion": criterion})
        return res[1] if res else []

    def save_analysis(self, session_id: str, result: Mapping[str, Any]) -> None:
        self._request("POST", f"/api/v1/sessions/{self._sid(session_id)}/analysis", result)

    def get_analysis(self, session_id: str) -> JsonDict | None:
        return self._request("GET", f"/api/v1/sessions/{self._sid(session_id)}/analysis", missing_ok=True)

    def save_replay(self, session_id: str, result: Mapping[str, Any]) -> None:
        self._request("POST", f"/api/v1/sessions/{self._sid(session_id)}/replay", result)

    def get_replay(self, session_id: str) -> JsonDict | None:
        return self._request("GET", f"/api/v1/sessions/{self._sid(session_id)}/replay", missing_ok=True)

    def list_jobs(self, state: str | None = None, session_id: str | None = None, kind: str | None = None, *,
                  newest: int | None = None) -> list[dict]:
        res = self._paged("/api/v1/jobs", "jobs", self.PAGE_ITEMS, most=newest,
                          query={"state": state, "session_id": session_id, "kind": kind,
                                 "order": "newest" if newest else None})
        return res[1] if res else []

    def enqueue_job(self, session_id: str, reason: str = "manual", kind: str = "diagnosis",
                    options: dict | None = None) -> dict:
        return self._request("POST", "/api/v1/jobs",
                             {"session_id": session_id, "reason": reason, "kind": kind, **(options or {})})

    # --- the worker's side of a job (tracefix.replay.worker) ---------------------------------
    def claim_job(self, kind: str, worker: str, lease_s: float) -> dict | None:
        return self._request("POST", "/api/v1/jobs/claim", {"kind": kind, "worker": worker, "lease_s": lease_s})

    def _job_call(self, job_id: str, action: str, body: dict) -> bool:
        """False when the collector answers 409: the job is no longer this worker's."""
        try:
            self._request("POST", f"/api/v1/jobs/{self._sid(job_id)}/{action}", body)
            return True
        except AccessError as exc:
            if exc.status == 409:
                return False
            raise

    def renew_lease(self, job_id: str, worker: str, lease_s: float) -> bool:
        return self._job_call(job_id, "lease", {"worker": worker, "lease_s": lease_s})

    def finish_job(self, job_id: str, *, worker: str, state: str, error: str | None = None) -> bool:
        return self._job_call(job_id, "finish", {"worker": worker, "state": state, "error": error})

    def list_alerts(self, session_id: str | None = None, *, newest: int | None = None) -> list[dict]:
        res = self._paged("/api/v1/alerts", "alerts", self.PAGE_ITEMS, most=newest,
                          query={"session_id": session_id, "order": "newest" if newest else None})
        return res[1] if res else []

    def store_path(self) -> str | None:
        """The collector's DuckDB file (told to token holders only, not by /healthz), or None."""
        try:
            db = self._request("GET", "/api/v1/store").get("db")
        except (AccessError, AttributeError):
            return None
        return db if isinstance(db, str) and db != ":memory:" else None

    # --- datasets of sessions, regression results (collector/api/datasets.py) ----------------
    def add_to_dataset(self, dataset: str, session_ids: list[str]) -> dict:
        return self._request("POST", "/api/v1/datasets/items", {"dataset": dataset, "session_ids": session_ids})

    def import_dataset_items(self, dataset: str | None, items: list[dict]) -> dict:
        return self._request("POST", "/api/v1/datasets/import", {"dataset": dataset, "items": items})

    def list_datasets(self) -> list[dict]:
        return self._request("GET", "/api/v1/datasets")["datasets"]

    def dataset_items(self, dataset: str | None = None, *, full: bool = False, service: str | None = None,
                      since: Any = None, kind: str | None = None, session_ids: list[str] | None = None) -> list[dict]:
        out: list[dict] = []
        for session_id in session_ids if session_ids is not None else [None]:  # the API takes one id a query here
            res = self._paged("/api/v1/datasets/items", "items", self.PAGE_ITEMS,
                              query={"dataset": dataset, "service": service, "since": since, "kind": kind,
                                     "session_id": session_id, "full": "true" if full else None})
            out += res[1] if res else []
        return out

    def save_regress_result(self, run_id: str, session_id: str, result: Mapping[str, Any]) -> None:
        self._request("POST", "/api/v1/regress", {"run_id": run_id, "session_id": session_id, "result": result})

    def regress_results(self, run_id: str) -> list[dict]:
        return self._request("GET", "/api/v1/regress", query={"run_id": run_id, "limit": 1000})["results"]

    def queue_regress(self, run_id: str, entries: list[tuple[str, str]], options: dict) -> list[str]:
        return self._request("POST", "/api/v1/regress/queue",
                             {"run_id": run_id, "items": [list(e) for e in entries], **options})["job_ids"]
