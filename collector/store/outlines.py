"""Session outlines kept between reads (Pages.session_outline). The web UI's session page
draws every step of a session (its lanes link to each one); assembling a 10,000-step outline
from its 30,000 spans costs ~0.2 s of CPU, and a person reading the session asks for it at each
step they open. A kept outline serves as long as the session's row says nothing was written to
it since (`updated_ns`: every ingest that touches a session sets it); what a person adds
without spans (feedback, step marks) is read fresh each time.

What is kept of each step beside its compact form is what fills it in full (`full_step`), in
tuples of numbers and strings: Python's cycle collector stops tracking those, whereas the
assembled steps (dicts, lists, message and row references) were tracked while kept: a
10,000-step outline added 82,000 objects for it to walk (30,000 now: the compact steps and
their lists of tool calls), enough to set off a full collection of the process.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from tracefix.collector import document

# steps of all kept outlines together: a kept step holds ~1.8 KB (a 10,000-step outline 18 MB, as
# compact steps and their fills, measured with tracemalloc; 30 MB when the assembled steps were
# kept), so two such sessions, or many short ones, are kept at a time
MAX_KEPT_STEPS = 20_000

# a compact step: what a timeline and a step list show of it
COMPACT_FIELDS = ("index", "kind", "agent", "model", "started_at", "duration_ms", "input_tokens", "output_tokens",
                  "cost_usd", "finish_reason", "error", "replay_source")
COMPACT_CALL_FIELDS = ("id", "name", "error", "duration_ms")
_pick, _pick_call = itemgetter(*COMPACT_FIELDS), itemgetter(*COMPACT_CALL_FIELDS)


@dataclass(frozen=True)
class KeptOutline:
    version: int | None  # the session row's updated_ns when it was read
    doc: dict[str, Any]  # the outline document, its steps compact (never changed once kept)
    # by step index: (its position in doc["steps"], span id, output message key, (rowid and span
    # id of each tool call), (key and rowid of each snapshot)): what fills the step in full
    fills: dict[int, tuple]
    step_of_span: dict[str, int]  # each step's index by its span id


def kept_outline(version: int | None, doc: dict[str, Any]) -> KeptOutline:
    """The outline to keep of an assembled document (`assemble.build`'s steps, as a paged
    read leaves them: message and row references in place of contents)."""
    compact: list[dict] = []
    fills: dict[int, tuple] = {}
    for step in doc["steps"]:
        out = dict(zip(COMPACT_FIELDS, _pick(step)))
        output = step["output_message"]
        out["output_message_key"] = document.key_ref(output.key) if output is not None else None
        out["tool_calls"] = [dict(zip(COMPACT_CALL_FIELDS, _pick_call(tc))) for tc in step["tool_calls"]]
        fills[step["index"]] = (
            len(compact), step["span_id"], output.key if output is not None else None,
            tuple((_rowid(tc["arguments"]), tc["span_id"]) for tc in step["tool_calls"]),
            tuple((key, _rowid(ref)) for key, ref in step["snapshots"].items()))
        compact.append(out)
    return KeptOutline(version, {**doc, "steps": compact}, fills,
                       {fill[1]: index for index, fill in fills.items()})


def unfilled_step(kept: KeptOutline, index: int, input_keys: list[int]) -> dict:
    """Step `index` (one of `kept.fills`) as `assemble.build` made it, references in place of
    contents (for `Pages._fill_step`), from its compact form and fill."""
    position, span_id, output_key, calls, snapshots = kept.fills[index]
    step = kept.doc["steps"][position]
    return {
        "index": step["index"], "kind": step["kind"], "agent": step["agent"], "span_id": span_id,
        "model": step["model"], "started_at": step["started_at"], "duration_ms": step["duration_ms"],
        "input_messages": [document.MessageRef(k) for k in input_keys],
        "output_message": document.MessageRef(output_key) if output_key is not None else None,
        "finish_reason": step["finish_reason"], "input_tokens": step["input_tokens"],
        "output_tokens": step["output_tokens"], "cost_usd": step["cost_usd"],
        "tool_calls": [{"id": tc["id"], "name": tc["name"], "arguments": _ref(rowid), "result": _ref(rowid),
                        "error": tc["error"], "span_id": tool_span_id, "duration_ms": tc["duration_ms"]}
                       for tc, (rowid, tool_span_id) in zip(step["tool_calls"], calls)],
        "error": step["error"], "snapshots": {key: _ref(rowid) for key, rowid in snapshots},
        "replay_source": step["replay_source"],
    }


def _rowid(ref: Any) -> int | None:
    return ref.rowid if isinstance(ref, document.RowRef) else None


def _ref(rowid: int | None) -> document.RowRef | None:
    return document.RowRef(rowid) if rowid is not None else None


class Outlines:
    """The outlines of the sessions read last, up to MAX_KEPT_STEPS steps in all."""

    def __init__(self, max_steps: int = MAX_KEPT_STEPS):
        self._kept: OrderedDict[str, KeptOutline] = OrderedDict()
        self._lock = threading.Lock()
        self._max_steps = max_steps

    def get(self, session_id: str, version: int | None) -> KeptOutline | None:
        with self._lock:
            kept = self._kept.get(session_id)
            if kept is None or kept.version != version:
                return None
            self._kept.move_to_end(session_id)
            return kept

    def put(self, session_id: str, kept: KeptOutline) -> None:
        if len(kept.fills) > self._max_steps:
            return
        with self._lock:
            self._kept[session_id] = kept
            self._kept.move_to_end(session_id)
            while sum(len(k.fills) for k in self._kept.values()) > self._max_steps:
                self._kept.popitem(last=False)
