"""`Batch`: everything one export request (or import) contributes, ready for one
transaction: span rows, content-addressed messages, session fields, snapshots, evaluations."""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field

import pyarrow as pa

from tracefix.collector.normalize.json_text import dumps_compact
from tracefix.collector.normalize.span_row import spans_table


@dataclass
class Snapshot:
    session_id: str
    trace_id: str
    span_id: str
    seq: int
    key: str
    state: str  # JSON text
    hash: str | None
    step: int | None
    time_ns: int


@dataclass


class Evaluation:
    feedback_id: str
    session_id: str
    score: float
    comment: str | None
    time_ns: int


@dataclass


class Batch:
    """Everything one export request contributes, ready for one transaction.

    Spans live in Arrow tables (`span_tables`, what the store inserts) and/or as dict rows
    (`rows`): `normalize_request` builds only the table, imports build only rows, and
    `spans` gives every span as a dict row, building the rows from the tables on first use."""

    rows: list[dict] = field(default_factory=list)
    messages: dict[int, tuple[str, str]] = field(default_factory=dict)  # key -> (sha256, json)
    sessions: dict[str, dict] = field(default_factory=dict)
    snapshots: list[Snapshot] = field(default_factory=list)
    evaluations: list[Evaluation] = field(default_factory=list)
    rejected: int = 0
    errors: list[str] = field(default_factory=list)  # why spans were rejected (the first few)
    warnings: list[str] = field(default_factory=list)  # what was stored differently than sent (the first few)
    wire_bytes: int = 0  # size of the request it came from (the writer's memory bound)
    # traces whose spans carried no session attribute: their session id is the trace id
    # until the store finds the trace's real session (`reassign`)
    fallback_traces: set[str] = field(default_factory=set)
    explicit_traces: dict[str, str] = field(default_factory=dict)  # trace id -> session id seen
    # Arrow tables of the spans, in order: none, or tables that hold every span
    span_tables: list = field(default_factory=list)
    merged: bool = False  # several requests: a span may repeat across them
    # spans that only `span_tables` hold (no dict row): normalize_request's, and every span
    # of a batch that crossed to the writer's process (pickling rows would cost more than
    # building them)
    table_only_spans: int = 0
    # what OTLP logs and metrics exports bring (normalize.log_records, normalize.metric_points):
    # rows of the log_records and metric_points tables
    log_records: list[dict] = field(default_factory=list)
    metric_points: list[dict] = field(default_factory=list)

    @property
    def span_count(self) -> int:
        return len(self.rows) + self.table_only_spans

    @property
    def records(self) -> int:
        """Spans, log records and metric points: what the writer's queue and the spool count."""
        return self.span_count + len(self.log_records) + len(self.metric_points)

    @property
    def spans(self) -> list[dict]:
        """Every span as a dict row (SPAN_COLUMNS keys), in order."""
        if self.table_only_spans:
            self.rows = self.span_arrow().to_pylist()
            self.table_only_spans = 0
        return self.rows

    def __getstate__(self) -> dict:
        """What crosses from a decode worker: the span tables as Arrow IPC streams (written
        and read back a few times faster than pickled tables, read without a copy), each an
        Arrow buffer, which pickle protocol 5 hands over out of band (`decode_workers`)."""
        state = dict(self.__dict__)
        if state["rows"] and state["span_tables"]:
            state["table_only_spans"] += len(state["rows"])
            state["rows"] = []
        state["span_tables"] = [_ipc_buffer(table) for table in state["span_tables"]]
        return state

    def __setstate__(self, state: dict) -> None:
        state["span_tables"] = [pa.ipc.open_stream(data).read_all() for data in state["span_tables"]]
        self.__dict__.update(state)

    def span_arrow(self):
        """All spans as one Arrow table (built from the rows of a batch that has no tables)."""
        if not self.span_count:
            return None
        tables = self._tables()
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    def _tables(self) -> list[pa.Table]:
        """Arrow tables that hold every span (built from the rows when there are none)."""
        if self.span_tables or not self.rows:
            return self.span_tables
        return [spans_table(self.rows)]

    def reassign(self, mapping: dict[str, str]) -> None:
        """Move spans of fallback traces to the session their trace is known to belong to."""
        moved = {t: sid for t, sid in mapping.items() if t in self.fallback_traces and t != sid}
        for trace_id, sid in moved.items():
            for row in self.rows:
                if row["trace_id"] == trace_id and row["session_id"] == trace_id:
                    row["session_id"] = sid
            for item in (*self.snapshots, *self.evaluations):
                if item.session_id == trace_id:
                    item.session_id = sid
            fields = self.sessions.pop(trace_id, None)
            if fields:
                merge_session(self.sessions, sid, fields)
            self.fallback_traces.discard(trace_id)
        if moved:
            self.span_tables = [_reassigned(t, moved) for t in self.span_tables]

    def halves(self) -> tuple["Batch", "Batch"]:
        """The batch cut in two by its spans (more than one), each half with the messages,
        sessions, snapshots and evaluations its own spans brought: how the writer finds the
        span a database refuses without losing the others."""
        table = self.span_arrow()
        mid = table.num_rows // 2
        return self._part(table.slice(0, mid)), self._part(table.slice(mid))

    def _part(self, table: pa.Table) -> "Batch":
        import pyarrow.compute as pc

        spans = set(zip(table["trace_id"].to_pylist(), table["span_id"].to_pylist()))
        sids = set(table["session_id"].to_pylist())
        keys = set(pc.list_flatten(table["input_keys"]).to_pylist())
        keys.update(table["output_key"].to_pylist(), table["tools_key"].to_pylist())
        traces = {t for t, _ in spans}

        def own(ev: Evaluation) -> bool:  # its id names its span (`_add_event_items`)
            parts = ev.feedback_id.split("-")
            return (parts[1], parts[2]) in spans if len(parts) == 4 else ev.session_id in sids

        return Batch(span_tables=[table], table_only_spans=table.num_rows, merged=self.merged,
                     messages={k: m for k, m in self.messages.items() if k in keys},
                     sessions={sid: dict(f) for sid, f in self.sessions.items() if sid in sids},
                     snapshots=[s for s in self.snapshots if (s.trace_id, s.span_id) in spans],
                     evaluations=[e for e in self.evaluations if own(e)],
                     fallback_traces=self.fallback_traces & traces,
                     explicit_traces={t: s for t, s in self.explicit_traces.items() if t in traces})

    def extend(self, other: "Batch") -> None:
        self.merged = self.merged or bool(self.span_count) or other.merged
        self.span_tables = self._tables() + other._tables()
        self.rows.extend(other.rows)
        self.table_only_spans += other.table_only_spans
        self.messages.update(other.messages)
        for sid, attrs in other.sessions.items():
            merge_session(self.sessions, sid, attrs)
        self.snapshots.extend(other.snapshots)
        self.evaluations.extend(other.evaluations)
        self.log_records.extend(other.log_records)
        self.metric_points.extend(other.metric_points)
        self.rejected += other.rejected
        self.errors.extend(other.errors)
        self.warnings.extend(other.warnings)
        self.wire_bytes += other.wire_bytes
        self.fallback_traces |= other.fallback_traces
        self.explicit_traces.update(other.explicit_traces)


