"""The JSON the collector's API reads and writes, as pydantic models (docs/contracts.md).

Request models validate what a client sends: `parse_body(Model, data)` returns the model
or raises `InvalidBody` (answered 400 in the error shape, naming each field at fault).
Response models only describe: a route writes its store dicts as they are (a session page
is never round-tripped through pydantic), and `tracefix.collector.openapi` publishes these
models as the schemas of `/openapi.json`. Documents a client may extend (session
metadata, analysis and replay results) allow fields the models do not name.

The documents the parts hand each other are declared once, as the typed dicts of
`tracefix.collector.contracts`; the models of those documents here (the session document,
its steps, tool calls and feedback, the analysis and replay results) are derived from
them by `derived_model`, adding only what the API itself answers (a page's cut marks).

Every 4xx/5xx answer of the API is an `ErrorBody`: `{"error": "what went wrong", "code":
"machine_readable", ...}` plus the optional fields named below.
"""
from __future__ import annotations

import types
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin, get_type_hints, is_typeddict

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, RootModel, StrictBool, StringConstraints,
                      ValidationError, create_model, model_validator)

from tracefix.collector import contracts
from tracefix.collector.document import INT64_MAX
from tracefix.collector.jobs import FINISHED_JOB_STATES, JOB_KINDS, JOB_STATES, MAX_EDIT_CHARS, MAX_REQUESTED_STEPS
from tracefix.errors import TracefixError

JSONValue = Any  # any JSON value: what an agent returned, a tool's result, a tracked object's state


