"""The sessions page (`/`): the table's filters, sort and page read from the query string,
and the links that keep them (a header's sort, the pager)."""
from __future__ import annotations

from urllib.parse import urlencode

from tracefix.collector.url_input import QueryParams
from tracefix.collector.charts import RANGES
from tracefix.ui import views
from tracefix.ui.dashboard import read_range

SESSIONS_PER_PAGE = 50
# (sort key or None, label) of each column, in order (a key: its header sorts by it)
COLUMNS = [("time", "time"), (None, "session"), ("service", "service"), ("task", "task"), ("agents", "agents"),
           ("model", "model"), ("steps", "steps"), ("tokens", "tokens"), ("cost", "cost"), ("latency", "latency"),
           ("outcome", "outcome"), ("feedback", "feedback"), ("diagnosis", "diagnosis")]


def session_list(store, q: QueryParams) -> dict:
    """The sessions template's context: one page of `Store.session_table` as the query asks."""
    filters = {
        "search": (q.text("q") or "").strip()[:200] or None,
        "outcome": q.choice("outcome", ("success", "failure", "none")),
        "service": q.text("service"),
        "feedback": q.choice("feedback", ("negative", "positive", "none")),
        "diagnosis": q.choice("diagnosis", store.TABLE_DIAGNOSIS),
        "task": (q.text("task") or "").strip()[:200] or None,
        "agent": q.text("agent"),
        "model": q.text("model"),
        "min_cost": q.amount("min_cost"),
        "max_cost": q.amount("max_cost"),
        # the sessions replays ran hide by default: a diagnosis makes several per session
        "replays": q.choice("replays", ("shown",)),
    }
    picked = read_range(q)  # the time range, shared with the dashboard
    since_until = dict(zip(("since", "until"), picked.bounds(store) or (None, None)))
    sort = q.choice("sort", tuple(store.TABLE_SORTS), default="time")
    descending = q.choice("dir", ("asc", "desc"), default="desc") == "desc"
    offset = q.integer("offset", 0, high=1 << 31)
    table = store.session_table(sort=sort, descending=descending, limit=SESSIONS_PER_PAGE, offset=offset,
                                replay_children=filters["replays"] == "shown", **since_until,
                                **{k: v for k, v in filters.items() if k != "replays"})
    shown = {"q": filters["search"], **{k: v for k, v in filters.items() if k != "search"}}
    state = {k: v for k, v in {**shown, **picked.params, "sort": sort, "dir": "desc" if descending else "asc"}.items()
             if v is not None and v != ""}

    def link(**change) -> str:
        return "/?" + urlencode({k: v for k, v in {**state, **change}.items() if v is not None})

    headers = [{"label": label, "key": key, "active": key == sort,
                "url": key and link(sort=key, dir="asc" if key == sort and descending else "desc", offset=None),
                "arrow": ("▼" if descending else "▲") if key == sort else ""} for key, label in COLUMNS]
    return {"rows": table["rows"], "total": table["total"], "offset": offset, "per_page": SESSIONS_PER_PAGE,
            "filters": shown, "headers": headers, "diagnosis_states": store.TABLE_DIAGNOSIS,
            "picked": picked, "ranges": tuple(RANGES),
            "range_keep": {k: v for k, v in state.items() if k not in ("range", "since", "until")},
            "range_other": {"url": "/dashboard?" + urlencode(picked.params), "label": "dashboard of this range"},
            **views.pager(offset, SESSIONS_PER_PAGE, table["total"], lambda at: link(offset=at))}
