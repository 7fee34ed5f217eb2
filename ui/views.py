"""How values look on the UI's pages: Jinja2 filters and small helpers (all return plain
text; the templates escape it)."""
from __future__ import annotations

import json
from typing import Any, Callable
from urllib.parse import quote, urlencode

from tracefix.attributes import from_json_text
from tracefix.collector import jsonsafe
from tracefix.collector.document import usd_text
from tracefix.report.content.diagnosis import RANKING_RULE, evidence_items, ranked_causes, tested_in_order
from tracefix.report.content.values import words_within

PREVIEW_CHARS = 4000


def when(iso: str | None) -> str:
    """`2026-11-23T15:04:05.123456Z` -> `2026-11-23 15:04:05`."""
    if not iso:
        return "—"
    return iso.replace("T", " ")[:19]


def duration(ms: Any) -> str:
    if not isinstance(ms, (int, float)) or ms != ms:
        return "—"
    if ms < 1:
        return f"{ms:.2f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 60_000:.1f} min"


def count(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "—"
    n = int(n)
    return f"{n / 1_000_000:.1f}M" if n >= 1_000_000 else f"{n / 1000:.1f}k" if n >= 10_000 else str(n)


def number(x: Any, digits: int = 2) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or x != x:
        return "—" if x is None else str(x)
    return f"{x:.{digits}f}"


def thumbs(score: Any) -> str:
    """A feedback score in words a browser without an emoji font still shows."""
    if not isinstance(score, (int, float)) or isinstance(score, bool):
        return ""
    return "▼ down" if score < 0 else "▲ up" if score > 0 else "· neutral"


def compact(value: Any, limit: int = 300) -> str:
    """A JSON value on one line (evidence, options), cut at `limit` characters."""
    text = value if isinstance(value, str) else jsonsafe.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else f"{text[:limit]}…"


def pretty(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """A JSON value (or text) to show in a <pre>, cut at `limit` characters."""
    if isinstance(value, str):
        text = value
        if text[:1] in "{[":  # JSON text (tool arguments, stored attributes) reads better indented
            parsed = from_json_text(text)  # text that is no JSON, or nested too deeply, stays text
            if parsed is not text:
                text = json.dumps(parsed, indent=2, ensure_ascii=False)
    else:
        text = jsonsafe.dumps(value, indent=2, ensure_ascii=False, default=str)
    return text if len(text) <= limit else f"{text[:limit]}…[{len(text) - limit} more chars]"


def attribute_rows(attributes: Any, limit: int = PREVIEW_CHARS) -> list[dict]:
    """A span's attributes as the rows of a key-value table, by key: `{"key", "text", "block"}`
    where a JSON value (an object or a list, or a string holding one: tool arguments, message
    lists) is pretty-printed on several lines (`block`), and any other value is shown as
    itself (a string without its quotes), never as an escaped JSON string."""
    if not isinstance(attributes, dict):
        return [] if attributes in (None, "") else [{"key": "(attributes)", "text": pretty(attributes, limit),
                                                     "block": True}]
    rows = []
    for key in sorted(attributes, key=str):
        value = attributes[key]
        if isinstance(value, str):
            text = pretty(value, limit)  # JSON text comes out indented
            block = "\n" in text
        elif isinstance(value, (dict, list)):
            text, block = pretty(value, limit), True
        else:
            text, block = compact(value, limit), False
        rows.append({"key": str(key), "text": text, "block": block})
    return rows


def content_text(message: Any) -> str:
    """A chat message's content as text (parts joined)."""
    if not isinstance(message, dict):
        return "" if message is None else str(message)
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else pretty(content)


def brief(text: Any, limit: int = 140) -> str:
    """One line of at most `limit` characters, a long one cut between words with an ellipsis."""
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else words_within(text, limit - 1) + "…"


def session_url(session_id: str, page: str = "session", **params) -> str:
    query = urlencode({"id": session_id, **{k: v for k, v in params.items() if v is not None}})
    return f"/{page}?{query}"


def pager(offset: int, per_page: int, total: int, link: Callable[[int], str]) -> dict[str, str | None]:
    """The links of a page of a list read `per_page` rows at a time: `link(offset)` is the URL
    of the page starting there; None where there is no such page."""
    return {"previous": link(max(0, offset - per_page)) if offset > 0 else None,
            "following": link(offset + per_page) if offset + per_page < total else None}


def api_url(session_id: str, suffix: str = "") -> str:
    return f"/api/v1/sessions/{quote(session_id, safe='')}{suffix}"


FILTERS = {"when": when, "duration": duration, "count": count, "number": number, "thumbs": thumbs, "compact": compact,
           "pretty": pretty, "content_text": content_text, "attribute_rows": attribute_rows, "brief": brief, "usd": usd_text}
GLOBALS = {"session_url": session_url, "api_url": api_url, "ranking_rule": RANKING_RULE}


def json_message(text: str | None) -> dict:
    """A stored message (canonical JSON text) for display; one that does not parse is shown as text."""
    if text is None:
        return {"role": "?", "content": "(message not stored)"}
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return {"role": "?", "content": text}
    return message if isinstance(message, dict) else {"role": "?", "content": pretty(message)}


def span_tree(spans: list[dict]) -> list[dict]:
    """Spans of one page nested by parent: [{"span": span, "children": [...]}] in start order;
    a span whose parent is not on the page is a root."""
    nodes = {s["span_id"]: {"span": s, "children": []} for s in spans}
    roots = []
    for s in spans:
        parent = nodes.get(s.get("parent_span_id") or "")
        (parent["children"] if parent is not None and parent["span"] is not s else roots).append(nodes[s["span_id"]])
    return roots


def got_past_steps(store, session_id: str) -> dict[int, int]:
    """The session's error steps that its analysis read as got past, each with the step that
    made the same calls again (none before an analysis, or without the report part)."""
    try:
        from tracefix.report.content.diagnosis import got_past_by_step
    except ImportError:
        return {}
    return got_past_by_step(store.get_analysis(session_id))


def ranked_hypotheses(analysis: dict | None, replay: dict | None) -> list[dict]:
    """The hypotheses as the report ranks them (tracefix.report.content.diagnosis.ranked_causes:
    the same first step as the report's headline), each with its evidence in words, the raw
    packet and the verdicts of the replays that tested it."""
    rows = []
    for position, cause in enumerate(ranked_causes(analysis, replay), start=1):
        h = cause.analysed
        evidence = h.get("evidence") if isinstance(h.get("evidence"), dict) else {}
        rows.append({"position": position, "step": cause.step, "agent": cause.agent, "score": h.get("score"),
                     "source": h.get("source") or "replay", "why": cause.why, "evidence": evidence_items(evidence),
                     "raw": evidence,
                     "verdicts": [v if isinstance(v := t.get("verdict"), str) else None for t in cause.tested]})
    return rows


def tested_hypotheses(store, session_id: str, analysis: dict | None, replay: dict | None) -> list[dict]:
    """Each replayed hypothesis, in the report's order, with its runs beside the original from
    step t (the report's comparison, tracefix.report.content.comparison, where the report part
    is installed)."""
    hypotheses = tested_in_order(analysis, replay)
    if not hypotheses:
        return []
    try:
        from tracefix.report.content.comparison import child_session_ids, compare_runs
    except ImportError:
        return [{"h": h, "gone": set(), "comparisons": []} for h in hypotheses]
    doc = store.get_session(session_id) or {}
    children = {}
    for child_id in dict.fromkeys(child_session_ids(replay)):
        child = store.get_session(child_id) if isinstance(child_id, str) else None
        if child is not None:
            children[child_id] = child
    out = []
    for h in hypotheses:
        try:
            comparisons = compare_runs(doc, h, children)
        except (TypeError, ValueError, KeyError, AttributeError):  # a partial result: show its runs only
            comparisons = []
        gone = (set.intersection(*(c.dropped_lines for c in comparisons))
                if comparisons and all(c.child is not None for c in comparisons) else set())
        out.append({"h": h, "gone": gone, "comparisons": [{"number": c.number, "run": c.run, "child": c.child is not None,
                                              "original": c.original, "replayed": c.replayed,
                                              "changed": c.changed_lines, "dropped": c.dropped_lines}
                                             for c in comparisons]})
    return out