def _whole_number(value: Any) -> Any:
    """15596.0 as the integer 15596: JSON has one number type, and JSON Schema's "integer"
    (what the published schema says) admits any number without a fraction."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# An integer field, validated as the published schema reads it: a whole number (15596 or
# 15596.0), never a bool or a string of digits (request bodies are validated strictly).
# Bounds go before the validator (`Annotated[int, Field(ge=0), BeforeValidator(...)]`):
# after it, pydantic leaves them out of the JSON Schema's minimum and maximum.
JSONInt = Annotated[int, BeforeValidator(_whole_number)]


class _Closed(BaseModel):
    """A request whose fields are all named here (unknown fields are ignored, as they always were)."""
    model_config = ConfigDict(extra="ignore", defer_build=True)


class _Answer(BaseModel):
    """An answer whose fields are all named here: the published schema admits no others."""
    model_config = ConfigDict(extra="forbid", defer_build=True)


class _Open(BaseModel):
    """A document that may carry fields beyond those named here."""
    model_config = ConfigDict(extra="allow", defer_build=True)


def derived_model(contract: type, base: type[BaseModel], *, outline: bool = False, name: str | None = None,
                  omit: tuple[str, ...] = (), models: dict[type, type[BaseModel]] | None = None,
                  describe: dict[str, str] | None = None, **more: Any) -> type[BaseModel]:
    """The pydantic model of the typed dict `contract`: its fields with their types and
    docstring, on `base`. Typed dicts nested in a field become models the same way, unless
    `models` names the model to use for one. `outline`: only the outline is checked, as the
    API checks a posted result: every field may be missing or null, and a typed dict nested
    in a field is any JSON object (the store keeps the result as posted; what is inside is
    for its readers to judge, and a report survives junk there).
    `omit` leaves fields out; `more` adds fields (pydantic's `(type, default)` pairs)."""
    models = {} if models is None else models
    hints = get_type_hints(contract)

    def convert(tp: Any) -> Any:
        if tp is int:
            return JSONInt
        if is_typeddict(tp):
            if outline:
                return dict[str, JSONValue]
            if tp not in models:
                models[tp] = derived_model(tp, base, models=models)
            return models[tp]
        origin = get_origin(tp)
        if origin is list:
            return list[convert(get_args(tp)[0])]
        if origin is dict:
            key, value = get_args(tp)
            return dict[key, convert(value)]
        if origin in (Union, types.UnionType):
            return Union[tuple(convert(a) for a in get_args(tp))]
        return tp

    fields: dict[str, Any] = {}
    for field, tp in hints.items():
        if field in omit:
            continue
        kind = convert(tp)
        required = field in contract.__required_keys__ and not outline
        info = Field(... if required else None, description=(describe or {}).get(field))
        fields[field] = (kind if required else Optional[kind], info)
    return create_model(name or contract.__name__, __base__=base, __doc__=contract.__doc__,
                        __module__=__name__, **fields, **more)


# --- errors ----------------------------------------------------------------------------------

# `code` by HTTP status, where the route has nothing more precise to say
ERROR_CODES = {400: "bad_request", 401: "unauthorized", 404: "not_found", 405: "method_not_allowed",
               408: "request_timeout", 409: "conflict", 413: "too_large", 415: "unsupported_media_type",
               422: "invalid_value", 429: "busy", 500: "internal", 503: "unavailable"}


class BodyProblem(_Answer):
    field: str = Field(description="where in the body, dotted ('steps.0'); empty for the body itself")
    problem: str


class ErrorBody(_Answer):
    """The one shape of every 4xx/5xx answer of the API."""
    error: str = Field(description="what went wrong, for a person")
    code: str = Field(description="what went wrong, for a program: " + ", ".join(sorted(
        {*ERROR_CODES.values(), "unknown_session", "invalid_parameter", "invalid_body", "lease_lost"})))
    parameter: Optional[str] = Field(None, description="the query parameter or path segment at fault (422)")
    detail: Optional[list[BodyProblem]] = Field(None, description="every problem of a request body (400)")
    hint: Optional[str] = None
    retry_after_s: Optional[float] = Field(None, description="back-pressure (429): retry after this many seconds")


class LeaseConflict(ErrorBody):
    """409: the job is no longer this worker's (its lease ran out, or it was finished)."""
    job_id: str
    renewed: Literal[False]


class FinishConflict(ErrorBody):
    job_id: str
    finished: Literal[False]


class InvalidBody(TracefixError, ValueError):
    """A request body that does not match its model (answered 400)."""

    error_code = "invalid_body"

    def __init__(self, problems: list[dict]):
        self.problems = problems
        first = problems[0]
        where = f"body field {first['field']!r}" if first["field"] else "body"
        more = f" (and {len(problems) - 1} more problem(s), see 'detail')" if len(problems) > 1 else ""
        super().__init__(f"{where}: {first['problem']}{more}")

    def http_details(self) -> dict:
        return {"detail": self.problems}


def parse_body(model: type[BaseModel], data: Any) -> Any:
    """`data` (parsed JSON) validated as `model`, or InvalidBody naming what is wrong.
    Strictly: a value is taken only as the JSON type the schema names (`false` is no
    integer, `"1"` no number), so what is stored as posted is what the schema describes."""
    try:
        return model.model_validate(data, strict=True)
    except ValidationError as exc:
        problems = [{"field": ".".join(str(p) for p in e["loc"]),
                     "problem": "must be a JSON object" if e["type"] in ("model_type", "dict_type") else e["msg"]}
                    for e in exc.errors()[:20]]
        raise InvalidBody(problems) from None


# --- request bodies --------------------------------------------------------------------------

WorkerName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, pattern=r"\S"),
                       Field(description="the worker's name (cut to 200 characters)")]
LeaseSeconds = Annotated[float, Field(strict=True, ge=5, le=3600, description="lease length in seconds")]


class FeedbackRequest(_Closed):
    session_id: str
    score: float = Field(description="finite: e.g. -1 thumbs down, 1 thumbs up; below the alert threshold "
                                     "it raises an alert and queues a diagnosis (non-finite: 422)")
    comment: Optional[str] = None


# the shapes of a job request (collector.jobs.replay_request checks them again when queued):
# neither steps nor an edit; a replay with steps; a replay with an edit at exactly one step
_JOB_SHAPES = [
    {"properties": {"steps": {"type": "null"}, "edit": {"type": "null"}}},
    {"required": ["kind"], "properties": {"kind": {"const": "replay"}, "edit": {"type": "null"}}},
    {"required": ["kind", "steps", "edit"],
     "properties": {"kind": {"const": "replay"}, "steps": {"type": "array", "maxItems": 1},
                    "edit": {"type": "string"}}},
]


