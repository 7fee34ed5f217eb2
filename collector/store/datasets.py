"""Datasets of sessions, and what `tracefix regress` found when it ran them again.

An item is one session in one named dataset, with how it got there (its `kind`): a
thumbs-down (`thumbs-down`, added by the feedback's own transaction, `FeedbackOutbox`), a
person's choice (`added`: the API, `tracefix dataset add`) or an import (`imported`, which
keeps the exported item whole: its session may live in another store). What an item says
(entrypoint, inputs, outcome, milestones, the validated edit) is read from its session, its
diagnosis and its replay result when it is shown (`collector.datasets`), so the edit a replay
validated after the thumbs-down is there too.

A regression run is the results of its items, one row each (`save_regress_result`).
Functions over a store (`Store`, or any `StoreConnection`), called in its single writer for
the writes, as the `StoreAccess` and the API's router do.
"""
from __future__ import annotations

import json
import time
from typing import Any, Iterable, Mapping

from tracefix.collector import document
from tracefix.collector.redact import redact_value
from tracefix.collector.store.connection import StoreConnection
from tracefix.collector.store.jobs import insert_job
from tracefix.collector.store.sql import in_strings, records
from tracefix.errors import UnknownSession

DEFAULT_DATASET = "default"
ITEM_KINDS = ("thumbs-down", "added", "imported")
MAX_NAME_CHARS = 200


def check_dataset_name(name: Any) -> str:
    """A dataset's name as stored: non-empty text of at most MAX_NAME_CHARS, no line breaks."""
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS or any(c in name for c in "\r\n\x00"):
        raise ValueError(f"a dataset's name is a non-empty text of at most {MAX_NAME_CHARS} characters on one line")
    return name.strip()


def insert_item(con, dataset: str, session_id: str, kind: str, added_ns: int, item: Mapping | None = None) -> bool:
    """Put one session in a dataset (once: a session already there keeps its first entry);
    True when it was new. `con` is the caller's transaction (the feedback's, for a thumbs-down)."""
    if con.execute("SELECT 1 FROM dataset_items WHERE dataset = ? AND session_id = ?",
                   [dataset, session_id]).fetchone() is not None:
        return False
    con.execute("INSERT INTO dataset_items VALUES (?, ?, ?, ?, ?)",
                [dataset, session_id, kind, json.dumps(item, ensure_ascii=False) if item is not None else None, added_ns])
    return True


def add_to_dataset(store: StoreConnection, dataset: str, session_ids: Iterable[str], kind: str = "added") -> dict:
    """Add stored sessions to `dataset`: {"dataset", "added": [ids], "present": [ids already
    there]}. Raises UnknownSession (nothing added) when one is not stored."""
    dataset = check_dataset_name(dataset)
    ids = list(dict.fromkeys(session_ids))
    added: list[str] = []
    present: list[str] = []
    now = time.time_ns()
    with store._tx() as con:
        where, params = in_strings(ids)
        stored = {r[0] for r in con.execute(f"SELECT session_id FROM sessions WHERE session_id {where}",
                                            params).fetchall()}
        missing = [s for s in ids if s not in stored]
        if missing:
            raise UnknownSession(missing[0])
        for session_id in ids:
            (added if insert_item(con, dataset, session_id, kind, now) else present).append(session_id)
    return {"dataset": dataset, "added": added, "present": present}

def import_items(store: StoreConnection, dataset: str, items: Iterable[Mapping]) -> dict:
    """Put exported items in `dataset`, each kept whole (its session need not be stored)."""
    dataset = check_dataset_name(dataset)
    added: list[str] = []
    present: list[str] = []
    now = time.time_ns()
    with store._tx() as con:
        for n, item in enumerate(items):  # a nanosecond apart: listed in the order they came
            session_id = item["session_id"]
            kept = redact_value("dataset item", {k: v for k, v in item.items() if k not in ("dataset", "kind")})
            (added if insert_item(con, dataset, session_id, "imported", now + n, kept) else present).append(session_id)
    return {"dataset": dataset, "added": added, "present": present}

