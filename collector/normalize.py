"""Turn decoded OTLP spans into the store's rows, whatever instrumentation produced them.

Three dialects describe an LLM call: tracefix / OpenTelemetry GenAI (`gen_ai.input.messages`
as a JSON list), OpenInference (`llm.input_messages.N.message.*`, `input.value`,
`session.id`) and OpenLLMetry (`gen_ai.prompt.N.*`, `gen_ai.completion.N.*`). Each is read
into the same columns (kind, agent, model, tokens, tool call, error) and the same chat
messages, which are content-addressed so a growing history is stored once per message.

This module is pure (no I/O, no SQL): `normalize_request` maps an
`ExportTraceServiceRequest` to a `Batch` the writer inserts in one transaction.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tracefix import semconv as sc
from tracefix.collector import jsonsafe
from tracefix.collector.redact import redact_span

try:  # orjson is 3-10x faster on the ingest path; the stdlib gives the same text otherwise
    import orjson
except ImportError:  # pragma: no cover - orjson is in the collector extra
    orjson = None


def dumps_compact(value: Any, sort_keys: bool = False) -> str:
    """Compact JSON text (`separators=(",", ":")`, UTF-8 kept), keys sorted on request.
    NaN and infinities become null, as orjson writes them: the text is always valid JSON."""
    if orjson is not None:
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0).decode()
        except (TypeError, orjson.JSONEncodeError):  # ints over 64 bits, non-str keys: stdlib path
            pass
    return jsonsafe.dumps(value, ensure_ascii=False, sort_keys=sort_keys, separators=(",", ":"))


def loads_fast(text: str) -> Any:
    if orjson is not None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)  # raises ValueError on bad JSON (orjson's error is a ValueError too)

# Attribute keys whose content moves to the messages table (rebuilt by get_spans), so the
# span row does not carry the session's growing history once per LLM call.
CONTENT_ADDRESSED_KEYS = (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES)

SESSION_ATTRS = {
    sc.ENTRYPOINT: "entrypoint",
    sc.INPUTS: "inputs",
    sc.USER_ID: "user_id",
    "user.id": "user_id",
    sc.METADATA: "metadata",
    sc.OUTCOME: "outcome",
    sc.OUTCOME_SCORE: "score",
    sc.EVALUATION: "evaluation",
    sc.FINAL_OUTPUT: "output",
    sc.REPLAYABLE: "replayable",
    sc.PARENT_SESSION_ID: "parent_session_id",
    sc.INTERVENTION_ID: "intervention_id",
    sc.INTERVENTION: "intervention",
}
SESSION_ATTR_KEYS = frozenset(SESSION_ATTRS)
JSON_SESSION_FIELDS = {"inputs", "metadata", "evaluation", "output", "intervention"}

SESSION_ID_KEYS = (sc.SESSION_ID, sc.GEN_AI_CONVERSATION_ID, "session.id",
                   "traceloop.association.properties.session_id")

# a tuple, not a set: `op in LLM_OPERATIONS` must not hash op, which may be a list
LLM_OPERATIONS = ("chat", "text_completion", "generate_content", "completion")

# Where each dialect puts a column's value, in order of preference.
AGENT_KEYS = (sc.GEN_AI_AGENT_NAME, "agent.name")
MODEL_KEYS = (sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_REQUEST_MODEL, "llm.model_name")
PROVIDER_KEYS = (sc.GEN_AI_PROVIDER_NAME, "gen_ai.system", "llm.provider", "llm.system")
INPUT_TOKEN_KEYS = (sc.GEN_AI_USAGE_INPUT_TOKENS, "llm.token_count.prompt", "gen_ai.usage.prompt_tokens")
OUTPUT_TOKEN_KEYS = (sc.GEN_AI_USAGE_OUTPUT_TOKENS, "llm.token_count.completion", "gen_ai.usage.completion_tokens")
FINISH_REASON_KEYS = (sc.GEN_AI_RESPONSE_FINISH_REASONS, "gen_ai.completion.0.finish_reason", "llm.finish_reason",
                      "llm.response.finish_reason")
TOOL_NAME_KEYS = (sc.GEN_AI_TOOL_NAME, "tool.name", "traceloop.entity.name")
TOOL_CALL_ID_KEYS = (sc.GEN_AI_TOOL_CALL_ID, "tool_call.id")
TOOL_ARGUMENTS_KEYS = (sc.GEN_AI_TOOL_CALL_ARGUMENTS, "tool.parameters", "input.value", "traceloop.entity.input")
TOOL_RESULT_KEYS = (sc.GEN_AI_TOOL_CALL_RESULT, "output.value", "traceloop.entity.output")


# The spans table's columns, in order. `normalize_request` builds one tuple per span in this
# order and one Arrow table per request (in the decode worker, off the single writer); dict
# rows with these keys are the other way in (imports) and out (`Batch.spans`).
SPAN_COLUMNS = [
    ("trace_id", pa.string()), ("span_id", pa.string()), ("parent_span_id", pa.string()),
    ("session_id", pa.string()), ("service", pa.string()), ("name", pa.string()),
    ("span_kind", pa.int32()), ("kind", pa.string()), ("start_ns", pa.int64()), ("end_ns", pa.int64()),
    ("status_code", pa.int32()), ("status_message", pa.string()), ("step", pa.int32()),
    ("call_seq", pa.int32()), ("agent", pa.string()), ("model", pa.string()), ("provider", pa.string()),
    ("input_tokens", pa.int64()), ("output_tokens", pa.int64()), ("finish_reason", pa.string()),
    ("input_keys", pa.list_(pa.int64())), ("output_key", pa.int64()), ("message_dialect", pa.string()),
    ("tool_name", pa.string()), ("tool_call_id", pa.string()), ("tool_arguments", pa.string()),
    ("tool_result", pa.string()), ("error", pa.string()), ("replay_source", pa.string()),
    ("truncated", pa.bool_()), ("scope", pa.string()), ("resource", pa.string()),
    ("attributes", pa.string()), ("events", pa.string()), ("tools_key", pa.int64()),
]
SPAN_SCHEMA = pa.schema(SPAN_COLUMNS)


def spans_table(rows: list[dict]) -> pa.Table:
    """The Arrow table of dict rows."""
    return pa.Table.from_arrays([pa.array([r[name] for r in rows], type=typ) for name, typ in SPAN_COLUMNS],
                                schema=SPAN_SCHEMA)


SPAN_STRUCT = pa.struct(SPAN_COLUMNS)


def tuples_table(rows: list[tuple]) -> pa.Table:
    """The Arrow table of rows given as tuples in SPAN_COLUMNS order."""
    return pa.Table.from_struct_array(pa.array(rows, type=SPAN_STRUCT))


class SpanRejected(ValueError):
    """One span cannot be stored (reported through OTLP partial success)."""


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

    @property
    def span_count(self) -> int:
        return len(self.rows) + self.table_only_spans

    @property
    def spans(self) -> list[dict]:
        """Every span as a dict row (SPAN_COLUMNS keys), in order."""
        if self.table_only_spans:
            self.rows = self.span_arrow().to_pylist()
            self.table_only_spans = 0
        return self.rows

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if state["rows"] and state["span_tables"]:
            state["table_only_spans"] += len(state["rows"])
            state["rows"] = []
        return state

    def __setstate__(self, state: dict) -> None:
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
        self.rejected += other.rejected
        self.errors.extend(other.errors)
        self.warnings.extend(other.warnings)
        self.wire_bytes += other.wire_bytes
        self.fallback_traces |= other.fallback_traces
        self.explicit_traces.update(other.explicit_traces)


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


# --- messages -----------------------------------------------------------------------------

CANONICAL_KEYS = frozenset(("role", "content", "name", "tool_calls", "tool_call_id"))  # the last three only when truthy


def canonical_message(msg: Any) -> dict:
    """Reduce a chat message (OpenAI shape or GenAI `parts` shape) to the fields we keep.
    A message already in that shape (most are) is returned as it is, not copied."""
    if (type(msg) is dict and type(msg.get("content")) is str and msg.get("role") and msg.get("name", True)
            and msg.get("tool_calls", True) and msg.get("tool_call_id", True) and msg.keys() <= CANONICAL_KEYS):
        return msg
    if not isinstance(msg, dict):
        return {"role": "user", "content": msg if isinstance(msg, str) else json.dumps(msg)}
    out: dict[str, Any] = {"role": msg.get("role") or "user"}
    content = msg.get("content")
    tool_calls = msg.get("tool_calls")
    tool_call_id = msg.get("tool_call_id")
    if content is None and isinstance(msg.get("parts"), list):  # GenAI semconv message parts
        texts, calls = [], []
        for part in msg["parts"]:
            if not isinstance(part, dict):
                continue
            ptype = part.get("type")
            if ptype == "text":
                texts.append(part_text(part.get("content")))
            elif ptype == "tool_call":
                args = part.get("arguments")
                calls.append({"id": part.get("id"), "type": "function",
                              "function": {"name": part.get("name"),
                                           "arguments": args if isinstance(args, str) else json.dumps(args)}})
            elif ptype == "tool_call_response":
                tool_call_id = part.get("id")
                resp = part.get("response")
                texts.append(resp if isinstance(resp, str) else json.dumps(resp))
        content = "".join(texts) if texts else None
        tool_calls = tool_calls or calls or None
    if isinstance(content, list):  # OpenAI content parts
        content = "".join(part_text(p.get("text") if isinstance(p, dict) else p) for p in content)
    out["content"] = content
    if msg.get("name"):
        out["name"] = msg["name"]
    if tool_calls:
        out["tool_calls"] = tool_calls
    if tool_call_id:
        out["tool_call_id"] = tool_call_id
    return out


def part_text(value: Any) -> str:
    """The text of one content part: a string as it is, none for null, any other value as
    JSON (a client may send a number or an object where the convention says text)."""
    if type(value) is str:
        return value
    return "" if value is None else dumps_compact(value)


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


def _json_attr(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return loads_fast(value)
        except ValueError:
            return value
    return value


def _indexed(attrs: dict, prefix: str) -> dict[int, dict[str, Any]]:
    """`prefix.N.rest = v` -> {N: {rest: v}} (flattened list attributes)."""
    out: dict[int, dict[str, Any]] = {}
    plen = len(prefix) + 1
    for key, value in attrs.items():
        if not key.startswith(prefix + "."):
            continue
        idx, _, rest = key[plen:].partition(".")
        if idx.isdigit() and rest:
            out.setdefault(int(idx), {})[rest] = value
    return dict(sorted(out.items()))


def _flat_tool_calls(fields: dict, prefix: str, name_key: str, args_key: str, id_key: str) -> list[dict]:
    calls = []
    for _, tc in _indexed(fields, prefix).items():
        args = tc.get(args_key)
        calls.append({"id": tc.get(id_key), "type": "function",
                      "function": {"name": tc.get(name_key),
                                   "arguments": args if isinstance(args, str) else json.dumps(args)}})
    return calls


def _openinference_messages(attrs: dict, prefix: str) -> list[dict]:
    msgs = []
    for _, f in _indexed(attrs, prefix).items():
        content = f.get("message.content")
        if content is None:
            parts = [v for k, v in sorted(f.items()) if k.startswith("message.contents.") and k.endswith("message_content.text")]
            content = "".join(map(part_text, parts)) if parts else None
        msg = {"role": f.get("message.role"), "content": content, "name": f.get("message.name"),
               "tool_call_id": f.get("message.tool_call_id"),
               "tool_calls": _flat_tool_calls(f, "message.tool_calls", "tool_call.function.name",
                                              "tool_call.function.arguments", "tool_call.id")}
        msgs.append(canonical_message(msg))
    return msgs


def _openllmetry_messages(attrs: dict, prefix: str) -> list[dict]:
    msgs = []
    for _, f in _indexed(attrs, prefix).items():
        msg = {"role": f.get("role") or ("assistant" if "completion" in prefix else "user"),
               "content": f.get("content"), "tool_call_id": f.get("tool_call_id"),
               "tool_calls": _flat_tool_calls(f, "tool_calls", "name", "arguments", "id")}
        msgs.append(canonical_message(msg))
    return msgs


def llm_messages(attrs: dict) -> tuple[list[dict], dict | None, str]:
    """(input messages, output message, dialect) of an LLM span in any supported dialect."""
    if sc.GEN_AI_INPUT_MESSAGES in attrs or sc.GEN_AI_OUTPUT_MESSAGES in attrs:
        inp = _json_attr(attrs.get(sc.GEN_AI_INPUT_MESSAGES)) or []
        out = _json_attr(attrs.get(sc.GEN_AI_OUTPUT_MESSAGES)) or []
        if isinstance(inp, dict):
            inp = [inp]
        if isinstance(out, dict):
            out = [out]
        system = attrs.get(sc.GEN_AI_SYSTEM_INSTRUCTIONS)
        msgs = [canonical_message(m) for m in inp] if isinstance(inp, list) else []
        if system and not any(m["role"] == "system" for m in msgs):
            sys_val = _json_attr(system)
            if isinstance(sys_val, list):
                sys_val = "".join(part_text(p.get("content") if isinstance(p, dict) else p) for p in sys_val)
            msgs.insert(0, {"role": "system", "content": str(sys_val)})
        output = canonical_message(out[0]) if isinstance(out, list) and out else None
        if output is not None:
            output["role"] = output.get("role") or "assistant"
        return msgs, output, "genai"
    if any(k.startswith("llm.input_messages.") or k.startswith("llm.output_messages.") for k in attrs):
        outs = _openinference_messages(attrs, "llm.output_messages")
        return _openinference_messages(attrs, "llm.input_messages"), (outs[0] if outs else None), "openinference"
    if any(k.startswith("gen_ai.prompt.") or k.startswith("gen_ai.completion.") for k in attrs):
        outs = _openllmetry_messages(attrs, "gen_ai.completion")
        return _openllmetry_messages(attrs, "gen_ai.prompt"), (outs[0] if outs else None), "openllmetry"
    return [], None, "none"


# --- span classification ------------------------------------------------------------------

def span_kind(attrs: dict) -> str:
    if attrs.get(sc.SESSION_SPAN) is True:
        return "session"
    op = attrs.get(sc.GEN_AI_OPERATION_NAME)
    oi = attrs.get("openinference.span.kind")
    tl = attrs.get("traceloop.span.kind")
    if op in LLM_OPERATIONS or oi == "LLM" or attrs.get("llm.request.type") in ("chat", "completion"):
        return "llm"
    if op == sc.OP_EXECUTE_TOOL or oi == "TOOL" or tl == "tool":
        return "tool"
    if op == sc.OP_INVOKE_AGENT or oi == "AGENT" or tl == "agent":
        return "agent"
    return "other"


def _first(attrs: dict, keys: tuple[str, ...]) -> Any:
    """The first of `keys` with a value that is neither None nor ""."""
    for k in keys:
        v = attrs.get(k)
        if v is not None and v != "":
            return v
    return None


INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1


def _int(v: Any, limit: int = INT64_MAX) -> int | None:
    """An integer attribute, or None when absent, not a number or beyond the column's range."""
    if type(v) is int:  # the usual case (bool, a subclass, is not a number here)
        return v if -limit - 1 <= v <= limit else None
    try:
        n = int(v) if v is not None and not isinstance(v, bool) else None
    except (TypeError, ValueError, OverflowError):
        return None
    return n if n is not None and -limit - 1 <= n <= limit else None


