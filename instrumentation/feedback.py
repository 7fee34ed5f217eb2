"""`tracefix.feedback()`: send a user's thumbs-up/down on a session, or a mark on one of its
steps, to the collector."""
from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.request
from urllib.parse import quote

from tracefix.client_tls import certificate_hint, client_context
from tracefix.errors import TracefixError

DEFAULT_SERVER = "http://127.0.0.1:4318"


class FeedbackError(TracefixError, RuntimeError):
    """The collector did not accept the feedback (unreachable, refused, or an error answer)."""


def feedback(session_id: str, score: float | None = None, comment: str | None = None, server: str | None = None,
             token: str | None = None, timeout: float = 10.0, *, step: int | None = None,
             label: str | None = None) -> dict:
    """A user's mark, sent to the collector; returns its JSON answer.

    On the session (`step` None): POST {server}/api/v1/feedback with {"session_id", "score",
    "comment"}; a score is needed. On one step (`step=N`, its number in the session, from 0):
    POST {server}/api/v1/sessions/{id}/annotations with {"step", "label", "score", "comment"}
    (Phoenix's span annotations, Langfuse's scores on observations); a label, a score or both.
    A negative mark (a score below 0, or a label like "wrong" alone) raises an alert and a
    diagnosis, which ranks that step first. `server` defaults to TRACEFIX_SERVER, then
    http://127.0.0.1:4318; `token` to TRACEFIX_INGEST_TOKEN, then TRACEFIX_TOKEN (sent as a
    Bearer token: the collector's ingest token is enough for feedback)."""
    if not session_id or not isinstance(session_id, str):
        raise ValueError("tracefix.feedback: session_id must be a non-empty string")
    server = (server or os.environ.get("TRACEFIX_SERVER") or DEFAULT_SERVER).rstrip("/")
    token = token or os.environ.get("TRACEFIX_INGEST_TOKEN") or os.environ.get("TRACEFIX_TOKEN")
    if step is None:
        if score is None:
            raise ValueError("tracefix.feedback: a session's feedback needs a score")
        if label is not None:
            raise ValueError("tracefix.feedback: a label marks a step: give step=N with it")
        url = f"{server}/api/v1/feedback"
        fields: dict = {"session_id": session_id, "score": float(score), "comment": comment}
    else:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"tracefix.feedback: step must be a step number (0, 1, ...), not {step!r}")
        if score is None and not label:
            raise ValueError("tracefix.feedback: a step's mark needs a label or a score")
        url = f"{server}/api/v1/sessions/{quote(session_id, safe='')}/annotations"
        fields = {"step": step, "label": label, "score": None if score is None else float(score), "comment": comment}
    body = json.dumps(fields).encode("utf-8")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=client_context()) as response:
            text = response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:500]
        raise FeedbackError(f"tracefix.feedback: POST {url} failed: HTTP {exc.code} {exc.reason}: {detail}") from exc
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", None) or f"{type(exc).__name__}: {exc}"
        raise FeedbackError(f"tracefix.feedback: cannot reach the collector at {url}: {reason} "
                            f"(is `tracefix serve` running? set TRACEFIX_SERVER){certificate_hint(url)}") from exc
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return {"raw": text}