def list_datasets(store: StoreConnection) -> list[dict]:
    """Each dataset's name, how many items it has and of which kinds."""
    rows = records(store._read().execute(
        "SELECT dataset, count(*) AS items, count(*) FILTER (kind = 'thumbs-down') AS thumbs_down, "
        "count(*) FILTER (kind = 'added') AS added, count(*) FILTER (kind = 'imported') AS imported, "
        "max(added_ns) AS last_ns FROM dataset_items GROUP BY dataset ORDER BY dataset"))
    return [{**{k: v for k, v in r.items() if k != "last_ns"}, "last_added_at": document.iso(r["last_ns"])}
            for r in rows]

def dataset_rows(store: StoreConnection, dataset: str | None = None, *, service: str | None = None, since: Any = None,
                 kind: str | None = None, session_ids: Iterable[str] | None = None) -> list[dict]:
    """The items (of `dataset`, else of all), oldest first, with their session's columns and
    their replay result: what `collector.datasets.item_of` makes an item of. `service` and
    `since` (when the session started) filter by the session, `kind` by how it came in."""
    if kind is not None and kind not in ITEM_KINDS:
        raise ValueError(f"an item's kind is one of {', '.join(ITEM_KINDS)}, not {kind!r}")
    where: list[str] = ["TRUE"]
    params: list = []
    if dataset is not None:
        where.append("d.dataset = ?")
        params.append(dataset)
    if kind is not None:
        where.append("d.kind = ?")
        params.append(kind)
    if service is not None:
        where.append("coalesce(s.service, json_extract_string(d.item, '$.service')) = ?")
        params.append(service)
    if since is not None:
        where.append("coalesce(s.started_ns, 0) >= ?")
        params.append(document.to_ns(since))
    if session_ids is not None:
        clause, more = in_strings(session_ids)
        where.append(f"d.session_id {clause}")
        params += more
    return records(store._read().execute(
        f"""SELECT d.dataset, d.session_id, d.kind, d.item, d.added_ns, s.service, s.entrypoint, s.inputs,
                   s.outcome, s.score, s.evaluation, s.started_ns, s.ended_ns, s.session_id IS NOT NULL AS stored,
                   r.result AS replay, a.session_id IS NOT NULL AS analysed,
                   (SELECT min(f.score) FROM feedback f WHERE f.session_id = d.session_id) AS feedback_score
            FROM dataset_items d LEFT JOIN sessions s USING (session_id)
                 LEFT JOIN replays r USING (session_id) LEFT JOIN analyses a USING (session_id)
            WHERE {' AND '.join(where)} ORDER BY d.added_ns, d.dataset, d.session_id""", params))

def save_regress_result(store: StoreConnection, run_id: str, session_id: str, result: Mapping[str, Any]) -> None:
    """Store (or replace) one item's result in regression run `run_id`."""
    result = redact_value("regress", dict(result))
    with store._tx() as con:
        con.execute("DELETE FROM regress_results WHERE run_id = ? AND session_id = ?", [run_id, session_id])
        con.execute("INSERT INTO regress_results VALUES (?, ?, ?, ?, ?)",
                    [run_id, session_id, result.get("dataset") if isinstance(result.get("dataset"), str) else None,
                     json.dumps(result, ensure_ascii=False), time.time_ns()])

def regress_results(store: StoreConnection, run_id: str) -> list[dict]:
    """The item results of regression run `run_id`, in the order they were stored."""
    rows = store._read().execute("SELECT result FROM regress_results WHERE run_id = ? ORDER BY created_ns",
                                [run_id]).fetchall()
    return [json.loads(r[0]) for r in rows]

def list_regress_runs(store: StoreConnection, limit: int = 50) -> list[dict]:
    """The regression runs, newest first: id, items, when the last result came."""
    rows = records(store._read().execute(
        "SELECT run_id, count(*) AS items, max(created_ns) AS last_ns FROM regress_results "
        "GROUP BY run_id ORDER BY last_ns DESC LIMIT ?", [limit]))
    return [{"run_id": r["run_id"], "items": r["items"], "updated_at": document.iso(r["last_ns"])} for r in rows]


def queue_regress(store: StoreConnection, run_id: str, entries: Iterable[tuple[str, str]], options: Mapping) -> list[str]:
    """One `regress` job per (dataset, session id) for `tracefix worker --jobs regress`, each
    carrying the run's id and options (runs, tools); the job ids."""
    now = time.time_ns()
    with store._tx() as con:
        return [insert_job(con, session_id, "regress", f"regress {run_id}", now,
                           {**options, "run_id": run_id, "dataset": dataset}) for dataset, session_id in entries]
