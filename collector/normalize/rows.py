"""OTLP to rows: `normalize_request` maps an `ExportTraceServiceRequest` to a `Batch` the
writer inserts in one transaction. Pure (no I/O, no SQL); runs in the decode workers.

A span that cannot be stored is rejected alone, with a reason (OTLP partial success);
every attribute is held to a size bound; secrets are redacted before anything reads them.
"""
from __future__ import annotations

from typing import Any, Iterator, NamedTuple

from tracefix import semconv as sc
from tracefix.attributes import MAX_JSON_DEPTH, nested_too_deeply
from tracefix.collector.normalize.batch import Batch, Evaluation, Snapshot, add_blob, add_texts, merge_session
from tracefix.collector.normalize.cost import span_cost
from tracefix.collector.normalize.dialects import (
    AGENT_KEYS, CONTENT_ADDRESSED_KEYS, FINISH_REASON_KEYS, INPUT_TOKEN_KEYS, INT32_MAX, INT64_MAX, MODEL_KEYS,
    OUTPUT_TOKEN_KEYS, PROVIDER_KEYS, SESSION_ATTR_KEYS, SESSION_ID_KEYS, TOOL_ARGUMENTS_KEYS, TOOL_CALL_ID_KEYS,
    TOOL_NAME_KEYS, TOOL_RESULT_KEYS, finite_score, first_value, graph_node, int_value, langchain_tool_message,
    llm_messages, session_fields, span_kind, text_or_none)
from tracefix.collector.normalize.json_text import dumps_compact, dumps_each_sorted, json_text
from tracefix.collector.normalize.otlp_values import BYTES_READ, attributes, attributes_and_nesting
from tracefix.collector.normalize.rejections import (
    TOO_DEEP, SpanRejected, reason_of, reject, span_label_of, table_of_storable, warn)
from tracefix.collector.normalize.span_row import SpanRow, tuples_table
from tracefix.collector.normalize.wire_spans import WireSpan
from tracefix.collector.redact import redact_label, redact_span


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


def normalize_request(request, *, max_attribute_chars: int = 8 * 1024 * 1024, wire_bytes: int | None = None,
                      wire_may_hold_secret: bool = True) -> Batch:
    """Map an ExportTraceServiceRequest to rows. Total: a span that cannot be stored, for
    whatever reason its content gives, is counted in `rejected` with a reason naming it in
    `errors`; the others are kept. What is stored differently than sent (a score that is no
    finite number) is noted in `warnings`.

    A span without a session attribute joins the session of another span of its trace
    (in this request, else later via `Batch.reassign`), else the session named by its trace id.
    The same span twice in one request is kept once (the first with a session attribute,
    else the first). Every attribute is held to `max_attribute_chars` (and to
    MAX_ATTRIBUTE_ELEMENTS); `wire_bytes` is the encoded request's size, kept for callers.
    False `wire_may_hold_secret`: a scan of the request's protobuf bytes found no secret hint
    (`utf8_may_hold_secret`), so no string read from them is scanned again; a span holding a
    bytes value (read as base64 text, not among those bytes) is scanned as before."""
    batch = Batch()
    rows: list[tuple] = []  # SpanRow's fields
    seen: set[tuple[str, str]] = set()
    pending: list[tuple[Any, ReadSpan, Origin]] = []  # spans with no session attribute: rows built once all sessions are seen
    known = batch.explicit_traces

    def emit(span: Any, read: ReadSpan, sid: str, where: Origin) -> None:
        """Keep the span's row once (a span repeated in the request keeps its first row)."""
        key = (read.trace_id, read.span_id)
        if key in seen:
            return
        try:
            rows.append(_span_row(batch, span, read, sid, where))
        except Exception as exc:
            reject(batch, span_label_of(span), reason_of(exc))
            return
        seen.add(key)

    scan = wire_may_hold_secret
    resources = request if type(request) is list else _protobuf_resources(request)
    for resource_attributes, scopes in resources:
        try:
            before = next(BYTES_READ)
            resource = (resource_attributes if type(resource_attributes) is dict
                        else attributes(resource_attributes, max_attribute_chars))
            redact_span(resource, [], scan or next(BYTES_READ) != before + 1)
            service = text_or_none(resource.get("service.name"))
            resource_json = dumps_compact(resource, sort_keys=True)
        except Exception as exc:  # every span of the resource would carry it
            for _, spans in scopes:
                for span in spans:
                    reject(batch, span_label_of(span), f"its resource: {reason_of(exc)}")
            continue
        for scope_name, spans in scopes:
            where = Origin(service, _label(scope_name, scan) or None, resource_json, scan)
            for span in spans:
                try:
                    read = _read_span(span, max_attribute_chars, scan)
                except Exception as exc:
                    reject(batch, span_label_of(span), reason_of(exc))
                    continue
                sid = read.session_id
                if sid is None:
                    pending.append((span, read, where))
                    continue
                known.setdefault(read.trace_id, sid)
                emit(span, read, sid, where)
    for span, read, where in pending:
        trace_id = read.trace_id
        sid = known.get(trace_id)
        if sid is None:
            sid = trace_id
            batch.fallback_traces.add(sid)
        emit(span, read, sid, where)
    if rows:
        try:
            table = tuples_table(rows)
        except Exception:  # a value Arrow cannot hold: find its rows, keep the others
            table = table_of_storable(batch, [SpanRow._make(row) for row in rows])
        if table.num_rows:
            batch.span_tables = [table]
            batch.table_only_spans = table.num_rows
    return batch


