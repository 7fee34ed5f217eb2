"""A person's mark on one step (a step annotation): what it may hold, and when it says the
step went wrong. One rule, read by the store (the alert a mark raises, the dashboards'
thumbs-down rate) and by the analysis (a marked step ranks first)."""
from __future__ import annotations

import math

from tracefix.collector.document import iso

# Labels that say "wrong" by themselves, for a mark given without a score. Matched whole
# (after trimming and lower-casing): a label is a name a person picks, not a sentence to
# read, so "not bad" or "bad?" say nothing here; give a score to be unambiguous.
NEGATIVE_LABELS = frozenset({"bad", "wrong", "incorrect", "error", "fail", "failure", "failed", "negative",
                             "thumbs-down", "thumbs_down", "thumbsdown", "thumbs down", "👎"})
MAX_LABEL_CHARS = 100
MAX_COMMENT_CHARS = 2000


def is_negative(score: float | None, label: str | None) -> bool:
    """A mark says its step went wrong: a score below 0, or no score and a negative label."""
    if score is not None:
        return score < 0
    return label is not None and label.strip().lower() in NEGATIVE_LABELS


def negative_sql(score: str = "score", label: str = "label") -> str:
    """The same rule as a SQL condition over the columns named."""
    labels = ", ".join("'" + name.replace("'", "''") + "'" for name in sorted(NEGATIVE_LABELS))
    return f"({score} < 0 OR ({score} IS NULL AND lower(trim({label})) IN ({labels})))"


def check_mark(score: float | None, label: str | None) -> None:
    """A mark holds a label or a score (or both); a score is a finite number."""
    if score is None and (label is None or not label.strip()):
        raise ValueError("a step annotation needs a 'label' or a 'score'")
    if score is not None and not math.isfinite(score):
        raise ValueError(f"annotation 'score' must be a finite number, not {score!r}")


def annotation_dict(row: tuple, session_id: str, step_of_span: dict[str, int] | None = None) -> dict:
    """A stored row (store.annotations.ANNOTATION_COLUMNS) as the API and the session document give it: on the
    step its span is now (`step_of_span`; a span that arrived late renumbers the steps)."""
    annotation_id, step, span_id, label, score, comment, source, created_ns = row
    step = (step_of_span or {}).get(span_id, step)
    return {"annotation_id": annotation_id, "session_id": session_id, "step": step, "label": label, "score": score,
            "comment": comment, "source": source, "negative": is_negative(score, label),
            "created_at": iso(created_ns)}
