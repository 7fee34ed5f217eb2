"""Who may do what on `tracefix serve`: two bearer tokens, two scopes.

- **ingest** (`--ingest-token`, TRACEFIX_INGEST_TOKEN): what every instrumented app holds.
  It may write spans (OTLP/HTTP `/v1/traces`, OTLP/gRPC) and feedback
  (`POST /api/v1/feedback`), nothing else: it cannot read sessions or drive workers.
- **api** (`--token`, TRACEFIX_TOKEN): people, `tracefix` commands and `tracefix worker`.
  It may do everything, ingest included (replay children export their spans with it).

With no token at all everything is open (the default binds to 127.0.0.1 only). An ingest
token without an API token would leave the API open while pretending to protect it, so it
is refused. Every configured token is compared in constant time on every request.

The web UI (tracefix.ui) asks for the API token once and keeps, in an HttpOnly,
SameSite=Strict cookie (`UI_COOKIE`), a value derived from it (`Tokens.ui_cookie`), never the
token itself. The cookie opens what the API token opens, but only for reads (GET, HEAD):
a write carried by a cookie needs the UI's CSRF token, which only the UI's own forms check.
"""
from __future__ import annotations

import hashlib
import hmac

INGEST = "ingest"
API = "api"
UI_COOKIE = "tracefix_ui"
SAFE_METHODS = ("GET", "HEAD")


class Tokens:
    def __init__(self, api_token: str | None = None, ingest_token: str | None = None):
        if ingest_token and not api_token:
            raise ValueError("--ingest-token needs --token too (the token of the API and the workers); "
                             "without it the API would be open to anyone")
        if ingest_token and ingest_token == api_token:
            raise ValueError("--ingest-token and --token must differ: apps hold the ingest token")
        self._accepted = {API: [t for t in (api_token,) if t],
                          INGEST: [t for t in (ingest_token, api_token) if t]}
        self._ui_cookie = (hmac.new(api_token.encode(), b"tracefix web UI session", hashlib.sha256).hexdigest()
                           if api_token else None)

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

    @property
    def ui_cookie(self) -> str | None:
        """The UI cookie's value for a browser that gave the API token (None: no token needed)."""
        return self._ui_cookie

    def is_token(self, given: str, scope: str = API) -> bool:
        """`given` is a token of `scope` (what the UI's login form checks)."""
        return self.allows(f"Bearer {given}", scope)

    def allows_request(self, authorization: str | None, cookie: str | None, method: str, scope: str) -> bool:
        """A request's bearer header, or for a read of the API scope the UI's cookie."""
        if authorization is not None or not self.required:
            return self.allows(authorization, scope)
        if cookie is None or method not in SAFE_METHODS or self._ui_cookie is None:
            return self.allows(None, scope)
        return hmac.compare_digest(cookie.encode(), self._ui_cookie.encode())