def _json_text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return jsonsafe.dumps(v, ensure_ascii=False)


def finite_score(value: Any) -> float | None:
    """A score as a float, or None when it is no number or not finite (NaN and infinities
    are not JSON: stored, they would break every reader of the row, and -inf is "below
    any alert threshold")."""
    try:
        score = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return score if math.isfinite(score) else None


def _text_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def session_fields(attrs: dict) -> dict:
    out = {}
    for key, name in SESSION_ATTRS.items():
        if key in attrs and name not in out:
            value = attrs[key]
            if name in JSON_SESSION_FIELDS:
                value = _json_text(value)
            elif name == "score":
                value = finite_score(value)
                if value is None:  # the caller notes it (`_note_unscored`)
                    continue
            elif name == "replayable":
                value = bool(value)
            else:
                value = str(value)
            out[name] = value
    return out


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


# --- OTLP protobuf -> python ---------------------------------------------------------------

def any_value(v) -> Any:
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value
    if kind == "int_value":
        return v.int_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "double_value":
        return v.double_value
    if kind == "array_value":
        return [x.string_value or any_value(x) for x in v.array_value.values]  # most hold strings
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(v.bytes_value).decode()
    return None


NO_LIMIT = 1 << 62
MAX_ATTRIBUTE_ELEMENTS = 10_000  # in one array or key-value list attribute, nested ones included


