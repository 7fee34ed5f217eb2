"""The UI's pages: each handler reads through the Store's query methods (or writes through
the collector's writer, as the API does) and renders one template.

Handlers are plain functions run in the thread pool, like the API's reads; `page()` wraps
each: sign-in, the CSRF check of a POST, errors as 4xx pages (a bug of ours as the same error
page, 500, logged in one line as the API logs its own), and a `Server-Timing` header with the
handler's own time (bench/ui.py reads it).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable
from urllib.parse import parse_qsl, urlencode

import duckdb
from jinja2 import Environment, FileSystemLoader
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tracefix.collector import document
from tracefix.collector.api.bodies import read_body
from tracefix.collector.auth import UI_COOKIE
from tracefix.collector.cycles import with_cycle_collection_paused
from tracefix.collector.jobs import JOB_KINDS, JOB_STATES, MAX_EDIT_CHARS
from tracefix.collector.marks import MAX_COMMENT_CHARS, MAX_LABEL_CHARS
from tracefix.collector.otlp import OtlpError
from tracefix.collector.store import UnknownSession
from tracefix.collector.store import datasets as store_datasets
from tracefix.collector.store.datasets import DEFAULT_DATASET
from tracefix.collector.url_input import InvalidParameter, QueryParams
from tracefix.collector.writer import QueueFull, WriterClosed
from tracefix.ui import dashboard as charts
from tracefix.ui import views, waterfall
from tracefix.ui.security import UI_CSP, UI_REFERRER_POLICY, Forbidden, Guard
from tracefix.ui.session_list import session_list
from tracefix.ui.regress_view import regress_context
from tracefix.ui.timeline import layout

if TYPE_CHECKING:
    from tracefix.collector.server import Collector

log = logging.getLogger("tracefix.ui")

HERE = Path(__file__).parent
STATIC_PREFIX = "/static"
UNKNOWN_PAGE = "/{path:path}"  # a browser's path that neither the UI nor the API has: an HTML 404
STEPS_PER_PAGE = 50
SPANS_PER_PAGE = 50  # a span keeps its attributes whole: a page must stay small
INPUTS_SHOWN = 12  # of a step's input messages, the last ones (a prompt repeats the earlier steps)
FORM_BYTES = 64 * 1024
LISTED = 200  # alerts and jobs shown on a page, newest first


async def read_form(request: Request) -> dict[str, str]:
    """The fields of a URL-encoded form (the only kind the UI's forms send), at most FORM_BYTES."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        raise Forbidden("the UI accepts its own forms only (application/x-www-form-urlencoded)")
    try:
        body = await read_body(request, FORM_BYTES)
    except OtlpError as exc:
        raise ValueError(exc.message) from None
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20, strict_parsing=False))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"the form cannot be read: {exc}") from None


class NotFound(Exception):
    """A page of something that is not there (answered 404)."""


def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, trim_blocks=True,
                      lstrip_blocks=True)
    env.filters.update(views.FILTERS)
    env.globals.update(views.GLOBALS)
    return env