class JobRequest(_Closed):
    """Queue a diagnosis, or a replay (optionally of given steps, with a person's own edit)."""
    model_config = ConfigDict(extra="ignore", defer_build=True, json_schema_extra={"anyOf": _JOB_SHAPES})

    session_id: str
    kind: Optional[Literal[JOB_KINDS]] = Field(None, description="default diagnosis")
    reason: Optional[str] = None
    steps: Optional[Annotated[list[Annotated[int, Field(ge=0, lt=1 << 31), BeforeValidator(_whole_number)]],
                              Field(min_length=1, max_length=MAX_REQUESTED_STEPS)]] = Field(
        None, description="replay only: the steps to test instead of the attributed ones")
    edit: Optional[Annotated[str, Field(min_length=1, max_length=MAX_EDIT_CHARS, pattern=r"\S")]] = Field(
        None, description="replay only: the intervention text to test at the one step given")

    @model_validator(mode="after")
    def _replay_options(self) -> "JobRequest":
        if (self.steps is not None or self.edit is not None) and self.kind != "replay":
            raise ValueError("only a replay job takes steps or an edit")
        if self.edit is not None and (self.steps is None or len(self.steps) != 1):
            raise ValueError("an 'edit' is tested at exactly one step: give one step with it")
        return self


class ClaimRequest(_Closed):
    worker: WorkerName
    lease_s: LeaseSeconds = 60
    kind: Literal[JOB_KINDS] = Field("replay", description="the kind of job this worker takes")


class LeaseRequest(_Closed):
    worker: WorkerName
    lease_s: LeaseSeconds = 60


class FinishRequest(_Closed):
    worker: WorkerName
    state: Literal[FINISHED_JOB_STATES]
    error: Optional[str] = Field(None, description="why it failed or was refused (kept to 20,000 characters)")


class Message(_Open):
    """A chat message as stored (canonical OpenAI-style JSON)."""
    role: Optional[str] = None
    content: JSONValue = None


# what the importer reads a session's messages from (collector.imports): one of these lists
_MESSAGES_OR_STEPS = [{"required": [name], "properties": {name: {"type": "array"}}} for name in ("messages", "steps")]


class ImportedSession(_Open):
    """A message-log session (or a session document whose steps carry messages), contracts §1:
    it needs a `messages` list or a `steps` list."""
    model_config = ConfigDict(extra="allow", defer_build=True, json_schema_extra={"anyOf": _MESSAGES_OR_STEPS})

    session_id: Optional[str] = None
    messages: Optional[list[dict[str, JSONValue]]] = None
    steps: Optional[list[dict[str, JSONValue]]] = None
    metadata: Optional[dict[str, JSONValue]] = None
    task: Optional[str] = None
    outcome: Optional[str] = None
    score: Optional[float] = None
    started_at: Optional[str | float] = None

    @model_validator(mode="after")
    def _has_messages_or_steps(self) -> "ImportedSession":
        if self.messages is None and self.steps is None:
            raise ValueError("an imported session needs a 'messages' list or a 'steps' list")
        return self


class ImportBody(_Closed):
    sessions: list[ImportedSession]
    skip_stored: StrictBool = Field(False, description="leave out the sessions whose id is stored already (answered "
                                                 "under `skipped`) instead of writing them over the stored ones")


class ImportRequest(RootModel[ImportBody | list[ImportedSession]]):
    """`{"sessions": [...]}` or the bare list."""


AnalysisResult = derived_model(contracts.AnalysisResult, _Open, outline=True)  # contracts §3, as posted
ReplayResult = derived_model(contracts.ReplayResult, _Open, outline=True)  # contracts §5, as posted


# --- query parameters (described here, parsed by url_input.QueryParams) ----------------------

class PageQuery(_Closed):
    offset: int = Field(0, ge=0, le=1 << 31)
    limit: int = Field(100, ge=1, le=1000)


class SpansQuery(PageQuery):
    limit: int = Field(500, ge=1, le=1000)


class SessionPageQuery(PageQuery):
    max_chars: int = Field(2000, ge=1, le=1_000_000, description="longer strings are cut and marked")
    content: Literal["previews", "keys"] = Field("previews", description="keys: message bodies left out")