def attributes(kvs, max_chars: int = NO_LIMIT) -> dict:
    """The attributes as a dict; SpanRejected when a string is longer than `max_chars` or an
    array / key-value list holds more than MAX_ATTRIBUTE_ELEMENTS values."""
    out = {}
    for kv in kvs:  # the scalar cases inline: this loop runs for every attribute of every span
        v = kv.value
        text = v.string_value  # "" unless the value is a non-empty string: most attributes are
        if text:
            if len(text) > max_chars:
                raise SpanRejected(f"attribute {kv.key!r} is {len(text)} characters (limit {max_chars})")
            out[kv.key] = text
            continue
        kind = v.WhichOneof("value")
        if kind == "int_value":
            out[kv.key] = v.int_value
        elif kind == "string_value":
            out[kv.key] = text
        else:
            value = out[kv.key] = any_value(v)
            if type(value) is list or type(value) is dict:
                _check_container(kv.key, value, max_chars)
    return out


def _check_container(key: str, value: list | dict, max_chars: int) -> None:
    """The limits of `attributes` inside an array or key-value list (walked without
    recursion: protobuf already bounds the nesting, this bounds the work)."""
    count, stack = 0, [value]
    while stack:
        items = stack.pop()
        items = items.values() if type(items) is dict else items
        count += len(items)
        if count > MAX_ATTRIBUTE_ELEMENTS:
            raise SpanRejected(f"attribute {key!r} has more than {MAX_ATTRIBUTE_ELEMENTS} elements")
        for item in items:
            if type(item) is str:
                if len(item) > max_chars:
                    raise SpanRejected(f"attribute {key!r} holds a string of {len(item)} characters "
                                       f"(limit {max_chars})")
            elif type(item) is list or type(item) is dict:
                stack.append(item)


