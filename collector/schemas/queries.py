"""The query parameters of the API's reads, described for `/openapi.json` (url_input.QueryParams
parses them; the routes say which they read)."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from tracefix.collector.charts import GROUPINGS, MAX_BUCKETS, RANGES
from tracefix.collector.document import INT64_MAX
from tracefix.collector.jobs import JOB_KINDS, JOB_STATES
from tracefix.collector.schemas.derive import ClosedRequest
from tracefix.collector.session_list import DIAGNOSIS_STATES, SESSION_SORTS

class PageQuery(ClosedRequest):
    offset: int = Field(0, ge=0, le=1 << 31)
    limit: int = Field(100, ge=1, le=1000)


class SpansQuery(PageQuery):
    limit: int = Field(500, ge=1, le=1000)


class SessionPageQuery(PageQuery):
    max_chars: int = Field(2000, ge=1, le=1_000_000, description="longer strings are cut and marked")
    content: Literal["previews", "keys"] = Field("previews", description="keys: message bodies left out")


class SessionListQuery(ClosedRequest):
    feedback: Optional[Literal["negative", "positive", "any"]] = None
    outcome: Optional[str] = None
    service: Optional[str] = None
    agent: Optional[str] = None
    parent_session_id: Optional[str] = None
    since: Optional[str] = Field(None, description="ISO-8601 time or epoch seconds")
    until: Optional[str] = Field(None, description="ISO-8601 time or epoch seconds")
    model: Optional[str] = Field(None, description="some LLM call of the session used this model")
    task: Optional[str] = Field(None, description="a case-insensitive substring of the session's task")
    diagnosis: Optional[Literal[DIAGNOSIS_STATES]] = None
    min_cost: Optional[float] = Field(None, ge=0, description="USD its LLM calls cost at least (unknown: no match)")
    max_cost: Optional[float] = Field(None, ge=0, description="USD its LLM calls cost at most (unknown: no match)")
    sort: Literal[SESSION_SORTS] = Field("time", description="sessions without the value come last either way")
    order: Literal["desc", "asc"] = "desc"
    limit: int = Field(50, ge=0, le=INT64_MAX, description="at most 1000 are returned")
    offset: int = Field(0, ge=0, le=INT64_MAX)


class ReportQuery(ClosedRequest):
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



class DashboardQuery(ClosedRequest):
    by: Literal[GROUPINGS] = Field("service", description="one series per group")
    range: Literal[tuple(RANGES)] = Field(  # type: ignore[valid-type]
        "all", description="back from now; all: from the first stored session to the last")
    since: Optional[str] = Field(None, description="ISO-8601 time or epoch seconds (instead of the range's start)")
    until: Optional[str] = Field(None, description="ISO-8601 time or epoch seconds (instead of the range's end)")
    buckets: int = Field(24, ge=1, le=MAX_BUCKETS, description="equal intervals between since and until")


class MetricPointsQuery(ClosedRequest):
    name: Optional[str] = Field(None, description="a metric's name, e.g. gen_ai.client.token.usage")
    service: Optional[str] = None
    model: Optional[str] = Field(None, description="the point's gen_ai.response.model, else gen_ai.request.model")
    since: Optional[str] = Field(None, description="ISO-8601 time or epoch seconds (the point's time)")
    until: Optional[str] = Field(None, description="ISO-8601 time or epoch seconds (excluded)")
    limit: int = Field(1000, ge=1, le=10_000)
