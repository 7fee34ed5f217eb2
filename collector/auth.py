"""Who may do what on `tracefix serve`: two bearer tokens, two scopes.

- **ingest** (`--ingest-token`, TRACEFIX_INGEST_TOKEN): what every instrumented app holds.
  It may write spans (OTLP/HTTP `/v1/traces`, OTLP/gRPC) and feedback
  (`POST /api/v1/feedback`) and marks on steps (`POST /api/v1/sessions/{id}/annotations`),
  nothing else: it cannot read sessions or drive workers.
- **api** (`--token`, TRACEFIX_TOKEN): people, `tracefix` commands and `tracefix worker`.
  It may do everything, ingest included (replay children export their spans with it).

With no token at all everything is open (the default binds to 127.0.0.1 only). An ingest
token without an API token would leave the API open while pretending to protect it, so it
is refused. Every configured token is compared in constant time on every request.

The web UI (tracefix.ui) asks for the API token once and keeps, in an HttpOnly,
SameSite=Strict cookie (`UI_COOKIE`), the id of a session of its own (`UiSessions`), never
the token. The cookie opens what the API token opens, but only for reads (GET, HEAD): a
write carried by a cookie needs the UI's CSRF token, which only the UI's own forms check.
"""
from __future__ import annotations

import hmac
import secrets
import threading
import time

INGEST = "ingest"
API = "api"
UI_COOKIE = "tracefix_ui"
SAFE_METHODS = ("GET", "HEAD")
UI_SESSION_IDLE_S = 12 * 3600.0  # default of `serve --ui-session-idle-minutes`
UI_SESSION_MAX_AGE_S = 7 * 24 * 3600  # however active, a sign-in lasts no longer (the cookie's Max-Age too)
MAX_UI_SESSIONS = 10_000  # past it a new sign-in ends the oldest one: memory stays bounded


class UiSessions:
    """The web UI's sign-ins, kept in this process's memory: each login gets a random id (the
    cookie's value), which ends at logout, after `idle_s` without a request, or
    UI_SESSION_MAX_AGE_S after the login. A restart forgets them all, so every browser signs
    in again, and a collector restarted with another --token leaves no cookie of the old one
    valid."""

    def __init__(self, idle_s: float = UI_SESSION_IDLE_S):
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._sessions: dict[str, tuple[float, float]] = {}  # id -> (signed in, last request), monotonic

    def open(self) -> str:
        session_id = secrets.token_urlsafe(32)
        now = time.monotonic()
        with self._lock:
            for stale in [s for s, times in self._sessions.items() if self._ended(times, now)]:
                del self._sessions[stale]
            while len(self._sessions) >= MAX_UI_SESSIONS:  # a dict keeps insertion order: the oldest goes
                del self._sessions[next(iter(self._sessions))]
            self._sessions[session_id] = (now, now)
        return session_id

    def check(self, session_id: str) -> bool:
        """`session_id` is a session still open; this request counts as activity."""
        now = time.monotonic()
        with self._lock:
            times = self._sessions.get(session_id)
            if times is None:
                return False
            if self._ended(times, now):
                del self._sessions[session_id]
                return False
            self._sessions[session_id] = (times[0], now)
            return True

    def close(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def _ended(self, times: tuple[float, float], now: float) -> bool:
        signed_in, last = times
        return now - last > self.idle_s or now - signed_in > UI_SESSION_MAX_AGE_S


class Tokens:
    def __init__(self, api_token: str | None = None, ingest_token: str | None = None,
                 ui_session_idle_s: float = UI_SESSION_IDLE_S):
        if ingest_token and not api_token:
            raise ValueError("--ingest-token needs --token too (the token of the API and the workers); "
                             "without it the API would be open to anyone")
        if ingest_token and ingest_token == api_token:
            raise ValueError("--ingest-token and --token must differ: apps hold the ingest token")
        self._accepted = {API: [t for t in (api_token,) if t],
                          INGEST: [t for t in (ingest_token, api_token) if t]}
        self.ui_sessions = UiSessions(ui_session_idle_s)

    @property
    def required(self) -> bool:
        return bool(self._accepted[API])

    @property
    def shared(self) -> bool:
        """One token for apps and the API: an app's token can read every session."""
        return len(self._accepted[INGEST]) == 1 and self.required

    def allows(self, authorization: str | None, scope: str) -> bool:
        accepted = self._accepted[scope]
        if not accepted:
            return True
        given = (authorization or "").encode()
        ok = False
        for token in accepted:  # no early exit: the time taken says nothing about which token matched
            ok |= hmac.compare_digest(given, f"Bearer {token}".encode())
        return ok

    def is_token(self, given: str, scope: str = API) -> bool:
        """`given` is a token of `scope` (what the UI's login form checks)."""
        return self.allows(f"Bearer {given}", scope)

    def allows_request(self, authorization: str | None, cookie: str | None, method: str, scope: str) -> bool:
        """A request's bearer header, or for a read of the API scope the UI's cookie."""
        if authorization is not None or not self.required:
            return self.allows(authorization, scope)
        if cookie is None or method not in SAFE_METHODS:
            return self.allows(None, scope)
        return self.ui_sessions.check(cookie)