def _error_text(attrs: dict, status_code: int, status_message: str, events: list[dict]) -> str | None:
    """The step's error as "Type: message" with the exception's own short type name
    (docs/contracts.md §1): what the agent saw, so a replay can show it the same text.

    OTel's exception event names the type module-qualified; tracefix's own status
    description already reads "Type: message" and is preferred when present."""
    if status_code != 2 and not any(ev["name"] == "exception" for ev in events):
        return None
    etype = attrs.get(sc.ERROR_TYPE)
    if status_code == 2 and status_message and etype and status_message.startswith(f"{etype}:"):
        return status_message
    for ev in events:
        if ev["name"] == "exception":
            a = ev["attributes"]
            short = str(a.get("exception.type") or "Exception").rsplit(".", 1)[-1]
            return f"{short}: {a.get('exception.message', '')}"
    short = str(etype or "Error").rsplit(".", 1)[-1]
    return f"{short}: {status_message}" if status_message else short


def normalize_request(request, *, max_attribute_chars: int = 8 * 1024 * 1024, wire_bytes: int | None = None) -> Batch:
    """Map an ExportTraceServiceRequest to rows. Total: a span that cannot be stored, for
    whatever reason its content gives, is counted in `rejected` with a reason naming it in
    `errors`; the others are kept. What is stored differently than sent (a score that is no
    finite number) is noted in `warnings`.

    A span without a session attribute joins the session of another span of its trace
    (in this request, else later via `Batch.reassign`), else the session named by its trace id.
    The same span twice in one request is kept once (the first with a session attribute,
    else the first). Every attribute is held to `max_attribute_chars` (and to
    MAX_ATTRIBUTE_ELEMENTS); `wire_bytes` is the encoded request's size, kept for callers."""
    batch = Batch()
    rows: list[tuple] = []
    seen: set[tuple[str, str]] = set()
    pending: list[tuple] = []  # spans with no session attribute: rows built once all sessions are seen
    known = batch.explicit_traces
    for rs in request.resource_spans:
        try:
            resource = attributes(rs.resource.attributes, max_attribute_chars)
            service = _text_or_none(resource.get("service.name"))
            resource_json = dumps_compact(resource, sort_keys=True)
        except Exception as exc:  # every span of the resource would carry it
            for ss in rs.scope_spans:
                for span in ss.spans:
                    _reject(batch, _span_label(span), f"its resource: {_reason(exc)}")
            continue
        for ss in rs.scope_spans:
            where = (service, ss.scope.name or None, resource_json)
            for span in ss.spans:
                try:
                    read = _read_span(span, max_attribute_chars)
                except Exception as exc:
                    _reject(batch, _span_label(span), _reason(exc))
                    continue
                sid = read[4]
                if sid is None:
                    pending.append((span, read, where))
                    continue
                key = read[:2]
                known.setdefault(key[0], sid)
                if key not in seen:
                    try:
                        rows.append(_span_row(batch, span, read, sid, where))
                    except Exception as exc:
                        _reject(batch, _span_label(span), _reason(exc))
                        continue
                    seen.add(key)
    for span, read, where in pending:
        trace_id = read[0]
        sid = known.get(trace_id)
        if sid is None:
            sid = trace_id
            batch.fallback_traces.add(sid)
        key = read[:2]
        if key not in seen:
            try:
                rows.append(_span_row(batch, span, read, sid, where))
            except Exception as exc:
                _reject(batch, _span_label(span), _reason(exc))
                continue
            seen.add(key)
    if rows:
        try:
            table = tuples_table(rows)
        except Exception:  # a value Arrow cannot hold: find its rows, keep the others
            table = _table_of_storable(batch, rows)
        if table.num_rows:
            batch.span_tables = [table]
            batch.table_only_spans = table.num_rows
    return batch


