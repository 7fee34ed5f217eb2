"""What a client sends the API: the request bodies' models and `parse_body`, which validates
a parsed body strictly against one of them (InvalidBody, answered 400, otherwise)."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, RootModel, StrictBool, StringConstraints,
                      ValidationError, model_validator)

from tracefix.collector import contracts, marks
from tracefix.collector.jobs import FINISHED_JOB_STATES, JOB_KINDS, MAX_EDIT_CHARS, MAX_REQUESTED_STEPS
from tracefix.collector.schemas.derive import ClosedRequest, JSONValue, OpenDocument, derived_model, whole_number
from tracefix.errors import TracefixError


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


WorkerName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, pattern=r"\S"),
                       Field(description="the worker's name (cut to 200 characters)")]
LeaseSeconds = Annotated[float, Field(strict=True, ge=5, le=3600, description="lease length in seconds")]


class FeedbackRequest(ClosedRequest):
    session_id: str
    score: float = Field(description="finite: e.g. -1 thumbs down, 1 thumbs up; below the alert threshold "
                                     "it raises an alert and queues a diagnosis (non-finite: 422)")
    comment: Optional[str] = None


class AnnotationRequest(ClosedRequest):
    """A person's mark on one step: a label, a score, or both, and an optional comment."""
    # the published schema says what _label_or_score checks: a label or a score that is not null
    model_config = ConfigDict(**ClosedRequest.model_config, json_schema_extra={"anyOf": [
        {"required": ["label"], "properties": {"label": {"type": "string"}}},
        {"required": ["score"], "properties": {"score": {"type": "number"}}}]})
    step: Annotated[int, Field(ge=0, lt=1 << 31), BeforeValidator(whole_number)] = Field(
        description="the step's number in the session document (from 0); a session without it: 422")
    label: Optional[Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                                     max_length=marks.MAX_LABEL_CHARS)]] = Field(
        None, description="a name for the mark ('wrong tool', 'hallucination', 'correct'); alone, one of "
                          + ", ".join(sorted(marks.NEGATIVE_LABELS)) + " makes it negative")
    score: Optional[float] = Field(None, description="finite (non-finite: 422); below 0 the mark is negative: it "
                                                     "raises an alert, queues a diagnosis and ranks the step first")
    comment: Optional[Annotated[str, Field(max_length=marks.MAX_COMMENT_CHARS)]] = None

    @model_validator(mode="after")
    def _label_or_score(self) -> "AnnotationRequest":
        if self.label is None and self.score is None:
            raise ValueError("a step annotation needs a 'label' or a 'score'")
        return self


# the shapes of a job request (collector.jobs.replay_request checks them again when queued):
# neither steps nor an edit; a replay with steps; a replay with an edit at exactly one step
_JOB_SHAPES = [
    {"properties": {"steps": {"type": "null"}, "edit": {"type": "null"}}},
    {"required": ["kind"], "properties": {"kind": {"const": "replay"}, "edit": {"type": "null"}}},
    {"required": ["kind", "steps", "edit"],
     "properties": {"kind": {"const": "replay"}, "steps": {"type": "array", "maxItems": 1},
                    "edit": {"type": "string"}}},
]


class JobRequest(ClosedRequest):
    """Queue a diagnosis, or a replay (optionally of given steps, with a person's own edit)."""
    model_config = ConfigDict(extra="ignore", defer_build=True, json_schema_extra={"anyOf": _JOB_SHAPES})

    session_id: str
    kind: Optional[Literal[JOB_KINDS]] = Field(None, description="default diagnosis")
    reason: Optional[str] = None
    steps: Optional[Annotated[list[Annotated[int, Field(ge=0, lt=1 << 31), BeforeValidator(whole_number)]],
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


class ClaimRequest(ClosedRequest):
    worker: WorkerName
    lease_s: LeaseSeconds = 60
    kind: Literal[JOB_KINDS] = Field("replay", description="the kind of job this worker takes")


class LeaseRequest(ClosedRequest):
    worker: WorkerName
    lease_s: LeaseSeconds = 60


class FinishRequest(ClosedRequest):
    worker: WorkerName
    state: Literal[FINISHED_JOB_STATES]
    error: Optional[str] = Field(None, description="why it failed or was refused (kept to 20,000 characters)")


# what the importer reads a session's messages from (collector.imports): one of these lists
_MESSAGES_OR_STEPS = [{"required": [name], "properties": {name: {"type": "array"}}} for name in ("messages", "steps")]


class ImportedSession(OpenDocument):
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


class ImportBody(ClosedRequest):
    sessions: list[ImportedSession]
    skip_stored: StrictBool = Field(False, description="leave out the sessions whose id is stored already (answered "
                                                 "under `skipped`) instead of writing them over the stored ones")


class ImportRequest(RootModel[ImportBody | list[ImportedSession]]):
    """`{"sessions": [...]}` or the bare list."""


AnalysisResult = derived_model(contracts.AnalysisResult, OpenDocument, outline=True)  # contracts §3, as posted
ReplayResult = derived_model(contracts.ReplayResult, OpenDocument, outline=True)  # contracts §5, as posted
