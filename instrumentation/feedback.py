"""`tracefix.feedback()`: send a user's thumbs-up/down on a session to the collector."""
from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.request

from tracefix.client_tls import certificate_hint, client_context
from tracefix.errors import TracefixError

DEFAULT_SERVER = "http://127.0.0.1:4318"


class FeedbackError(TracefixError, RuntimeError):
    """The collector did not accept the feedback (unreachable, refused, or an error answer)."""


def feedback(session_id: str, score: float, comment: str | None = None, server: str | None = None,
             token: str | None = None, timeout: float = 10.0) -> dict:
    """POST {server}/api/v1/feedback with {"session_id", "score", "comment"}; returns the
    collector's JSON answer. `server` defaults to TRACEFIX_SERVER, then
    http://127.0.0.1:4318; `token` to TRACEFIX_INGEST_TOKEN, then TRACEFIX_TOKEN (sent as a
    Bearer token: the collector's ingest token is enough for feedback)."""
    if not session_id or not isinstance(session_id, str):
        raise ValueError("tracefix.feedback: session_id must be a non-empty string")
    score = float(score)
    server = (server or os.environ.get("TRACEFIX_SERVER") or DEFAULT_SERVER).rstrip("/")
    token = token or os.environ.get("TRACEFIX_INGEST_TOKEN") or os.environ.get("TRACEFIX_TOKEN")
    url = f"{server}/api/v1/feedback"
    body = json.dumps({"session_id": session_id, "score": score, "comment": comment}).encode("utf-8")
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