MAX_NOTES = 5  # reasons and warnings kept per request: enough to act on, bounded in size


def span_label(name: str, span_id: str | None = None, trace_id: str | None = None) -> str:
    """How an error message names a span: its name (cut short) and its hex ids when known."""
    name = name if len(name) <= 100 else name[:100] + "..."
    return f"span {name!r} ({span_id} in trace {trace_id})" if span_id else f"span {name!r}"


def _span_label(span) -> str:
    if len(span.trace_id) == 16 and len(span.span_id) == 8:
        return span_label(span.name, span.span_id.hex(), span.trace_id.hex())
    return span_label(span.name)  # its ids are what is wrong with it


def _reason(exc: BaseException) -> str:
    if isinstance(exc, SpanRejected):
        return str(exc)
    if isinstance(exc, RecursionError):
        return "a value is nested too deeply"
    text = str(exc)
    return f"cannot be read ({type(exc).__name__}: {text[:200]}{'...' if len(text) > 200 else ''})"


def _reject(batch: Batch, label: str, reason: str) -> None:
    batch.rejected += 1
    if len(batch.errors) < MAX_NOTES:
        batch.errors.append(f"{label}: {reason}")


def _warn(batch: Batch, text: str) -> None:
    if len(batch.warnings) < MAX_NOTES:
        batch.warnings.append(text)


