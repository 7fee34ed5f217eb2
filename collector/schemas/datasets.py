"""The dataset and regression routes' bodies, queries and answers (collector/api/datasets.py),
published by `tracefix.collector.openapi` beside the others."""
from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import Field, StringConstraints

from tracefix.collector.schemas.answers import PageInfo
from tracefix.collector.schemas.derive import ClosedAnswer, ClosedRequest, JSONValue, OpenDocument
from tracefix.collector.schemas.queries import PageQuery
from tracefix.collector.store.datasets import ITEM_KINDS, MAX_NAME_CHARS

DatasetName = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS, pattern=r"^[^\r\n\x00]*\S"),
                        Field(description="the dataset's name (one line)")]
RunId = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")]


class DatasetAddRequest(ClosedRequest):
    dataset: Optional[DatasetName] = Field(None, description="default: 'default', where thumbs-downs go")
    session_ids: list[str] = Field(min_length=1, max_length=1000, description="stored sessions to add")


class ExportedItem(OpenDocument):
    """An item as `tracefix dataset export` writes it (one JSONL line): kept whole."""
    session_id: str = Field(min_length=1)
    dataset: Optional[DatasetName] = None


class DatasetImportRequest(ClosedRequest):
    dataset: Optional[DatasetName] = Field(None, description="default: each item's own dataset, else 'default'")
    items: list[ExportedItem] = Field(min_length=1, max_length=10_000)


class RegressResultRequest(ClosedRequest):
    run_id: RunId
    session_id: str
    result: dict = Field(description="one item's regression result (docs/contracts.md §8)")


class RegressQueueRequest(ClosedRequest):
    run_id: RunId
    items: list[Annotated[list[str], Field(min_length=2, max_length=2)]] = Field(
        min_length=1, max_length=1000, description="[dataset, session id] pairs")
    runs: int = Field(3, ge=1, le=20)
    tools: Literal["recorded", "live"] = "recorded"


class RegressQueued(ClosedAnswer):
    run_id: str
    job_ids: list[str]


class DatasetItemsQuery(PageQuery):
    dataset: Optional[str] = None
    service: Optional[str] = None
    since: Optional[str] = Field(None, description="ISO-8601 time or epoch seconds: sessions started since")
    kind: Optional[Literal[ITEM_KINDS]] = None
    session_id: Optional[list[str]] = Field(None, max_length=1000, description="repeatable: only these sessions")
    full: Optional[bool] = Field(None, description="true: each item whole (signatures, recorded tools, snapshots)")


class RegressQuery(PageQuery):
    run_id: Optional[str] = Field(None, description="this run's results; without: the runs, newest first")


class DatasetSummary(ClosedAnswer):
    dataset: str
    items: int
    thumbs_down: int
    added: int
    imported: int
    last_added_at: Optional[str] = None


class DatasetList(ClosedAnswer):
    datasets: list[DatasetSummary]


class DatasetItem(OpenDocument):
    dataset: str
    session_id: str
    kind: Literal[ITEM_KINDS]
    entrypoint: Optional[str] = None
    inputs: JSONValue = None
    outcome: Optional[str] = None
    milestones: list[dict] = Field(default_factory=list)
    validated_edit: Optional[dict] = None


class DatasetItems(ClosedAnswer):
    items: list[DatasetItem]
    page: PageInfo


class DatasetChanged(ClosedAnswer):
    dataset: str
    added: list[str]
    present: list[str] = Field(description="sessions the dataset held already (left as they were)")


class RegressRun(ClosedAnswer):
    run_id: str
    items: int
    updated_at: Optional[str] = None


class RegressAnswer(ClosedAnswer):
    runs: Optional[list[RegressRun]] = None
    results: Optional[list[dict]] = None


class RegressSaved(ClosedAnswer):
    run_id: str
    session_id: str
    saved: Literal[True]
