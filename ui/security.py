"""Who may see a page of the UI, and how its forms are protected.

- **Login.** With an API token configured, a page asks for it once (`/login`); the answer
  is a cookie holding the random id of a new session kept by the collector (`UiSessions`:
  ended by `/logout`, by idling, by a restart; HttpOnly, SameSite=Strict, Secure under TLS).
  A bearer header works too, as on the API.
- **Writes.** Every POST of the UI must carry the CSRF token of its form (an HMAC of the
  cookie under a secret of this process) and, when the browser sends them, an `Origin` of
  this very host and `Sec-Fetch-Site: same-origin` (the UI's pages set `Referrer-Policy:
  same-origin`, else browsers send `Origin: null`). A SameSite=Strict cookie is not sent
  by other sites anyway: this is the second lock.
- **Content-Security-Policy.** Scripts, styles and images from this origin only, no inline
  script, no style attribute, nothing framed, forms posted here only.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

from starlette.requests import Request

from tracefix.collector.auth import API, UI_COOKIE, UI_SESSION_MAX_AGE_S

UI_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
          "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
# The API's `no-referrer` would make browsers send `Origin: null` with the UI's own forms;
# `same-origin` sends this origin to this origin only (and no Referer to any other site).
UI_REFERRER_POLICY = "same-origin"


class Forbidden(Exception):
    """A write the UI refuses (answered 403)."""


class Guard:
    def __init__(self, tokens, tls: bool):
        self.tokens = tokens
        self.tls = tls
        self._secret = secrets.token_bytes(32)  # CSRF tokens of this process

    def signed_in(self, request: Request) -> bool:
        return self.tokens.allows_request(request.headers.get("authorization"), request.cookies.get(UI_COOKIE),
                                          "GET", API)

    def csrf_token(self, request: Request) -> str:
        basis = (request.cookies.get(UI_COOKIE) or "").encode()
        return hmac.new(self._secret, b"csrf:" + basis, hashlib.sha256).hexdigest()

    def check_post(self, request: Request, form) -> None:
        """Raise Forbidden unless this POST comes from one of the UI's own forms."""
        origin = request.headers.get("origin")
        site = request.headers.get("sec-fetch-site")
        if (origin is not None and urlsplit(origin).netloc != request.headers.get("host")) \
                or site not in (None, "same-origin"):
            raise Forbidden("this form may only be sent from the UI's own pages")
        given = form.get("csrf")
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), self.csrf_token(request).encode()):
            raise Forbidden("the form's CSRF token is missing or stale: reload the page and try again")

    def sign_in(self) -> dict:
        """Arguments of `Response.set_cookie` for a browser that gave the right token: a new session."""
        return {"key": UI_COOKIE, "value": self.tokens.ui_sessions.open(), "max_age": UI_SESSION_MAX_AGE_S,
                "path": "/", "httponly": True, "samesite": "strict", "secure": self.tls}

    def sign_out(self, request: Request) -> None:
        """End the session of this browser's cookie: the same cookie opens nothing any more."""
        cookie = request.cookies.get(UI_COOKIE)
        if cookie is not None:
            self.tokens.ui_sessions.close(cookie)