def _ipc_buffer(table: pa.Table) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _reassigned(table: pa.Table, moved: dict[str, str]) -> pa.Table:
    """`table` with session_id = moved[trace_id] where a span's session was its trace id."""
    import pyarrow.compute as pc

    traces = pa.array(list(moved), pa.string())
    trace_col, sid_col = table["trace_id"], table["session_id"]
    hit = pc.and_(pc.is_in(trace_col, value_set=traces), pc.equal(sid_col, trace_col))
    if not pc.any(hit).as_py():
        return table
    target = pc.take(pa.array(list(moved.values()), pa.string()), pc.index_in(trace_col, value_set=traces))
    column = pc.if_else(hit, target, sid_col)
    return table.set_column(table.schema.get_field_index("session_id"), "session_id", column)


def merge_session(sessions: dict[str, dict], sid: str, fields: dict) -> None:
    cur = sessions.get(sid)
    if cur is None:
        sessions[sid] = dict(fields)
        return
    for k, v in fields.items():
        if v is None:
            continue
        if k == "started_ns":
            cur[k] = v if cur.get(k) is None else min(cur[k], v)
        elif k == "ended_ns":
            cur[k] = v if cur.get(k) is None else max(cur[k], v)
        elif k == "replayable" and cur.get(k) is False:
            continue  # once any span says not replayable, the session is not
        else:
            cur[k] = v


# --- content-addressed messages ---------------------------------------------------------

@functools.lru_cache(maxsize=8192)  # histories resend the same messages: hash each once


def message_key(canonical_json: str) -> tuple[int, str]:
    """(signed 64-bit key, sha256 hex) of a canonical message; the key is what spans store."""
    digest = hashlib.sha256(canonical_json.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True), digest.hex()


def add_blob(batch: Batch, text: str) -> int:
    """Content-address a repeated attribute value (the request's tool definitions) as-is."""
    key, sha = message_key(text)
    if key not in batch.messages:
        batch.messages[key] = (sha, text)
    return key


def add_messages(batch: Batch, messages: list[dict]) -> list[int]:
    return add_texts(batch, [dumps_compact(msg, sort_keys=True) for msg in messages])


def add_texts(batch: Batch, texts: list[str]) -> list[int]:
    """Content-address canonical message texts; their keys, in order."""
    keys = []
    for text in texts:
        key, sha = message_key(text)
        if key not in batch.messages:
            batch.messages[key] = (sha, text)
        keys.append(key)
    return keys
