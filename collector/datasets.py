"""What a dataset item says (docs/contracts.md §8), put together from what the store holds:
the session's entrypoint, inputs and recorded outcome, the milestones its evaluator
reported, the edit its replay validated, links to its session and diagnosis, and, for an
item's full form (`full_item`: `tracefix dataset show|export`, what `tracefix regress`
runs), the app's signature records, its recorded tool calls and the state it started from.

An imported item keeps what its export said; where its session is stored here too, the
store's own values win (the diagnosis may have moved on)."""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from tracefix import fingerprints, replay_signing
from tracefix.attributes import from_json_text
from tracefix.collector import document
from tracefix.collector.store import datasets as store_datasets

# what an item carries besides its summary, for a regression run elsewhere
FULL_FIELDS = ("signatures", "recorded_tools", "snapshots")


def milestones(evaluation: Any) -> list[dict]:
    """The milestones an evaluator reported (`{"name", "achieved"}` each), else none."""
    found = (evaluation or {}).get("milestones") if isinstance(evaluation, dict) else None
    return [{"name": str(m.get("name")), "achieved": bool(m.get("achieved"))}
            for m in found or [] if isinstance(m, dict)]


def validated_edit(replay: Any) -> dict | None:
    """The edit a replay validated (the first such hypothesis), with how many of its runs succeeded."""
    for h in (replay or {}).get("hypotheses") or [] if isinstance(replay, dict) else []:
        if h.get("verdict") == "validated" and isinstance(h.get("intervention"), dict):
            runs = h.get("runs") or []
            iv = h["intervention"]
            return {"step": h.get("step"), "agent": h.get("agent"), "kind": iv.get("kind"), "text": iv.get("text"),
                    "succeeded": f"{sum(1 for r in runs if r.get('success'))}/{len(runs)}"}
    return None


def item_of(row: dict) -> dict:
    """An item's summary from its `store.datasets.dataset_rows` row."""
    kept = json.loads(row["item"]) if row.get("item") else {}
    sid = row["session_id"]
    item = {
        "dataset": row["dataset"], "session_id": sid, "kind": row["kind"], "added_at": document.iso(row["added_ns"]),
        "stored": bool(row.get("stored")),
        "service": kept.get("service"), "entrypoint": kept.get("entrypoint"), "inputs": kept.get("inputs"),
        "outcome": kept.get("outcome"), "score": kept.get("score"), "feedback_score": kept.get("feedback_score"),
        "wall_s": kept.get("wall_s"),
        "milestones": kept.get("milestones") or [], "validated_edit": kept.get("validated_edit"),
        "diagnosis": kept.get("diagnosis") or {"analysis": False, "replay": False},
        **{k: kept[k] for k in FULL_FIELDS if k in kept},
    }
    if row.get("stored"):
        replay = json.loads(row["replay"]) if row.get("replay") else None
        item.update({
            "service": row["service"], "entrypoint": row["entrypoint"], "inputs": from_json_text(row["inputs"]),
            "outcome": row["outcome"], "score": row["score"], "feedback_score": row["feedback_score"],
            "wall_s": (row["ended_ns"] - row["started_ns"]) / 1e9 if row["ended_ns"] and row["started_ns"] else None,
            "milestones": milestones(from_json_text(row["evaluation"])) or item["milestones"],
            "validated_edit": validated_edit(replay) or item["validated_edit"],
            "diagnosis": {"analysis": bool(row["analysed"]), "replay": replay is not None,
                          "report": f"/api/v1/sessions/{quote(sid, safe='')}/report",
                          "page": f"/diagnosis?id={quote(sid, safe='')}"},
            "session": f"/session?id={quote(sid, safe='')}",
        })
    return item


def full_item(store, row: dict) -> dict:
    """An item whole: its summary and, from its stored session, the signature records, the
    recorded tool calls (fingerprint, result or error) and the snapshots it started from."""
    item = item_of(row)
    if not row.get("stored"):
        return item
    doc = store.get_session(row["session_id"]) or {}
    spans = store.get_spans(row["session_id"])
    item["signatures"] = replay_signing.records(spans)
    item["recorded_tools"] = [{"step": step["index"], "name": c.get("name"),
                               "fingerprint": fingerprints.fingerprint_tool(c.get("name"), c.get("arguments")),
                               "result": c.get("result"), "error": c.get("error")}
                              for step in doc.get("steps") or [] for c in step.get("tool_calls") or []]
    steps = doc.get("steps") or []
    first = min((s["index"] for s in steps if s.get("snapshots")), default=None)
    item["snapshots"] = [{"step": s["index"], "key": key, "state": state} for s in steps
                         if s["index"] == first for key, state in (s.get("snapshots") or {}).items()]
    return item


def list_items(store, dataset: str | None = None, **filters) -> list[dict]:
    return [item_of(row) for row in store_datasets.dataset_rows(store, dataset, **filters)]


def export_items(store, dataset: str | None = None, **filters) -> list[dict]:
    return [full_item(store, row) for row in store_datasets.dataset_rows(store, dataset, **filters)]