class SessionListQuery(_Closed):
    feedback: Optional[Literal["negative", "positive", "any"]] = None
    outcome: Optional[str] = None
    service: Optional[str] = None
    agent: Optional[str] = None
    parent_session_id: Optional[str] = None
    since: Optional[str] = Field(None, description="ISO-8601 time or epoch seconds")
    until: Optional[str] = Field(None, description="ISO-8601 time or epoch seconds")
    limit: int = Field(50, ge=0, le=INT64_MAX, description="at most 1000 are returned")
    offset: int = Field(0, ge=0, le=INT64_MAX)


class ReportQuery(_Closed):
    format: Literal["html", "md"] = "html"


class TrainingQuery(PageQuery):
    criterion: Literal["success", "positive", "all"] = "success"


LIST_ORDERS = ("oldest", "newest")  # a list of jobs or alerts: as they were created, or the last first


class JobsQuery(PageQuery):
    state: Optional[Literal[JOB_STATES]] = None
    session_id: Optional[str] = None
    kind: Optional[Literal[JOB_KINDS]] = None
    job_id: Optional[list[str]] = Field(None, max_length=1000, description="repeatable: only these jobs")
    order: Literal[LIST_ORDERS] = Field("oldest", description="newest: the last queued first")


class AlertsQuery(PageQuery):
    session_id: Optional[str] = None
    order: Literal[LIST_ORDERS] = Field("oldest", description="newest: the last raised first")


# --- responses -------------------------------------------------------------------------------

class Health(_Answer):
    status: Literal["ok", "unhealthy"] = Field(description="unhealthy (HTTP 503) while the store cannot write")
    reason: Optional[str] = Field(None, description="why the store cannot write, while it is unhealthy")
    store_id: Optional[str] = Field(description="the store file's identity, not its path (tracefix.collector.access)")
    pending_spans: int
    committed_spans: int
    transactions: int
    checkpoints: int
    spooled_requests: int = Field(description="exports acknowledged into the durable spool, not yet committed")
    spooled_spans: int = Field(description="their spans")
    spool_bytes: int = Field(description="disk the spool holds (--spool-max-mb is its budget)")


class StoreInfo(_Answer):
    db: str
    store_id: Optional[str]


class SessionSummary(_Answer):
    session_id: str
    service: Optional[str]
    name: Optional[str]
    entrypoint: Optional[str]
    outcome: Optional[str]
    score: Optional[float]
    started_at: Optional[str]
    ended_at: Optional[str]
    duration_ms: Optional[float]
    parent_session_id: Optional[str]
    replayable: bool
    source: Optional[str]
    steps: int
    agents: list[str]
    models: list[str]
    errors: int
    spans: int
    feedback_score: Optional[float]
    feedback_count: int
    task: Optional[str]


class SessionList(_Answer):
    sessions: list[SessionSummary]
    limit: int
    offset: int


Feedback = derived_model(contracts.Feedback, _Answer)


class FeedbackRecorded(Feedback):
    session_id: str
    alert_id: Optional[str] = Field(description="set when the score raised an alert")
    job_id: Optional[str] = Field(description="the diagnosis job the alert queued")


ToolCall = derived_model(contracts.ToolCall, _Answer, truncated=(Optional[int], Field(
    None, description="characters cut from arguments and result (pages)")))
# the steps and the document answer a message as stored (`Message`: open, any content), a tool
# call with its cut mark (`ToolCall`), feedback as `Feedback`
_AS_ANSWERED: dict[type, type[BaseModel]] = {contracts.ChatMessage: Message, contracts.ToolCall: ToolCall,
                                            contracts.Feedback: Feedback}
_STEP_TEXT = {"kind": "llm, or message in an imported session",
              "snapshots": "state of tracked objects that changed at this step"}

DocumentStep = derived_model(contracts.Step, _Answer, name="DocumentStep", models=dict(_AS_ANSWERED),
                             describe=_STEP_TEXT)
PageStep = derived_model(
    contracts.Step, _Answer, name="PageStep", omit=("input_messages",), models=dict(_AS_ANSWERED), describe=_STEP_TEXT,
    input_message_keys=(list[str], Field(description="the step's input messages by key, in prompt order")),
    output_message_key=(Optional[str], ...),
    truncated=(Optional[int], Field(None, description="characters cut from its tool calls and snapshots")))