def _protobuf_resources(request) -> Iterator[tuple[Any, list[tuple[str, Any]]]]:
    """An ExportTraceServiceRequest in the form `wire_spans.read_traces` gives: each resource's
    attributes (here the protobuf field, read in `normalize_request`) and its scopes' names and spans."""
    for rs in request.resource_spans:
        yield rs.resource.attributes, [(ss.scope.name, ss.spans) for ss in rs.scope_spans]


# the JSON text attributes read as values (messages, tool arguments and results), by span kind:
# one nested deeper than MAX_JSON_DEPTH is refused, as every reader would have to walk it
JSON_VALUE_KEYS = {"llm": (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES, sc.GEN_AI_SYSTEM_INSTRUCTIONS),
                   "tool": (*TOOL_ARGUMENTS_KEYS, *TOOL_RESULT_KEYS)}


def _check_depth(attrs: dict, keys: tuple[str, ...]) -> None:
    for key in keys:
        value = attrs.get(key)
        if type(value) is str and nested_too_deeply(value):
            raise SpanRejected(f"attribute {key!r}: {TOO_DEEP} (more than {MAX_JSON_DEPTH} arrays and objects "
                               "inside one another)")


class ReadSpan(NamedTuple):
    """What `_read_span` reads of a span before its row is built."""
    trace_id: str  # hex
    span_id: str  # hex
    attrs: dict
    events: list[dict]
    session_id: str | None  # None: no session attribute (the trace's session decides)
    start_ns: int
    end_ns: int
    status_code: int
    status_message: str


class Origin(NamedTuple):
    """Where a span was sent from: shared by every span of one scope."""
    service: str | None
    scope: str | None
    resource_json: str
    may_hold_secret: bool  # the request's strings (`normalize_request`'s wire_may_hold_secret)


def _label(text: str, may_hold_secret: bool) -> str:
    return redact_label(text) if may_hold_secret else text


def _read_span(span, max_chars: int, scan: bool = True) -> ReadSpan:
    """What a span that can be stored holds (else SpanRejected); `scan`: its strings may hold
    a secret (`normalize_request`)."""
    trace_id, span_id = span.trace_id, span.span_id
    if len(trace_id) != 16 or len(span_id) != 8:
        raise SpanRejected("trace_id must be 16 bytes and span_id 8 bytes")
    start_ns, end_ns = span.start_time_unix_nano, span.end_time_unix_nano
    if start_ns > INT64_MAX or end_ns > INT64_MAX:
        raise SpanRejected("timestamps beyond the year 2262")
    if type(span) is WireSpan:  # the C reader read its attributes and events (never a bytes value)
        attrs, events = span.attributes, span.events
        redact_span(attrs, events, scan, flat=not span.nested)
        status_code, status_message = span.status_code, span.status_message
    else:
        before = next(BYTES_READ)
        attrs, nested = attributes_and_nesting(span.attributes, max_chars)
        events = []
        if span.events:  # most spans have none (iterating an empty repeated field still costs)
            for ev in span.events:
                ev_attrs, ev_nested = attributes_and_nesting(ev.attributes, max_chars)
                nested = nested or ev_nested
                events.append({"name": ev.name, "time_ns": ev.time_unix_nano, "attributes": ev_attrs})
        # before anything reads them: no secret from any instrumentation is stored
        redact_span(attrs, events, scan or next(BYTES_READ) != before + 1, flat=not nested)
        status = span.status
        status_code, status_message = status.code, status.message
    sid = first_value(attrs, SESSION_ID_KEYS)
    return ReadSpan(trace_id.hex(), span_id.hex(), attrs, events, str(sid) if sid is not None else None,
                    start_ns, end_ns, status_code, status_message)


