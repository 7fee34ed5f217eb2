"""The session page's waterfall: its rows as compact JSON, a page at a time (the script in
/static/waterfall.js draws only the rows in view), and the panel of one span beside it (its
input, output and attributes).

    GET /session/waterfall?id=ID&offset=0&limit=5000   {"columns", "start_ns", "end_ns", "rows", "page"}
    GET /session/span?id=ID&span=SPAN_ID               the panel, an HTML fragment
"""
from __future__ import annotations

from tracefix.collector import document
from tracefix.collector.responses import JSONResponse
from tracefix.collector.store import UnknownSession
from tracefix.collector.store.waterfall import WATERFALL_COLUMNS
from tracefix.collector.url_input import InvalidParameter, QueryParams
from tracefix.ui import views

ROWS_PER_PAGE = 5000  # ~100 ms of server time at 30,000 spans (bench/ui.py --waterfall)
MAX_ROWS_PER_PAGE = 20_000
INPUTS_SHOWN = 12  # of an LLM call's input messages, the last ones (as the step detail shows)


def waterfall_rows(store, query: QueryParams, session_id: str) -> JSONResponse:
    """One page of the waterfall's rows (Store.session_waterfall) with the names of their columns."""
    offset = query.integer("offset", 0, high=1 << 31)
    limit = query.integer("limit", ROWS_PER_PAGE, low=1, high=MAX_ROWS_PER_PAGE)
    found = store.session_waterfall(session_id, offset, limit)
    if found is None:
        raise UnknownSession(session_id)
    return JSONResponse({"columns": list(WATERFALL_COLUMNS), **found})


def span_panel(store, query: QueryParams, session_id: str) -> dict | None:
    """What the panel beside the waterfall shows of one span (the `span` parameter): the span,
    its input (an LLM call's last input messages, a tool's arguments) and output (the answer,
    the tool's result or error); None where the session has no such span."""
    span_id = query.text("span")
    if not span_id:
        raise InvalidParameter("span", "the span id is missing")
    span = store.session_span(session_id, span_id)
    if span is None:
        if not store.session_exists(session_id):
            raise UnknownSession(session_id)
        return None
    panel = span["panel"]
    input_keys = list(panel["input_keys"] or [])
    shown_keys = input_keys[-INPUTS_SHOWN:]
    wanted = [*shown_keys, *([panel["output_key"]] if panel["output_key"] is not None else [])]
    texts = dict(store.iter_message_texts(wanted))
    inputs = [views.json_message(texts.get(k)) for k in shown_keys]
    output = views.json_message(texts.get(panel["output_key"])) if panel["output_key"] is not None else None
    return {"span": span, "panel": panel, "inputs": inputs, "earlier_inputs": len(input_keys) - len(shown_keys),
            "output": output, "duration_ms": document.duration_ms(span["start_ns"], span["end_ns"])}
