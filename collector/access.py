"""Store access for every part of tracefix (docs/contracts.md §2).

    from tracefix.collector.access import connect
    with connect() as store:               # a running `tracefix serve`, else the DuckDB file
        for s in store.list_sessions(feedback="negative"):
            doc = store.get_session(s["session_id"])

`connect(server=None, db=None, token=None)`:
- `server` (or TRACEFIX_SERVER): talk HTTP to that collector when it answers `/healthz`;
- otherwise a collector on the default port serving the same file is used when one runs
  (the collector process is the only writer of its file; its unauthenticated `/healthz`
  names the file by `store_identity`, never by its path);
- otherwise the file `db` (or TRACEFIX_DB, default ./.tracefix/tracefix.duckdb) is opened.
A collector found either way that answers `/healthz` with 503 "unhealthy" (its store cannot
write) is an AccessError that says why, never a reason to open its file instead.
`token` (or TRACEFIX_TOKEN) is the collector's bearer token.

The three implementations (HTTP, file, in-process inside `tracefix serve`) have the same
methods and return the same JSON shapes.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping

from tracefix.client_tls import certificate_hint, client_context
from tracefix.collector import db_path
from tracefix.collector.contracts import JsonDict, SessionDocument
from tracefix.collector.document import restore_message_attributes, stored_message
from tracefix.errors import TracefixError, UnknownSession

DEFAULT_SERVER = "http://127.0.0.1:4318"


class AccessError(TracefixError, RuntimeError):
    """The store could not be reached (`status` None) or refused the request (its HTTP status)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class _Base:
    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class HttpAccess(_Base):
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
                      limit=50, offset=0, parent_session_id=None) -> list[dict]:
        return self._request("GET", "/api/v1/sessions", query=dict(
            feedback=feedback, outcome=outcome, service=service, agent=agent, since=since, until=until,
            limit=limit, offset=offset, parent_session_id=parent_session_id))["sessions"]

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


class StoreAccess(_Base):
    """Access bound to a Store object. With `writer` (inside `tracefix serve`) writes go
    through the single writer thread; without, the store is written directly (CLI on a file)."""

    kind = "file"

    def __init__(self, store, writer=None, owns_store: bool = False):
        self.store = store
        self.writer = writer
        self.owns_store = owns_store
        if writer is not None:
            self.kind = "in-process"

    def _write(self, fn):
        return self.writer.run(fn, timeout=300) if self.writer is not None else fn(self.store)

    def close(self) -> None:
        if self.owns_store:
            self.store.close()

    def list_sessions(self, feedback=None, outcome=None, service=None, agent=None, since=None, until=None,
                      limit=50, offset=0, parent_session_id=None) -> list[dict]:
        return self.store.list_sessions(feedback=feedback, outcome=outcome, service=service, agent=agent, since=since,
                                        until=until, limit=limit, offset=offset, parent_session_id=parent_session_id)

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


def collector_health(server: str, timeout: float) -> dict | None:
    """What a tracefix serve at `server` says on /healthz: its answer, an unhealthy one's 503
    included (`refuse_unhealthy`); None when nothing there answers as one."""
    context = client_context()  # outside the try: unusable client TLS settings are said, not taken for "no collector"
    try:
        with urllib.request.urlopen(server.rstrip("/") + "/healthz", timeout=timeout, context=context) as resp:
            return json.loads(resp.read()) if resp.status == 200 else None
    except urllib.error.HTTPError as exc:  # 503: a collector whose store cannot write says so and why
        try:
            answer = json.loads(exc.read()) if exc.code == 503 else None
        except (OSError, ValueError, http.client.HTTPException):
            return None
        return answer if isinstance(answer, dict) and answer.get("status") == "unhealthy" else None
    except (OSError, ValueError, http.client.HTTPException):  # HTTPException: a port that speaks no HTTP
        return None


def refuse_unhealthy(server: str, health: Mapping[str, Any]) -> None:
    """Raise AccessError (503) saying why, when the collector that answered `health` cannot write
    its store. It is still the store's only writer: nobody should open the file instead."""
    if health.get("status") == "unhealthy":
        raise AccessError(f"tracefix serve at {server} is unhealthy, its store cannot write: "
                          f"{health.get('reason') or 'no reason given'}", 503)


def store_identity(path: str | os.PathLike) -> str | None:
    """Which file a store is, without saying where it is: a hash of the file's device and
    inode (what `os.path.samefile` compares). `/healthz` shows it to anyone; whoever can
    stat the same file computes the same value, nobody learns the path from it."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # no such file, or ':memory:'
        return None
    return hashlib.sha256(f"tracefix store identity v1:{st.st_dev}:{st.st_ino}".encode()).hexdigest()[:32]


def serves_file(health: dict | None, path: str | os.PathLike) -> bool:
    """Whether the collector that answered `health` owns the DuckDB file at `path`."""
    theirs = (health or {}).get("store_id")
    return isinstance(theirs, str) and theirs == store_identity(path)


def connect(server: str | None = None, db: str | os.PathLike | None = None, token: str | None = None):
    """An access object: HTTP to a running collector when one answers, else the DuckDB file."""
    token = token or os.environ.get("TRACEFIX_TOKEN") or None
    explicit = server or os.environ.get("TRACEFIX_SERVER") or None
    health = collector_health(explicit, timeout=2.0) if explicit else None
    if explicit and health is not None:
        refuse_unhealthy(explicit, health)
        return HttpAccess(explicit, token)
    path = db_path(db)
    if explicit:
        logging.getLogger("tracefix.collector.access").warning(
            "no tracefix serve answers at %s%s; using the file %s", explicit, certificate_hint(explicit), path)
    if not explicit:  # a collector on the default port that owns this very file
        health = collector_health(DEFAULT_SERVER, timeout=0.3)
        if health is not None and serves_file(health, path):
            refuse_unhealthy(DEFAULT_SERVER, health)
            return HttpAccess(DEFAULT_SERVER, token)
    from tracefix.collector.store import Store

    try:
        return StoreAccess(Store(path), owns_store=True)
    except Exception as exc:
        if "lock" in str(exc).lower():
            raise AccessError(f"{path} is held by a running tracefix serve; pass --server URL "
                              f"(or TRACEFIX_SERVER) to go through it") from exc
        raise
