"""tracefix.ui: the web UI of `tracefix serve`, at `/` on the API's port.

    tracefix serve --token SECRET        # then open http://127.0.0.1:4318/ and give SECRET once

Pages (server-rendered with Jinja2; a little plain JavaScript from /static, no build step,
nothing fetched from elsewhere, so it works offline):

  /                      sessions: paged, sortable, filtered table with text search
  /session?id=ID         one session: a waterfall of its spans (&span=ID: one beside it), a
                         timeline with one lane per agent, its steps, one step in full
                         (&step=N), feedback (thumbs up / down with a comment)
  /session/waterfall     the session page's waterfall rows, JSON, a page at a time
  /session/span          the panel of one span beside the waterfall (an HTML fragment)
  /session/spans?id=ID   the raw span tree
  /diagnosis?id=ID       hypotheses with evidence, replays beside the original, verdicts, the
                         report; start a diagnosis or a replay, job state live
  /alerts, /jobs         the alert outbox and the job queue
  /regress[?run=ID]      the runs of `tracefix regress`; one run's items, each with its runs
                         beside the session it ran again
  /login, /logout        the API token, asked once: a sign-in the collector keeps, its random
                         id in an HttpOnly SameSite=Strict cookie; logout ends it

Safe by construction: autoescaped templates, a strict Content-Security-Policy (scripts and
styles from /static only, no inline script or style), POSTs only from the UI's own forms
(SameSite cookie, a CSRF token and an Origin check). Reads go through the Store's query
methods; writes through the collector's single writer, as the API's do.

The UI is an app of its own beside the API's (`with_ui`): the API's route table, its
OpenAPI document and its JSON error shape stay the API's; only the UI's own paths reach it,
and a browser's GET of a path nobody has (outside /api/ and /v1/) is the UI's HTML 404 page.

Modules: `security` (cookie, CSRF, CSP, the guard of every page), `pages` (the handlers),
`session_list` (the sessions page's filters, sort and links), `waterfall` (the waterfall's
rows and span panel), `timeline` (the agent-lane SVG's geometry), `views` (formatting for
the templates).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracefix.collector.server import Collector

API_PREFIXES = ("/api/", "/v1/")  # the JSON API's and OTLP's paths: their 404 stays the API's


def with_ui(api_app: Any, collector: "Collector") -> Any:
    """An ASGI app that answers the UI's paths with the UI and everything else with `api_app`."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    from tracefix.collector.responses import SecurityHeaders
    from starlette.routing import Match

    from tracefix.ui.pages import STATIC_PREFIX, UNKNOWN_PAGE, routes

    ui_routes = routes(collector)
    paths = {r.path for r in ui_routes if not r.path.startswith(STATIC_PREFIX) and r.path != UNKNOWN_PAGE}
    ui_app = Starlette(routes=ui_routes, middleware=[Middleware(SecurityHeaders)])

    def browsers_unknown_page(scope: dict, path: str) -> bool:
        """A browser's GET of a path that is no API's (a client of the API keeps its JSON 404)."""
        if scope["method"] not in ("GET", "HEAD") or path.startswith(API_PREFIXES):
            return False
        accept = dict(scope.get("headers") or []).get(b"accept", b"")
        if b"text/html" not in accept:
            return False
        return all(route.matches(scope)[0] == Match.NONE for route in getattr(api_app, "routes", []))

    async def app(scope: dict, receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else None
        if path is not None and (path in paths or path.startswith(STATIC_PREFIX + "/")
                                 or browsers_unknown_page(scope, path)):
            await ui_app(scope, receive, send)
        else:
            await api_app(scope, receive, send)

    return app
