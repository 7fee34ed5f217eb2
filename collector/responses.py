"""What every HTTP answer of the collector carries: JSON that never fails on a stored
value, and security headers.

`JSONResponse` is Starlette's, written by `jsonsafe.encode`: a NaN or infinite number in
the store comes out as null, a lone surrogate in a stored string as U+FFFD, instead of
turning the route into an error for good. Answers written otherwise (streamed pages,
reports) encode their text with `jsonsafe.utf8`.

`SecurityHeaders` adds to every response `X-Content-Type-Options: nosniff`,
`Referrer-Policy: no-referrer` and, unless the route set its own, a Content-Security-Policy
that loads nothing and may not be framed. The HTML report sets `REPORT_CSP`.
"""
from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse as _StarletteJSONResponse

from tracefix.collector import jsonsafe

# The API answers data, never a page: nothing to load, nothing to frame.
API_CSP = "default-src 'none'; frame-ancestors 'none'"
# The report is one self-contained page: inline <style> and style attributes, PNG plots as
# data: URIs, inline SVG (markup, needs no source). No script: the report has none, so an
# injected one cannot run either. Nothing is fetched, framed, submitted or re-based.
REPORT_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
              "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")

# what SecurityHeaders adds to an API answer; as a dict for an answer written outside it
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                    "Content-Security-Policy": API_CSP}
_ALWAYS = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]


class JSONResponse(_StarletteJSONResponse):
    def render(self, content: Any) -> bytes:
        return jsonsafe.encode(content, separators=(",", ":"))


class SecurityHeaders:
    """ASGI middleware adding the security headers to every HTTP response."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                headers += [(n, v) for n, v in _ALWAYS if n not in names]
                if b"content-security-policy" not in names:
                    headers.append((b"content-security-policy", API_CSP.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
