"""A person's marks on steps (step annotations: label, score, comment), and the alert a
negative one raises, as a session's thumbs-down does (collector.marks says which are)."""
from __future__ import annotations

import time
import uuid
from typing import Iterable

from tracefix.collector.marks import annotation_dict, check_mark, is_negative
from tracefix.collector.redact import redact_text
from tracefix.collector.store.outbox import FeedbackOutbox
from tracefix.collector.store.sql import first_row
from tracefix.errors import UnknownSession

ANNOTATION_COLUMNS = "annotation_id, step, span_id, label, score, comment, source, created_ns"  # marks.annotation_dict


def annotation_rows(cur, session_id: str) -> list[tuple]:
    """A session's marks as stored (ANNOTATION_COLUMNS), oldest first."""
    return cur.execute(f"SELECT {ANNOTATION_COLUMNS} FROM step_annotations WHERE session_id = ? "
                       "ORDER BY created_ns, annotation_id", [session_id]).fetchall()


class UnknownStep(ValueError):
    """The session has no step of that number (answered 422: the body's value is wrong)."""


class StepAnnotations(FeedbackOutbox):
    """Marks on steps: written with their alert in one transaction, read per session."""

    def add_annotation(self, session_id: str, step: int, *, label: str | None = None, score: float | None = None,
                       comment: str | None = None, source: str = "api", alert_threshold: float = 0.0,
                       webhooks: Iterable[str] = (), public_url: str | None = None) -> dict:
        """Record a mark on step `step` (its number in the session document). A negative one
        (a score below `alert_threshold`, or a negative label alone) raises an alert and
        queues a diagnosis, as a session's thumbs-down does. Raises UnknownSession, UnknownStep."""
        check_mark(score, label)
        label = label.strip() if label else None
        with self._tx() as con:
            row = first_row(con.execute("SELECT output FROM sessions WHERE session_id = ?", [session_id]))
            if row is None:
                raise UnknownSession(session_id)
            span = first_row(con.execute("SELECT span_id FROM steps WHERE session_id = ? AND idx = ?",
                                         [session_id, step]))
            if span is None:
                count = first_row(con.execute("SELECT count(*) FROM steps WHERE session_id = ?", [session_id]))
                raise UnknownStep(f"session {session_id!r} has no step {step} (it has {count[0] if count else 0}: "
                                  f"steps are numbered from 0)")
            comment = redact_text(comment) if comment else comment  # stored, and sent in the alert
            annotation_id = f"an-{uuid.uuid4().hex[:16]}"
            created_ns = time.time_ns()
            con.execute("INSERT INTO step_annotations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [annotation_id, session_id, step, span[0], label, score, comment, source, created_ns])
            out: dict = {"alerts": [], "jobs": []}
            below = score < alert_threshold if score is not None else is_negative(None, label)
            if below:
                self._raise_alert(con, out, session_id, annotation_id, score, comment, output=row[0],
                                  created_ns=created_ns, webhooks=list(webhooks), public_url=public_url,
                                  step=step, label=label)
        mark = annotation_dict((annotation_id, step, span[0], label, score, comment, source, created_ns), session_id)
        mark["alert_id"] = out["alerts"][0]["alert_id"] if out["alerts"] else None
        mark["job_id"] = out["jobs"][0]["job_id"] if out["jobs"] else None
        return mark

    def list_annotations(self, session_id: str) -> list[dict] | None:
        """A session's marks, oldest first; None for an unknown session."""
        cur = self._read()
        if first_row(cur.execute("SELECT 1 FROM sessions WHERE session_id = ?", [session_id])) is None:
            return None
        rows = annotation_rows(cur, session_id)
        steps = dict(cur.execute("SELECT span_id, idx FROM steps WHERE session_id = ?", [session_id]).fetchall()) \
            if rows else {}
        return [annotation_dict(r, session_id, steps) for r in rows]
