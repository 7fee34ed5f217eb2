"""Reading a stored value tolerantly, and writing one for display.

Stored results are read through `objects`, `fields` and `whole` (an entry that is no
object is skipped, a step that is no number is no step); `to_json`, `clip`, `brief` and the
`fmt_` functions turn any value into display text without raising.
"""
from __future__ import annotations

import json


def objects(value) -> list[dict]:
    """The objects of a stored list: its dict items (none for anything but a list)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def fields(value) -> dict:
    """A stored object's fields (none for anything but an object)."""
    return value if isinstance(value, dict) else {}


def whole(value, default: int | None = None) -> int | None:
    """A stored step number, rank or position as an int: a number or a numeral (a bool is
    neither), else `default`."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return default
    try:
        return int(value)
    except (ValueError, OverflowError):
        return default


def hypotheses(result: dict | None) -> list[dict]:
    """The hypotheses of an analysis or replay result in stored order (the objects among them)."""
    return objects(fields(result).get("hypotheses"))


def listed(value) -> list:
    """A stored list as a list: a lone value is a list of one, null none."""
    return value if isinstance(value, list) else [] if value is None else [value]


def to_json(value, *, indent: int | None = 2) -> str:
    """JSON for display: readable, never raising on odd values."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=indent, ensure_ascii=False, default=str, sort_keys=False)
    except (TypeError, ValueError):
        return repr(value)


def clip(text: str, limit: int) -> str:
    """Cut long text for display and say how much was cut (never silently)."""
    text = text or ""
    if len(text) <= limit:
        return text
    return text[:limit] + f" … ({len(text) - limit} more characters)"


def words_within(text: str, limit: int) -> str:
    """The start of `text`, at most `limit` characters, ended at a word boundary when one is in
    the second half (a reader takes half a word for a different word); a longer token (an id,
    a URL) is cut where the limit falls."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    if not text[limit].isspace():
        space = head.rfind(" ")
        if space >= limit // 2:
            head = head[:space]
    return head.rstrip(" ,;:")


def one_line(text, limit: int = 160) -> str:
    """Text on one line, a long one cut between words, saying how much was cut."""
    text = " ".join(str(text or "").split())
    if len(text) <= limit:
        return text
    head = words_within(text, limit)
    return f"{head} … ({len(text) - len(head)} more characters)"


def brief(text, limit: int = 160) -> str:
    """One line for running prose: cut between words with an ellipsis (the full text is further down)."""
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else words_within(text, limit) + "…"


def fmt_duration(ms) -> str:
    if ms is None:
        return "—"
    seconds = float(ms) / 1000.0
    if seconds < 1:
        return f"{float(ms):.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


def fmt_score(value, digits: int = 2) -> str:
    if value is None:
        return "—"
    try:
        return f"{float(value):.{digits}f}"
    except (TypeError, ValueError):
        return str(value)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def yes_no(value) -> str:
    return "—" if value is None else "yes" if value else "no"