_SessionHeader = derived_model(contracts.SessionDocument, _Answer, name="_SessionHeader", omit=("steps",),
                               models=dict(_AS_ANSWERED))


class SessionDocument(_SessionHeader):
    """contracts §1: the whole session (training sessions)."""
    steps: list[DocumentStep]


class PageInfo(_Answer):
    offset: int
    returned: int
    total: int
    next_offset: Optional[int] = Field(description="where the next page starts; null after the last")


class SessionPageInfo(PageInfo):
    limit: int
    max_chars: Optional[int]


class PreviewMessage(Message):
    truncated: Optional[int] = None


class SessionPage(_SessionHeader):
    """contracts §1b: the header, steps [offset, offset + limit), previews of their messages."""
    steps: list[PageStep]
    messages: Optional[dict[str, PreviewMessage]] = Field(None, description="absent with content=keys")
    page: SessionPageInfo


class StepAnswer(_Answer):
    session_id: str
    step: PageStep


class MessageAnswer(_Answer):
    key: str
    message: Message


class SpanStatus(_Answer):
    code: Optional[int]
    message: Optional[str]


class Span(_Answer):
    trace_id: str
    span_id: str
    parent_span_id: Optional[str]
    session_id: Optional[str]
    service: Optional[str]
    name: Optional[str]
    span_kind: Optional[int]
    kind: Optional[str]
    start_time: Optional[str]
    end_time: Optional[str]
    start_ns: Optional[int]
    end_ns: Optional[int]
    duration_ms: Optional[float]
    status: SpanStatus
    attributes: dict[str, JSONValue]
    events: list[JSONValue]
    resource: dict[str, JSONValue]
    scope: Optional[str]
    message_keys: Optional[dict[str, str | list[str]]] = Field(
        None, description="attributes held in the messages table, by key (contracts §1b)")


class SpansPage(_Answer):
    spans: list[Span]
    page: PageInfo


class StoredText(_Answer):
    key: str
    text: str = Field(description="exactly as stored: a message's canonical JSON, tool definitions as sent")


class MessagesPage(_Answer):
    messages: list[StoredText]
    page: PageInfo


class ResultSaved(_Answer):
    session_id: str
    saved: Literal["analysis", "replay"]


class Imported(_Answer):
    session_ids: list[str]
    skipped: list[str] = Field(default_factory=list, description="ids stored already (with skip_stored)")


class TrainingSessions(_Answer):
    sessions: list[SessionDocument]
    page: PageInfo


class Job(_Answer):
    job_id: str
    session_id: str
    kind: Literal[JOB_KINDS]
    state: str = Field(description="queued, running, done, failed or refused")
    reason: Optional[str] = None
    attempts: Optional[int] = None
    error: Optional[str] = None
    created_at: Optional[str] = None
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    worker: Optional[str] = None
    lease_until: Optional[str] = None
    options: Optional[dict[str, JSONValue]] = Field(description="what a person asked a replay to test")
    diagnose: Optional[Literal["analysis", "full"]] = Field(
        None, description="a diagnosis job as claimed by a worker: what it runs (the collector's --diagnose)")


class JobList(_Answer):
    jobs: list[Job]
    page: PageInfo


class LeaseRenewed(_Answer):
    job_id: str
    renewed: Literal[True]


class JobFinished(_Answer):
    job_id: str
    finished: Literal[True]


class AlertPayload(_Open):
    """The webhook body (Slack-compatible `text` plus the fields a receiver reads)."""
    text: str
    alert_id: str
    session_id: str
    score: float
    task: Optional[str]
    final_answer: JSONValue
    comment: Optional[str]
    link: str


class Delivery(_Answer):
    webhook: str
    state: Literal["pending", "delivered", "dead"]
    attempts: int
    last_error: Optional[str]
    delivered_at: Optional[str]


class Alert(_Answer):
    alert_id: str
    feedback_id: str
    session_id: str
    payload: AlertPayload
    created_at: Optional[str]
    deliveries: list[Delivery]


class AlertList(_Answer):
    alerts: list[Alert]
    page: PageInfo
