"""The report of a stored session: its inputs read from the store (the session, its analysis
and replay results, its replays' child sessions) and rendered. What the collector's report
route serves (``render_stored_report``, injected by ``tracefix.cli``) and ``tracefix report``
writes: a stored result the renderer cannot read is left out with a note at the top, and a
refused replay job says why.
"""
from __future__ import annotations

import html
import logging
from typing import Callable

from tracefix.errors import UnknownSession
from tracefix.report.content.comparison import child_session_ids
from tracefix.report.render import render_html, render_markdown

log = logging.getLogger("tracefix.report")


def load_report_inputs(store, session_id: str) -> tuple[dict, dict | None, dict | None, dict[str, dict]]:
    """(session document, analysis, replay, child documents by id) from anything with the
    store access methods (docs/contracts.md §2: the access layer or the Store itself).
    Raises UnknownSession (a KeyError); a missing child is left out (the report says so)."""
    doc = store.get_session(session_id)
    if doc is None:
        raise UnknownSession(session_id)
    analysis = store.get_analysis(session_id)
    replay = store.get_replay(session_id)
    children = {}
    for child_id in dict.fromkeys(child_session_ids(replay)):
        child = store.get_session(child_id)
        if child is not None:
            children[child_id] = child
    return doc, analysis, replay, children


def render_stored_report(store, session_id: str, fmt: str = "html") -> str:
    """The report of a stored session, its replays' child sessions beside it (what the
    collector's report route serves). Raises UnknownSession for an unknown session."""
    return render_stored(store, session_id, fmt, render_markdown if fmt == "md" else render_html)


def replay_refusal(store, session_id: str) -> str | None:
    """Why the session's latest replay job was refused (a session the app did not sign, an
    entrypoint it did not mark, ...), when it was: the report has no replay result to show."""
    jobs = store.list_jobs(session_id=session_id, kind="replay")
    last = jobs[-1] if jobs else None
    if last is None or last.get("state") != "refused":
        return None
    return f"Not replayed: the replay job was refused: {last.get('error') or 'no reason recorded'}"


def _with_notice(text: str, fmt: str, notice: str) -> str:
    if fmt == "md":
        return f"> **Note.** {notice}\n\n{text}"
    return text.replace("<main>", f'<main><p class="sub"><strong>Note.</strong> {html.escape(notice)}</p>', 1)


def render_stored(store, session_id: str, fmt: str, render: Callable[..., str]) -> str:
    """`render(doc, analysis, replay, children)` of a stored session (`fmt`: the format it
    writes, html or md). Analysis and replay results are stored as their clients posted
    them; one the renderer cannot read must not make the session's report unreachable, so
    the report is then drawn without them and says so at its top. Without a replay result,
    a refused replay job says why at the top. Raises UnknownSession."""
    try:
        inputs = load_report_inputs(store, session_id)
        text = render(*inputs)
    except Exception as exc:
        doc = store.get_session(session_id)
        if doc is None:
            raise UnknownSession(session_id) from None
        if store.get_analysis(session_id) is None and store.get_replay(session_id) is None:
            raise  # the session alone fails: the renderer's bug, not the stored results
        log.warning("report of session %s: its stored analysis/replay cannot be rendered: %s", session_id, exc)
        notice = (f"The stored analysis or replay result of this session could not be rendered "
                  f"({type(exc).__name__}: {exc}); this report shows the session without them.")
        return _with_notice(render(doc, None, None, {}), fmt, notice)
    refusal = replay_refusal(store, session_id) if inputs[2] is None else None
    return _with_notice(text, fmt, refusal) if refusal else text