def _span_row(batch: Batch, span, read: ReadSpan, sid: str, where: Origin) -> tuple:
    """The span's row from what `_read_span` read and where the span was sent from; its messages, session fields,
    snapshots and evaluations go into `batch`.

    Whatever the span's content can make fail (parsing its messages, writing JSON) runs
    before anything goes into `batch`, so a span that raises leaves no trace there."""
    trace_id, span_id, attrs, events, _, start_ns, end_ns, status_code, status_message = read
    service, scope, resource_json, scan = where
    name = span.name  # it names tools, agents and sessions too
    if scan:
        name, status_message = redact_label(name), redact_label(status_message)
    kind = span_kind(attrs)
    node = graph_node(attrs, name) if kind == "other" else None
    if node is not None:  # a LangGraph node as OpenInference / OpenLLMetry record it: an agent turn
        kind = "agent"
    step, call_seq = attrs.get(sc.STEP), attrs.get(sc.CALL_SEQ)
    if type(step) is not int or not -INT32_MAX - 1 <= step <= INT32_MAX:  # int_value's usual case, inline
        step = int_value(step, INT32_MAX)
    if type(call_seq) is not int or not -INT32_MAX - 1 <= call_seq <= INT32_MAX:
        call_seq = int_value(call_seq, INT32_MAX)
    agent = text_or_none(first_value(attrs, AGENT_KEYS) or node
                          or (attrs.get("traceloop.entity.name") if kind == "agent" else None))
    error = _error_text(attrs, status_code, status_message, events) if status_code == 2 or events else None
    replay_source = text_or_none(attrs.get(sc.REPLAY_SOURCE))
    truncated = bool(attrs.get(sc.TRUNCATED, False))
    model = provider = input_tokens = output_tokens = finish_reason = cost_usd = None
    input_keys = output_key = dialect = tools_key = None
    tool_name = tool_call_id = tool_arguments = tool_result = None
    if kind in JSON_VALUE_KEYS:
        _check_depth(attrs, JSON_VALUE_KEYS[kind])
    if kind == "llm":
        inputs, output, dialect = llm_messages(attrs)
        input_texts = dumps_each_sorted(inputs)
        output_text = dumps_compact(output, sort_keys=True) if output else None
        model = text_or_none(first_value(attrs, MODEL_KEYS))
        provider = text_or_none(first_value(attrs, PROVIDER_KEYS))
        input_tokens = int_value(first_value(attrs, INPUT_TOKEN_KEYS))
        output_tokens = int_value(first_value(attrs, OUTPUT_TOKEN_KEYS))
        cost_usd = span_cost(attrs, model, provider, input_tokens, output_tokens, start_ns)
        fr = first_value(attrs, FINISH_REASON_KEYS)
        if isinstance(fr, (list, tuple)):
            fr = fr[0] if fr else None
        finish_reason = text_or_none(fr)
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
        tool_name = text_or_none(first_value(attrs, TOOL_NAME_KEYS) or name)
        tool_call_id = text_or_none(first_value(attrs, TOOL_CALL_ID_KEYS))
        tool_arguments = json_text(first_value(attrs, TOOL_ARGUMENTS_KEYS))
        result = first_value(attrs, TOOL_RESULT_KEYS)
        message = langchain_tool_message(result)
        if message is not None:  # OpenInference's LangChain TOOL span: the ToolMessage it returned
            result, call_id, tool_error = message
            tool_call_id = tool_call_id or call_id
            error = error or tool_error
        tool_result = json_text(result)
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

    return (  # a plain tuple in SPAN_COLUMNS order: a NamedTuple call costs more, and this runs per span
        trace_id, span_id, span.parent_span_id.hex() if span.parent_span_id else None, sid, service, name,
        span.kind, kind, start_ns, end_ns, status_code, status_message or None, step, call_seq, agent,
        model, provider, input_tokens, output_tokens, finish_reason, input_keys, output_key, dialect,
        tool_name, tool_call_id, tool_arguments, tool_result, error, replay_source, truncated, scope,
        resource_json, attrs_json, events_json, tools_key, cost_usd,
    )


def _note_unscored(batch: Batch, span, key: str, value: Any, what: str) -> None:
    warn(batch, f"{span_label_of(span)}: {key}={str(value)[:40]} is not a finite number; "
                 f"{what} is stored as null")


def _add_event_items(batch: Batch, span, events: list[dict], sid: str, trace_id: str, span_id: str,
                     step: int | None, end_ns: int) -> None:
    """The span's snapshot and evaluation events."""
    for seq, ev in enumerate(events):
        a = ev["attributes"]
        if ev["name"] == sc.SNAPSHOT_EVENT and sc.SNAPSHOT_KEY in a:
            batch.snapshots.append(Snapshot(
                session_id=sid, trace_id=trace_id, span_id=span_id, seq=seq,
                key=str(a[sc.SNAPSHOT_KEY]), state=json_text(a.get(sc.SNAPSHOT_STATE)) or "null",
                hash=text_or_none(a.get(sc.SNAPSHOT_HASH)), step=int_value(a.get(sc.STEP, step), INT32_MAX),
                time_ns=min(ev["time_ns"], INT64_MAX)))
        elif ev["name"] == sc.EVALUATION_EVENT and sc.EVALUATION_SCORE in a:
            score = finite_score(a[sc.EVALUATION_SCORE])
            if score is None:  # no feedback (and no alert) from it; the event stays on the span
                _note_unscored(batch, span, sc.EVALUATION_SCORE, a[sc.EVALUATION_SCORE], "the evaluation's score")
                continue
            batch.evaluations.append(Evaluation(
                feedback_id=f"ev-{trace_id}-{span_id}-{seq}", session_id=sid, score=score,
                comment=text_or_none(a.get(sc.EVALUATION_EXPLANATION)),
                time_ns=min(ev["time_ns"] or end_ns, INT64_MAX)))