def _table_of_storable(batch: Batch, rows: list[tuple]) -> pa.Table:
    """The Arrow table of the rows that convert, the others rejected (what they added to
    the batch's sessions and messages stays: harmless without the span)."""
    kept = []
    for row in rows:
        try:
            tuples_table([row])
        except Exception as exc:
            _reject(batch, span_label(row[5], row[1], row[0]), _reason(exc))
        else:
            kept.append(row)
    return tuples_table(kept)


def _read_span(span, max_chars: int) -> tuple[str, str, dict, list[dict], str | None]:
    """(trace id, span id, attributes, events, session id or None) of a span that can be
    stored (else SpanRejected)."""
    trace_id, span_id = span.trace_id, span.span_id
    if len(trace_id) != 16 or len(span_id) != 8:
        raise SpanRejected("trace_id must be 16 bytes and span_id 8 bytes")
    if span.start_time_unix_nano > INT64_MAX or span.end_time_unix_nano > INT64_MAX:
        raise SpanRejected("timestamps beyond the year 2262")
    attrs = attributes(span.attributes, max_chars)
    events = []
    if span.events:  # most spans have none (iterating an empty repeated field still costs)
        for ev in span.events:
            events.append({"name": ev.name, "time_ns": ev.time_unix_nano,
                           "attributes": attributes(ev.attributes, max_chars)})
    redact_span(attrs, events)  # before anything reads them: no secret from any instrumentation is stored
    sid = _first(attrs, SESSION_ID_KEYS)
    return trace_id.hex(), span_id.hex(), attrs, events, (str(sid) if sid is not None else None)


