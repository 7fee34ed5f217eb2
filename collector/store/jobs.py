"""The job queue: diagnosis jobs run by the collector or leased to workers, replay jobs leased to workers."""
from __future__ import annotations

import json
import time
import uuid
from typing import Any, Sequence

from tracefix.attributes import from_json_text
from tracefix.collector import document
from tracefix.collector.jobs import FINISHED_JOB_STATES, JOB_KINDS, MAX_JOB_ATTEMPTS, replay_request
from tracefix.collector.redact import redact_text
from tracefix.collector.store.connection import StoreConnection
from tracefix.collector.store.sql import in_strings, records, scalar
from tracefix.errors import UnknownSession


def insert_job(con, session_id: str, kind: str, reason: str, created_ns: int, options: dict | None = None) -> str:
    job_id = f"job-{uuid.uuid4().hex[:16]}"
    con.execute("INSERT INTO jobs (job_id, session_id, kind, state, reason, attempts, created_ns, options) "
                "VALUES (?, ?, ?, 'queued', ?, 0, ?, ?)",
                [job_id, session_id, kind, reason, created_ns, json.dumps(options) if options else None])
    return job_id


class JobQueue(StoreConnection):
    """Jobs queued, claimed (leased to a worker for replays), renewed and finished."""

    def enqueue_job(self, session_id: str, reason: str = "manual", kind: str = "diagnosis",
                    options: dict | None = None) -> dict:
        """Queue a job; a replay job's `options` is a `replay_request` (what to test)."""
        if kind not in JOB_KINDS:
            raise ValueError(f"a job's kind is one of {', '.join(JOB_KINDS)}, not {kind!r}")
        if options and kind != "replay":
            raise ValueError("only a replay job takes steps or an edit")
        options = replay_request(options.get("steps"), options.get("edit")) if options else None
        with self._tx() as con:
            if con.execute("SELECT 1 FROM sessions WHERE session_id = ?", [session_id]).fetchone() is None:
                raise UnknownSession(session_id)
            job_id = insert_job(con, session_id, kind, reason, time.time_ns(), options)
        return {"job_id": job_id, "session_id": session_id, "kind": kind, "state": "queued", "options": options}

    def claim_job(self, kind: str = "diagnosis", worker: str | None = None, lease_s: float | None = None) -> dict | None:
        """The oldest queued job of `kind`, now running. With `lease_s` the job is leased to
        `worker` until the lease runs out; an expired lease (a worker that died) puts its job
        back in the queue first, or fails it after MAX_JOB_ATTEMPTS."""
        now = time.time_ns()
        if worker is None and self.shared:  # a collector's own job: its instance lock says it still runs
            worker = self.instance

        def claim(con) -> str | None:
            # checked first: on a lake an UPDATE costs catalog round trips even when it changes nothing
            if con.execute("SELECT 1 FROM jobs WHERE kind = ? AND state = 'running' AND lease_until_ns < ? LIMIT 1",
                           [kind, now]).fetchone() is not None:
                con.execute("UPDATE jobs SET state = 'failed', finished_ns = ?, "
                            "error = 'its worker stopped renewing the lease ' || attempts || ' times' "
                            "WHERE kind = ? AND state = 'running' AND lease_until_ns < ? AND attempts >= ?",
                            [now, kind, now, MAX_JOB_ATTEMPTS])
                con.execute("UPDATE jobs SET state = 'queued', worker = NULL, lease_until_ns = NULL "
                            "WHERE kind = ? AND state = 'running' AND lease_until_ns < ?", [kind, now])
            if self.shared and lease_s is None:  # a collector's own kind of job: those of dead collectors first
                self._requeue_unowned(con, kind)
            row = con.execute("SELECT job_id FROM jobs WHERE kind = ? AND state = 'queued' ORDER BY created_ns LIMIT 1",
                              [kind]).fetchone()
            if row is None:
                return None
            job_id = row[0]
            lease = now + int(lease_s * 1e9) if lease_s else None
            con.execute("UPDATE jobs SET state = 'running', attempts = attempts + 1, started_ns = ?, worker = ?, "
                        "lease_until_ns = ? WHERE job_id = ?", [now, worker, lease, job_id])
            return job_id

        # on a lake: one claim of a kind at a time, beside span transactions (lake.LakeLock.run)
        job_id = self._write(claim, [f"jobs:{kind}"])
        return self.get_job(job_id) if job_id is not None else None

    def renew_lease(self, job_id: str, worker: str, lease_s: float) -> bool:
        """Extend a running job's lease; False when the job is no longer this worker's."""
        # SELECT, then UPDATE in the same transaction (DuckLake has no UPDATE ... RETURNING)
        with self._tx() as con:
            row = con.execute("SELECT job_id FROM jobs WHERE job_id = ? AND state = 'running' AND worker = ?",
                              [job_id, worker]).fetchone()
            if row is not None:
                con.execute("UPDATE jobs SET lease_until_ns = ? WHERE job_id = ?",
                            [time.time_ns() + int(lease_s * 1e9), job_id])
        return row is not None

    def finish_job(self, job_id: str, *, error: str | None = None, state: str | None = None,
                   worker: str | None = None) -> bool:
        """End a running job: `done`, `failed` (with `error`) or `refused` (the worker may not
        run it; `error` says why). With `worker`, only that worker's job; False otherwise."""
        state = state or ("failed" if error else "done")
        if state not in FINISHED_JOB_STATES:
            raise ValueError(f"a finished job's state is one of {', '.join(FINISHED_JOB_STATES)}, not {state!r}")
        error = redact_text(error) if error else error  # an agent's exception may quote a credential
        with self._tx() as con:
            row = con.execute("SELECT job_id FROM jobs WHERE job_id = ? AND state = 'running' "
                              "AND (? IS NULL OR worker = ?)", [job_id, worker, worker]).fetchone()
            if row is not None:
                con.execute("UPDATE jobs SET state = ?, error = ?, finished_ns = ?, lease_until_ns = NULL "
                            "WHERE job_id = ?", [state, error, time.time_ns(), job_id])
        return row is not None

    def requeue_running_jobs(self, kind: str = "diagnosis") -> int:
        """Jobs of `kind` left `running` by a crash of this process run again, unless they
        already ran MAX_JOB_ATTEMPTS times: a job that takes the process down with it must not
        do so at every start (leased jobs belong to workers that may outlive the collector:
        their leases decide). On a lake, other collectors run theirs: only the jobs of
        collectors that no longer run (their instance lock is free)."""
        with self._tx() as con:
            return self._requeue_unowned(con, kind)

    def _requeue_unowned(self, con, kind: str) -> int:
        # leased jobs (a `tracefix worker`'s) are not the collector's: their leases decide
        where = "state = 'running' AND kind = ? AND lease_until_ns IS NULL"
        params: list[Any] = [kind]
        if self.shared:
            assert self.lock is not None
            owners = [w for (w,) in con.execute("SELECT DISTINCT worker FROM jobs WHERE state = 'running' "
                                                "AND kind = ? AND lease_until_ns IS NULL", [kind]).fetchall()]
            gone = [w for w in owners if w is None or not self.lock.alive(w)]
            if not gone:
                return 0
            where += " AND (worker IS NULL OR worker IN (SELECT unnest(?::VARCHAR[])))"
            params.append([w for w in gone if w is not None])
        con.execute("UPDATE jobs SET state = 'failed', finished_ns = ?, "
                    "error = 'the collector stopped while running it ' || attempts || ' times' "
                    f"WHERE {where} AND attempts >= ?", [time.time_ns(), *params, MAX_JOB_ATTEMPTS])
        n = con.execute(f"SELECT count(*) FROM jobs WHERE {where}", params).fetchone()[0]
        con.execute(f"UPDATE jobs SET state = 'queued', worker = NULL WHERE {where}", params)
        return n

    def get_job(self, job_id: str) -> dict | None:
        jobs = self.list_jobs(job_id=job_id)
        return jobs[0] if jobs else None

    def job_counts(self) -> dict[tuple[str, str], int]:
        """How many jobs there are of each (kind, state), on a cursor of its own."""
        cur = self.cursor()
        try:
            return {(kind, state): n for kind, state, n in
                    cur.execute("SELECT kind, state, count(*) FROM jobs GROUP BY kind, state").fetchall()}
        finally:
            cur.close()

    def list_jobs(self, state: str | None = None, session_id: str | None = None, job_id: str | None = None,
                  kind: str | None = None, *, job_ids: Sequence[str] | None = None, offset: int = 0,
                  limit: int | None = None, newest_first: bool = False) -> list[dict]:
        """Jobs in the order they were queued (`newest_first` reverses it), from `offset`, at
        most `limit` of them (None: all). `job_ids` keeps only those jobs (a page's live poll)."""
        where, params = _job_filter(state, session_id, job_id, kind, job_ids)
        order = "DESC" if newest_first else "ASC"
        rows = records(self._read().execute(
            f"""SELECT job_id, session_id, kind, state, reason, attempts, error, created_ns, started_ns, finished_ns,
                       worker, lease_until_ns, options
                FROM jobs WHERE {where}
                ORDER BY created_ns {order}, job_id LIMIT ? OFFSET ?""",
            [*params, limit, offset]))
        return [{"job_id": r["job_id"], "session_id": r["session_id"], "kind": r["kind"], "state": r["state"],
                 "reason": r["reason"], "attempts": r["attempts"], "error": r["error"],
                 "created_at": document.iso(r["created_ns"]), "started_at": document.iso(r["started_ns"]),
                 "finished_at": document.iso(r["finished_ns"]), "worker": r["worker"],
                 "lease_until": document.iso(r["lease_until_ns"]), "options": from_json_text(r["options"])}
                for r in rows]

    def count_jobs(self, state: str | None = None, session_id: str | None = None, kind: str | None = None, *,
                   job_ids: Sequence[str] | None = None) -> int:
        """How many jobs `list_jobs` with the same filters lists in all (a page's total)."""
        where, params = _job_filter(state, session_id, None, kind, job_ids)
        return scalar(self._read().execute(f"SELECT count(*) FROM jobs WHERE {where}", params))


def _job_filter(state: str | None, session_id: str | None, job_id: str | None, kind: str | None,
                job_ids: Sequence[str] | None) -> tuple[str, list]:
    """The WHERE clause of a filtered read of jobs, and its parameters (a None filter keeps all)."""
    where = "(? IS NULL OR state = ?) AND (? IS NULL OR session_id = ?) AND (? IS NULL OR job_id = ?) " \
            "AND (? IS NULL OR kind = ?)"
    params = [state, state, session_id, session_id, job_id, job_id, kind, kind]
    if job_ids is not None:
        listed, listed_params = in_strings(job_ids)
        where, params = f"{where} AND job_id {listed}", [*params, *listed_params]
    return where, params
