"""What the API answers: the error shape of every 4xx/5xx (`ErrorBody`) and the documents of
its successes. They describe and never validate: a route writes its store dicts as they
are, and `tracefix.collector.openapi` publishes these models as the answers' schemas."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, Field

from tracefix.collector import contracts
from tracefix.collector.charts import GROUPINGS
from tracefix.collector.jobs import JOB_KINDS
from tracefix.collector.schemas.derive import ClosedAnswer, JSONValue, OpenDocument, derived_model


# --- errors ----------------------------------------------------------------------------------

# `code` by HTTP status, where the route has nothing more precise to say
ERROR_CODES = {400: "bad_request", 401: "unauthorized", 404: "not_found", 405: "method_not_allowed",
               408: "request_timeout", 409: "conflict", 413: "too_large", 415: "unsupported_media_type",
               422: "invalid_value", 429: "busy", 500: "internal", 503: "unavailable"}


class BodyProblem(ClosedAnswer):
    field: str = Field(description="where in the body, dotted ('steps.0'); empty for the body itself")
    problem: str


class ErrorBody(ClosedAnswer):
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


# --- successes -------------------------------------------------------------------------------

class Message(OpenDocument):
    """A chat message as stored (canonical OpenAI-style JSON)."""
    role: Optional[str] = None
    content: JSONValue = None


class Health(ClosedAnswer):
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


class StoreInfo(ClosedAnswer):
    db: str
    store_id: Optional[str]


class SessionSummary(ClosedAnswer):
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
    marked_replayable: bool = Field(description=(
        "the app marked its recording complete (tracefix.session.replayable: content captured, entrypoint "
        "importable again); not whether `tracefix replay` runs the session, which the session document's "
        "`replayable` and `replayable_reason` say (an LLM step recorded by another instrumentation only, a "
        "truncated payload or a tool run without @tracefix.tool make a marked session not replayable)"))
    source: Optional[str]
    steps: int
    agents: list[str]
    models: list[str]
    errors: int
    spans: int
    cost_usd: Optional[float] = Field(description="the known costs of its LLM calls (genai-prices' table), USD; null when none is known")
    feedback_score: Optional[float]
    feedback_count: int
    task: Optional[str]


class SessionList(ClosedAnswer):
    sessions: list[SessionSummary]
    limit: int
    offset: int


Feedback = derived_model(contracts.Feedback, ClosedAnswer)


class FeedbackRecorded(Feedback):
    session_id: str
    alert_id: Optional[str] = Field(description="set when the score raised an alert")
    job_id: Optional[str] = Field(description="the diagnosis job the alert queued")


StepAnnotation = derived_model(contracts.StepAnnotation, ClosedAnswer, describe={
    "negative": "the mark says the step went wrong (a score below 0, or a negative label alone): the diagnosis "
                "ranks that step first", "step": "the step's number in the session document"})


class AnnotationRecorded(StepAnnotation):
    alert_id: Optional[str] = Field(description="set when the mark raised an alert (as a session's thumbs-down does)")
    job_id: Optional[str] = Field(description="the diagnosis job the alert queued")


class AnnotationList(ClosedAnswer):
    session_id: str
    annotations: list[StepAnnotation]


ToolCall = derived_model(contracts.ToolCall, ClosedAnswer, truncated=(Optional[int], Field(
    None, description="characters cut from arguments and result (pages)")))
# the steps and the document answer a message as stored (`Message`: open, any content), a tool
# call with its cut mark (`ToolCall`), feedback as `Feedback`
_AS_ANSWERED: dict[type, type[BaseModel]] = {contracts.ChatMessage: Message, contracts.ToolCall: ToolCall,
                                            contracts.Feedback: Feedback, contracts.StepAnnotation: StepAnnotation}
_STEP_TEXT = {"kind": "llm, or message in an imported session",
              "snapshots": "state of tracked objects that changed at this step"}

DocumentStep = derived_model(contracts.Step, ClosedAnswer, name="DocumentStep", models=dict(_AS_ANSWERED),
                             describe=_STEP_TEXT)
PageStep = derived_model(
    contracts.Step, ClosedAnswer, name="PageStep", omit=("input_messages",), models=dict(_AS_ANSWERED), describe=_STEP_TEXT,
    input_message_keys=(list[str], Field(description="the step's input messages by key, in prompt order")),
    output_message_key=(Optional[str], ...),
    truncated=(Optional[int], Field(None, description="characters cut from its tool calls and snapshots")))
_SessionHeader = derived_model(contracts.SessionDocument, ClosedAnswer, name="_SessionHeader", omit=("steps",),
                               models=dict(_AS_ANSWERED))


class SessionDocument(_SessionHeader):
    """contracts §1: the whole session (training sessions)."""
    steps: list[DocumentStep]


class PageInfo(ClosedAnswer):
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


class StepAnswer(ClosedAnswer):
    session_id: str
    step: PageStep


class MessageAnswer(ClosedAnswer):
    key: str
    message: Message


class SpanStatus(ClosedAnswer):
    code: Optional[int]
    message: Optional[str]


class Span(ClosedAnswer):
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


class SpansPage(ClosedAnswer):
    spans: list[Span]
    page: PageInfo


class StoredText(ClosedAnswer):
    key: str
    text: str = Field(description="exactly as stored: a message's canonical JSON, tool definitions as sent")


class MessagesPage(ClosedAnswer):
    messages: list[StoredText]
    page: PageInfo


class ResultSaved(ClosedAnswer):
    session_id: str
    saved: Literal["analysis", "replay"]


class Imported(ClosedAnswer):
    session_ids: list[str]
    skipped: list[str] = Field(default_factory=list, description="ids stored already (with skip_stored)")


class TrainingSessions(ClosedAnswer):
    sessions: list[SessionDocument]
    page: PageInfo


class Job(ClosedAnswer):
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


class JobList(ClosedAnswer):
    jobs: list[Job]
    page: PageInfo


class LeaseRenewed(ClosedAnswer):
    job_id: str
    renewed: Literal[True]


class JobFinished(ClosedAnswer):
    job_id: str
    finished: Literal[True]


class AlertPayload(OpenDocument):
    """The webhook body (Slack-compatible `text` plus the fields a receiver reads)."""
    text: str
    alert_id: str
    session_id: str
    score: Optional[float] = Field(description="null: a step's mark given by its label alone")
    task: Optional[str]
    final_answer: JSONValue
    comment: Optional[str]
    link: str
    step: Optional[int] = Field(None, description="set when a person's mark on this step raised the alert")
    label: Optional[str] = Field(None, description="that mark's label")


class Delivery(ClosedAnswer):
    webhook: str
    state: Literal["pending", "delivered", "dead"]
    attempts: int
    last_error: Optional[str]
    delivered_at: Optional[str]


class Alert(ClosedAnswer):
    alert_id: str
    feedback_id: str = Field(description="the feedback, or the step annotation (annotation_id), that raised it")
    session_id: str
    payload: AlertPayload
    created_at: Optional[str]
    deliveries: list[Delivery]


class AlertList(ClosedAnswer):
    alerts: list[Alert]
    page: PageInfo


class ChartPoint(ClosedAnswer):
    bucket: int = Field(description="which interval, from 0 at `since`")
    t: Optional[str] = Field(description="when the interval starts")
    value: Optional[float] = Field(description="null: nothing in it had a value (a cost of unknown prices)")


class ChartSeries(ClosedAnswer):
    group: str = Field(description="the service, model, agent or tool; '(other)': the groups beyond the first six")
    total: int = Field(description="sessions or calls the series aggregates")
    points: list[ChartPoint] = Field(description="one per interval that holds sessions or calls")


class DashboardChart(ClosedAnswer):
    """One chart of the dashboards, aggregated by the store in one query."""
    chart: str
    title: str
    unit: Literal["count", "share", "tokens", "usd", "ms"]
    by: Literal[GROUPINGS]
    since: Optional[str]
    until: Optional[str]
    bucket_s: float = Field(description="the width of one interval, in seconds")
    buckets: int
    series: list[ChartSeries]


class MetricPoint(ClosedAnswer):
    """One data point of a GenAI metric as an OTLP metrics export sent it."""
    name: str
    unit: Optional[str]
    kind: str = Field(description="histogram, sum, gauge, exponential_histogram or summary")
    service: Optional[str]
    scope: Optional[str]
    attributes: dict[str, JSONValue]
    model: Optional[str]
    operation: Optional[str]
    token_type: Optional[str] = Field(description="gen_ai.token.type: input or output (token usage)")
    provider: Optional[str]
    start_time: Optional[str]
    time: Optional[str]
    time_ns: Optional[int]
    temporality: Optional[int] = Field(description="1 delta, 2 cumulative (a cumulative point repeats the "
                                                   "counts of the points before it)")
    value: Optional[float] = Field(description="a sum's or a gauge's value")
    count: Optional[int]
    sum: Optional[float]
    min: Optional[float]
    max: Optional[float]
    bounds: Optional[list[float]] = Field(description="a histogram's explicit bucket bounds")
    bucket_counts: Optional[list[int]]


class MetricPoints(ClosedAnswer):
    points: list[MetricPoint] = Field(description="oldest first")
    truncated: bool = Field(description="more points matched than `limit`")
