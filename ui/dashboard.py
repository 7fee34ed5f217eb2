"""The dashboard page: the time range a person picked (shared with the sessions page, which
lists the sessions of the same range), each chart's series from the store (one query per
chart, collector.store.dashboard) and their drawing as SVG, computed here so the page needs
no script: a line per group, a dot per interval that holds sessions or calls."""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from tracefix.collector import document
from tracefix.collector.charts import CHARTS, GROUPINGS, RANGES
from tracefix.collector.url_input import InvalidParameter, QueryParams

BUCKETS = 24
WIDTH, HEIGHT = 440, 170  # one chart's drawing, in SVG units
LEFT, RIGHT, TOP, BOTTOM = 52, 8, 10, 22  # the margins around the plot: the axes' labels


@dataclass
class TimeRange:
    """The range of the range picker: a preset back from now, or a custom since / until."""
    preset: str
    since: str | None = None  # as typed (ISO-8601 or epoch seconds)
    until: str | None = None

    @property
    def since_ns(self) -> int | None:
        return document.to_ns(self.since) if self.since else None

    @property
    def until_ns(self) -> int | None:
        return document.to_ns(self.until) if self.until else None

    @property
    def params(self) -> dict[str, str]:
        """The query parameters that carry this range from one page to the other."""
        return {k: v for k, v in (("range", self.preset if self.preset != "all" else None),
                                  ("since", self.since), ("until", self.until)) if v}

    def bounds(self, store) -> tuple[int, int] | None:
        """The range in ns for a filter, None for every stored session ("all", no since / until)."""
        if self.preset == "all" and not self.since and not self.until:
            return None
        return store.time_range(self.preset, self.since_ns, self.until_ns)


def read_range(q: QueryParams) -> TimeRange:
    """The picker's fields from a page's query: `range` (RANGES), `since`, `until`."""
    picked = TimeRange(q.choice("range", tuple(RANGES), default="all"), q.text("since") or None,
                       q.text("until") or None)
    for name in ("since", "until"):
        try:
            getattr(picked, f"{name}_ns")
        except ValueError as exc:
            raise InvalidParameter(name, str(exc)) from None
    return picked


@dataclass
class Drawn:
    """One chart as the template draws it."""
    name: str
    title: str
    unit: str
    series: list[dict] = field(default_factory=list)  # {"group", "css", "lines": [points str], "dots": [...]}
    y_max: float = 0.0
    first: str | None = None
    last: str | None = None


def value_text(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "share":
        return f"{value * 100:.0f}%"
    if unit == "usd":
        return f"${value:.4f}" if value < 1 else f"${value:,.2f}"
    if unit == "ms":
        return f"{value:,.0f} ms"
    return f"{value:,.0f}"


def draw(chart: dict) -> Drawn:
    """The chart's series placed on its plot: x by interval, y from 0 to the largest value."""
    unit, buckets = chart["unit"], chart["buckets"]
    values = [p["value"] for s in chart["series"] for p in s["points"] if p["value"] is not None]
    y_max = 1.0 if unit == "share" else max(values, default=0.0) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    drawn = Drawn(chart["chart"], chart["title"], unit, y_max=y_max, first=chart["since"], last=chart["until"])
    for index, s in enumerate(chart["series"]):
        lines: list[list[str]] = []
        dots = []
        previous = None
        for p in s["points"]:
            if p["value"] is None:  # nothing to measure there (a cost of unknown prices): a gap
                previous = None
                continue
            x = LEFT + (p["bucket"] + 0.5) * plot_w / buckets
            y = TOP + plot_h * (1 - p["value"] / y_max)
            if previous is None or p["bucket"] != previous + 1:
                lines.append([])
            lines[-1].append(f"{x:.1f},{y:.1f}")
            previous = p["bucket"]
            dots.append({"x": round(x, 1), "y": round(y, 1), "bucket": p["bucket"],
                         "title": f"{s['group']} · {document.iso(document.to_ns(p['t']))[:16].replace('T', ' ')}: "
                                  f"{value_text(p['value'], unit)}"})
        drawn.series.append({"group": s["group"], "css": f"s{index % 8}", "total": s["total"],
                             "lines": [" ".join(points) for points in lines if len(points) > 1], "dots": dots})
    return drawn


def dashboard(store, q: QueryParams) -> dict:
    """The dashboard page's context: the range, the grouping and every chart drawn."""
    picked = read_range(q)
    by = q.choice("by", GROUPINGS, default="service")
    lo, hi = store.time_range(picked.preset, picked.since_ns, picked.until_ns)
    series = store.charts(list(CHARTS), by=by, since_ns=lo, until_ns=hi, buckets=BUCKETS)
    charts = [draw(series[name]) for name in CHARTS]
    return {"charts": charts, "picked": picked, "by": by, "groupings": GROUPINGS, "ranges": tuple(RANGES),
            "since": document.iso(lo), "until": document.iso(hi), "size": (WIDTH, HEIGHT), "buckets": BUCKETS,
            "plot": {"left": LEFT, "right": WIDTH - RIGHT, "top": TOP, "bottom": HEIGHT - BOTTOM},
            "sessions_link": "/?" + urlencode(picked.params), "value_text": value_text}