def _span_row(batch: Batch, span, read: tuple, sid: str, where: tuple) -> tuple:
    """The span's row (a tuple in SPAN_COLUMNS order) from what `_read_span` read and where
    the span was sent from (service, scope, resource JSON); its messages, session fields,
    snapshots and evaluations go into `batch`.

    Whatever the span's content can make fail (parsing its messages, writing JSON) runs
    before anything goes into `batch`, so a span that raises leaves no trace there."""
    trace_id, span_id, attrs, events, _ = read
    service, scope, resource_json = where
    name = span.name
    start_ns, end_ns = span.start_time_unix_nano, span.end_time_unix_nano
    status = span.status
    status_code, status_message = status.code, status.message
    kind = span_kind(attrs)
    step = _int(attrs.get(sc.STEP), INT32_MAX)
    call_seq = _int(attrs.get(sc.CALL_SEQ), INT32_MAX)
    agent = _text_or_none(_first(attrs, AGENT_KEYS)
                          or (attrs.get("traceloop.entity.name") if kind == "agent" else None))
    error = _error_text(attrs, status_code, status_message, events) if status_code == 2 or events else None
    replay_source = _text_or_none(attrs.get(sc.REPLAY_SOURCE))
    truncated = bool(attrs.get(sc.TRUNCATED, False))
    model = provider = input_tokens = output_tokens = finish_reason = None
    input_keys = output_key = dialect = tools_key = None
    tool_name = tool_call_id = tool_arguments = tool_result = None
    if kind == "llm":
        inputs, output, dialect = llm_messages(attrs)
        input_texts = [dumps_compact(m, sort_keys=True) for m in inputs]
        output_text = dumps_compact(output, sort_keys=True) if output else None
        model = _text_or_none(_first(attrs, MODEL_KEYS))
        provider = _text_or_none(_first(attrs, PROVIDER_KEYS))
        input_tokens = _int(_first(attrs, INPUT_TOKEN_KEYS))
        output_tokens = _int(_first(attrs, OUTPUT_TOKEN_KEYS))
        fr = _first(attrs, FINISH_REASON_KEYS)
        if isinstance(fr, (list, tuple)):
            fr = fr[0] if fr else None
        finish_reason = _text_or_none(fr)
        tools = attrs.get(sc.GEN_AI_TOOL_DEFINITIONS)
        if not isinstance(tools, str):  # the same tool list rides along on every call: stored once
            tools = None
        stripped = CONTENT_ADDRESSED_KEYS if dialect == "genai" else ()
        if tools is not None:
            stripped = (*stripped, sc.GEN_AI_TOOL_DEFINITIONS)
        if stripped:  # rebuilt from the messages table by get_spans
            attrs = dict(attrs)
            for k in stripped:
                attrs.pop(k, None)
    elif kind == "tool":
        tool_name = _text_or_none(_first(attrs, TOOL_NAME_KEYS) or name)
        tool_call_id = _text_or_none(_first(attrs, TOOL_CALL_ID_KEYS))
        tool_arguments = _json_text(_first(attrs, TOOL_ARGUMENTS_KEYS))
        tool_result = _json_text(_first(attrs, TOOL_RESULT_KEYS))
    attrs_json = dumps_compact(attrs)
    events_json = dumps_compact(events) if events else None

    # from here on nothing fails: the span's share of the batch
    if kind == "llm":
        input_keys = add_texts(batch, input_texts)
        output_key = add_blob(batch, output_text) if output_text is not None else None
        tools_key = add_blob(batch, tools) if tools is not None else None
    session = batch.sessions.get(sid)
    if session is not None and kind != "session" and not truncated and SESSION_ATTR_KEYS.isdisjoint(attrs):
        # most spans: one more span of a session already in the batch (merge_session, inlined)
        if service is not None:
            session["service"] = service
        started, ended = session.get("started_ns"), session.get("ended_ns")
        session["started_ns"] = start_ns if started is None else min(started, start_ns)
        session["ended_ns"] = end_ns if ended is None else max(ended, end_ns)
    else:
        fields = session_fields(attrs)
        if sc.OUTCOME_SCORE in attrs and "score" not in fields:
            _note_unscored(batch, span, sc.OUTCOME_SCORE, attrs[sc.OUTCOME_SCORE], "the session's score")
        fields["service"] = service
        fields["started_ns"] = start_ns
        fields["ended_ns"] = end_ns
        if kind == "session":  # tracefix.session.root is true
            fields["name"] = name
        if truncated:
            fields["replayable"] = False
        merge_session(batch.sessions, sid, fields)
    if events:
        _add_event_items(batch, span, events, sid, trace_id, span_id, step, end_ns)

    return (
        trace_id, span_id, span.parent_span_id.hex() if span.parent_span_id else None, sid, service, name,
        span.kind, kind, start_ns, end_ns, status_code, status_message or None, step, call_seq, agent,
        model, provider, input_tokens, output_tokens, finish_reason, input_keys, output_key, dialect,
        tool_name, tool_call_id, tool_arguments, tool_result, error, replay_source, truncated, scope,
        resource_json, attrs_json, events_json, tools_key,
    )