def routes(collector: "Collector") -> list:
    store, writer = collector.store, collector.writer
    guard = Guard(collector.tokens, collector.config.tls)
    env = environment()

    def render(request: Request, template: str, status: int = 200, **context) -> HTMLResponse:
        html = env.get_template(template).render(
            csrf=guard.csrf_token(request), login_needed=collector.tokens.required, path=request.url.path, **context)
        return HTMLResponse(html, status_code=status)

    def page(handler: Callable, *, public: bool = False):
        async def wrapped(request: Request) -> Response:
            started = time.perf_counter()
            try:
                if not public and not guard.signed_in(request):
                    if request.method == "GET":
                        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                        return RedirectResponse("/login?" + urlencode({"next": target}), status_code=303)
                    raise Forbidden("sign in first (the API token)")
                form = None
                if request.method == "POST":
                    form = await read_form(request)
                    guard.check_post(request, form)
                try:
                    response = await run_in_threadpool(handler, request, form)
                except duckdb.OutOfMemoryException as exc:  # a long message this process wrote
                    if request.method != "GET":
                        raise
                    response = await collector.read_room.again(
                        f"GET {request.url.path}", str(exc), lambda: run_in_threadpool(handler, request, form))
            except Forbidden as exc:
                response = render(request, "error.html", 403, message=str(exc))
            except InvalidParameter as exc:
                response = render(request, "error.html", 422, message=str(exc))
            except UnknownSession as exc:
                response = render(request, "error.html", 404, message=f"unknown session {exc.args[0]!r}")
            except NotFound as exc:
                response = render(request, "error.html", 404, message=str(exc))
            except QueueFull as exc:
                response = render(request, "error.html", 429, message=f"the collector is busy ({exc}); retry")
            except WriterClosed as exc:
                response = render(request, "error.html", 503, message=str(exc))
            except ValueError as exc:
                response = render(request, "error.html", 400, message=str(exc))
            except Exception as exc:
                log.error("%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
                response = render(request, "error.html", 500, message=f"internal error ({type(exc).__name__})")
            response.headers["Content-Security-Policy"] = UI_CSP
            response.headers["Referrer-Policy"] = UI_REFERRER_POLICY
            response.headers.setdefault("Cache-Control", "no-store")
            response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
            return response
        return wrapped

    def write(fn):
        return writer.call(fn).result(60)

    def session_id(query: QueryParams) -> str:
        sid = query.text("id")
        if sid is None:
            raise InvalidParameter("id", "the session id is missing")
        return sid

    # --- sign in ---------------------------------------------------------------------------
    def local_target(target: str | None) -> str:
        """Where to go after signing in: a path of this site only (never `//host` or a URL)."""
        if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
            return "/"
        return target

    def login(request: Request, form) -> Response:
        target = local_target((form or request.query_params).get("next"))
        if not collector.tokens.required:
            return RedirectResponse(target, status_code=303)
        if form is None:
            return render(request, "login.html", next=target, failed=False)
        if not collector.tokens.is_token(str(form.get("token") or "")):
            return render(request, "login.html", 401, next=target, failed=True)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(**guard.sign_in())
        return response

    def logout(request: Request, form) -> Response:
        guard.sign_out(request)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(UI_COOKIE, path="/")
        return response

    # --- sessions --------------------------------------------------------------------------
    def sessions(request: Request, form) -> Response:
        return render(request, "sessions.html", **session_list(store, QueryParams(request.query_params)))

    # --- one session -----------------------------------------------------------------------
    @with_cycle_collection_paused  # a 10,000-step page makes ~10^5 objects, freed as it returns
    def session(request: Request, form) -> Response:
        q = QueryParams(request.query_params)
        sid = session_id(q)
        selected = q.integer("step", -1, low=-1, high=1 << 31)
        # every step without contents (the timeline and the step list), the selected one in full
        doc = store.session_outline(sid, full_step=selected if selected >= 0 else None)
        if doc is None:
            raise UnknownSession(sid)
        total = len(doc["steps"])
        first = max(0, selected) // STEPS_PER_PAGE * STEPS_PER_PAGE
        offset = q.integer("offset", first, high=1 << 31)
        shown = [dict(s) for s in doc["steps"][offset:offset + STEPS_PER_PAGE]]  # the outline's own are shared
        # what each shown step said: its output message, read for this page only; a message is
        # stored once by its content, so steps that said the same thing share one key
        saying: dict[int, list[dict]] = {}
        for s in shown:
            if s["output_message_key"]:
                saying.setdefault(document.key_from_ref(s["output_message_key"]), []).append(s)
        for key, text in store.iter_message_texts(list(saying)):
            for s in saying[key]:
                s["said"] = views.content_text(views.json_message(text))[:400]
        step, inputs = doc.get("full_step"), []
        if selected >= 0:
            if step is None:
                raise NotFound(f"session {sid!r} has no step {selected}")
            # the step's own input keys (this session's): the last ones, read in one pass
            keys = [document.key_from_ref(k) for k in (step.get("input_message_keys") or [])[-INPUTS_SHOWN:]]
            texts = dict(store.iter_message_texts(keys))
            inputs = [views.json_message(texts.get(k)) for k in keys]
        got_past = views.got_past_steps(store, sid)  # errors the run got past: drawn apart, not as failures
        panel = waterfall.span_panel(store, q, sid) if q.text("span") else None  # the waterfall's selected span
        voted = {"vote": q.choice("feedback", ("up", "down")), "alert": q.choice("alert", ("raised",)),
                 "diagnosis": q.choice("diagnosis", ("queued",)), "kept": q.text("kept")}
        return render(request, "session.html", doc=doc, sid=sid, total=total, shown=shown, offset=offset, voted=voted,
                      timeline=layout(doc["steps"], selected if step else None, got_past), got_past=got_past,
                      step=step, inputs=inputs, panel=panel,
                      earlier_inputs=max(0, len(step.get("input_message_keys") or []) - INPUTS_SHOWN) if step else 0,
                      previous=offset > 0 and views.session_url(sid, offset=max(0, offset - STEPS_PER_PAGE)),
                      following=offset + STEPS_PER_PAGE < total
                      and views.session_url(sid, offset=offset + STEPS_PER_PAGE))

    def spans(request: Request, form) -> Response:
        q = QueryParams(request.query_params)
        sid = session_id(q)
        offset = q.integer("offset", 0, high=1 << 31)
        rowids = store.session_span_rowids(sid)
        if rowids is None:
            raise UnknownSession(sid)
        page = list(store.iter_spans(rowids[offset:offset + SPANS_PER_PAGE]))
        return render(request, "spans.html", sid=sid, roots=views.span_tree(page), total=len(rowids),
                      offset=offset, shown=len(page),
                      previous=offset > 0 and views.session_url(sid, "session/spans",
                                                                offset=max(0, offset - SPANS_PER_PAGE)),
                      following=offset + SPANS_PER_PAGE < len(rowids)
                      and views.session_url(sid, "session/spans", offset=offset + SPANS_PER_PAGE))

    def waterfall_rows(request: Request, form) -> Response:
        q = QueryParams(request.query_params)
        return waterfall.waterfall_rows(store, q, session_id(q))

    def span_panel(request: Request, form) -> Response:
        q = QueryParams(request.query_params)
        sid = session_id(q)
        panel = waterfall.span_panel(store, q, sid)
        if panel is None:
            raise NotFound(f"session {sid!r} has no span {q.text('span')!r}")
        return render(request, "span_panel.html", sid=sid, panel=panel)

    def feedback(request: Request, form) -> Response:
        sid = str(form.get("id") or "")
        vote = form.get("vote")
        if vote not in ("up", "down"):
            raise InvalidParameter("vote", "must be up or down")
        comment = str(form.get("comment") or "").strip()[:2000] or None
        fb = write(lambda s: s.add_feedback(sid, 1.0 if vote == "up" else -1.0, comment, source="ui",
                                            **collector.feedback_options()))
        collector.feedback_recorded(fb)
        # the session page says what the vote did (saved; an alert raised; a diagnosis queued)
        return RedirectResponse(views.session_url(sid, feedback=vote, alert="raised" if fb.get("alert_id") else None,
                                                  diagnosis="queued" if fb.get("job_id") else None),
                                status_code=303)

    def keep(request: Request, form) -> Response:
        """Keep the session in a dataset, for `tracefix regress` (what `tracefix dataset add` does)."""
        sid, name = str(form.get("id") or ""), str(form.get("dataset") or "").strip() or DEFAULT_DATASET
        done = write(lambda s: store_datasets.add_to_dataset(s, name, [sid]))
        return RedirectResponse(views.session_url(sid, kept=done["dataset"]) + "#feedback", status_code=303)

    # --- diagnosis -------------------------------------------------------------------------
    def diagnosis(request: Request, form) -> Response:
        sid = session_id(QueryParams(request.query_params))
        head = store.session_outline(sid)
        if head is None:
            raise UnknownSession(sid)
        analysis, replay = store.get_analysis(sid), store.get_replay(sid)
        jobs = store.list_jobs(session_id=sid, limit=LISTED, newest_first=True)
        tested = views.tested_hypotheses(store, sid, analysis, replay)
        return render(request, "diagnosis.html", sid=sid, doc=head, analysis=analysis, replay=replay,
                      ranked=views.ranked_hypotheses(analysis, replay), tested=tested, jobs=jobs, jobs_total=store.count_jobs(session_id=sid), job_kinds=JOB_KINDS,
                      max_edit=MAX_EDIT_CHARS)

    def start_job(request: Request, form) -> Response:
        sid = str(form.get("id") or "")
        kind = form.get("kind")
        if kind not in JOB_KINDS:
            raise InvalidParameter("kind", f"must be one of {', '.join(JOB_KINDS)}")
        options = None
        step, edit = str(form.get("step") or "").strip(), str(form.get("edit") or "").strip()
        if kind == "replay" and (step or edit):
            if not step.isdigit() or len(step) > 9:
                raise InvalidParameter("step", "a replay of your own edit needs the step number it applies to")
            options = {"steps": [int(step)], **({"edit": edit} if edit else {})}
        write(lambda s: s.enqueue_job(sid, reason="ui", kind=kind, options=options))
        if kind == "diagnosis":
            collector.wake_diagnosis()
        return RedirectResponse(views.session_url(sid, "diagnosis"), status_code=303)

    # --- alerts and jobs -------------------------------------------------------------------
    def alerts(request: Request, form) -> Response:
        q = QueryParams(request.query_params)
        sid = q.text("session_id")
        offset = q.integer("offset", 0, high=1 << 31)
        rows = store.list_alerts(sid, offset=offset, limit=LISTED, newest_first=True)
        total = store.count_alerts(sid)
        links = views.pager(offset, LISTED, total, lambda at: "/alerts?" + urlencode(
            {k: v for k, v in {"session_id": sid, "offset": at}.items() if v}))
        return render(request, "alerts.html", alerts=rows, total=total, offset=offset, **links)

    def jobs(request: Request, form) -> Response:
        q = QueryParams(request.query_params)
        filters = {"state": q.choice("state", JOB_STATES), "session_id": q.text("session_id"),
                   "kind": q.choice("kind", JOB_KINDS)}
        offset = q.integer("offset", 0, high=1 << 31)
        rows = store.list_jobs(**filters, offset=offset, limit=LISTED, newest_first=True)
        total = store.count_jobs(**filters)
        links = views.pager(offset, LISTED, total, lambda at: "/jobs?" + urlencode(
            {k: v for k, v in {**filters, "offset": at}.items() if v}))
        return render(request, "jobs.html", jobs=rows, total=total, offset=offset, **filters, job_kinds=JOB_KINDS,
                      job_states=JOB_STATES, **links)

    def regress(request: Request, form) -> Response:
        return render(request, "regress.html", **regress_context(store, QueryParams(request.query_params).text("run")))

    def dashboard(request: Request, form) -> Response:
        return render(request, "dashboard.html", **charts.dashboard(store, QueryParams(request.query_params)))

    def annotate(request: Request, form) -> Response:
        sid, step = str(form.get("id") or ""), str(form.get("step") or "")
        if not step.isdigit() or len(step) > 9:
            raise InvalidParameter("step", "must be a step number")
        label, score = (str(form.get(k) or "").strip() for k in ("label", "score"))
        if score not in ("", "-1", "1"):
            raise InvalidParameter("score", "must be -1 (wrong), 1 (right) or empty")
        mark = write(lambda s: s.add_annotation(sid, int(step), label=label[:MAX_LABEL_CHARS] or None,
                                                score=float(score) if score else None, source="ui",
                                                comment=str(form.get("comment") or "").strip()[:MAX_COMMENT_CHARS] or None,
                                                **collector.feedback_options()))
        collector.feedback_recorded(mark)
        return RedirectResponse(views.session_url(sid, step=int(step)) + "#step-marks", status_code=303)

    def unknown(request: Request, form) -> Response:
        raise NotFound(f"there is no page {request.url.path!r} here")

    return [
        Route("/", page(sessions)),
        Route("/login", page(login, public=True), methods=["GET", "POST"]),
        Route("/logout", page(logout, public=True), methods=["POST"]),
        Route("/session", page(session)),
        Route("/session/spans", page(spans)),
        Route("/session/waterfall", page(waterfall_rows)),
        Route("/session/span", page(span_panel)),
        Route("/session/feedback", page(feedback), methods=["POST"]),
        Route("/session/dataset", page(keep), methods=["POST"]),
        Route("/session/annotate", page(annotate), methods=["POST"]),
        Route("/diagnosis", page(diagnosis)),
        Route("/diagnosis/start", page(start_job), methods=["POST"]),
        Route("/alerts", page(alerts)),
        Route("/jobs", page(jobs)),
        Route("/dashboard", page(dashboard)),
        Route("/regress", page(regress)),
        Mount(STATIC_PREFIX, StaticFiles(directory=HERE / "static"), name="static"),
        Route(UNKNOWN_PAGE, page(unknown, public=True)),  # last: what no route above answers
    ]