def _note_unscored(batch: Batch, span, key: str, value: Any, what: str) -> None:
    _warn(batch, f"{_span_label(span)}: {key}={str(value)[:40]} is not a finite number; "
                 f"{what} is stored as null")


def _add_event_items(batch: Batch, span, events: list[dict], sid: str, trace_id: str, span_id: str,
                     step: int | None, end_ns: int) -> None:
    """The span's snapshot and evaluation events."""
    for seq, ev in enumerate(events):
        a = ev["attributes"]
        if ev["name"] == sc.SNAPSHOT_EVENT and sc.SNAPSHOT_KEY in a:
            batch.snapshots.append(Snapshot(
                session_id=sid, trace_id=trace_id, span_id=span_id, seq=seq,
                key=str(a[sc.SNAPSHOT_KEY]), state=_json_text(a.get(sc.SNAPSHOT_STATE)) or "null",
                hash=_text_or_none(a.get(sc.SNAPSHOT_HASH)), step=_int(a.get(sc.STEP, step), INT32_MAX),
                time_ns=min(ev["time_ns"], INT64_MAX)))
        elif ev["name"] == sc.EVALUATION_EVENT and sc.EVALUATION_SCORE in a:
            score = finite_score(a[sc.EVALUATION_SCORE])
            if score is None:  # no feedback (and no alert) from it; the event stays on the span
                _note_unscored(batch, span, sc.EVALUATION_SCORE, a[sc.EVALUATION_SCORE], "the evaluation's score")
                continue
            batch.evaluations.append(Evaluation(
                feedback_id=f"ev-{trace_id}-{span_id}-{seq}", session_id=sid, score=score,
                comment=_text_or_none(a.get(sc.EVALUATION_EXPLANATION)),
                time_ns=min(ev["time_ns"] or end_ns, INT64_MAX)))
