"""Tool results read as records, so a result reads the same whichever way the tool answered:
each JSON object of a result, each line or list item of a text result (`text_records`), and
a prose line laid out as "field: value" (`prose_record`).
"""
from __future__ import annotations

import difflib
import functools
import itertools
import re
from typing import Any, Iterator, Sequence

from tracefix.attributes import from_json_text

from .values import ID_TOKEN, NUMBER


def text_result(result: Any) -> str | None:
    """A tool result given as plain text (not JSON text): its stripped text, else None."""
    if not isinstance(result, str) or not result.strip():
        return None
    if result.lstrip()[:1] in "[{" and isinstance(from_json_text(result), (dict, list)):
        return None
    return result.strip()


# Records per tool result read for restated fields, and how far back a call looks for them.
MAX_FIELD_RECORDS = 50


def is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def is_key_value(value: Any) -> bool:
    """A value that names a record: one token mixing letters and digits ("ord_1c9e0",
    "sku:40-a"), whatever its separators."""
    return (isinstance(value, str) and 0 < len(value) <= MAX_PHRASE and not any(c.isspace() for c in value)
            and any(c.isalpha() for c in value) and any(c.isdigit() for c in value))


def result_dicts(result: Any) -> Iterator[dict[str, Any]]:
    """Every dict of a JSON tool result (or of a JSON text), depth first."""
    if isinstance(result, str) and result.lstrip()[:1] in "[{":
        result = from_json_text(result)
    stack = [result]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            yield o
            stack += [v for v in o.values() if isinstance(v, (dict, list))]
        elif isinstance(o, list):
            stack += o


def keyed_records(result: Any) -> list[dict[str, Any]]:
    """The dicts of a JSON tool result (or of a JSON text) that name a record: a key value
    among their scalar values."""
    named = (o for o in result_dicts(result) if any(is_key_value(v) for v in o.values()))
    return list(itertools.islice(named, MAX_FIELD_RECORDS))


def prose_items(result: Any) -> list[str]:
    """The items (lines, bulleted parts) of a plain-text tool result that name a record."""
    text = text_result(result)
    if text is None:
        return []
    items = (item for item in _ITEM_BREAK.split(text)[:_MAX_TEXT_ITEMS]
             if any(is_key_value(t) for t in _TEXT_TOKEN.findall(item)))
    return list(itertools.islice(items, MAX_FIELD_RECORDS))


# A field written out in prose: its name's words ("unit_price", "unitPrice" -> "unit price"),
# an optional ":" or "=", then its value: a number, or the words up to the next separator.
_NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_PROSE_VALUE = r"\s*[:=]?\s*(-?\d[\d,]*(?:\.\d+)?(?![\w:-])|[^\s;,|()\[\]{}][^;,\n|]*?)\s*(?:[;,|\n]|$)"


def prose_record(item: str, fields: Sequence[str]) -> dict[str, Any]:
    """A line of a plain-text result read as a record, so a call is compared with prose as
    with JSON: each of `fields` (a call's argument names) the line writes out, read after its
    name, and the line's other values (ids, numbers) under keys of their own."""
    record = {f"\0{i}": t for i, t in enumerate(_TEXT_TOKEN.findall(item)) if _is_value(t)}
    for key in fields:
        words = _NAME_WORDS.findall(key)
        match = words and re.search(r"(?<![\w-])" + r"[\s_-]*".join(map(re.escape, words)) + _PROSE_VALUE, item, re.I)
        if match:
            value = match.group(1).strip()
            if value[:1].isdigit() or value[:1] == "-":
                value = value.replace(",", "")  # "1,500" is 1500, as plain_numbers reads it
            # the field's own value, not another field's (what _said_of's `others` leaves out)
            record = {k: v for k, v in record.items() if not (k.startswith("\0") and v == value)}
            record[key] = value
    return record


def record_ids(records: list[Record]) -> list[set[str]]:
    """The ids among each record's values, in lower case as artifacts read them."""
    return [{v.lower() for v in values if isinstance(v, str) and ID_TOKEN.fullmatch(v)} for _, values, _ in records]


# A record: (shape, values, listed). Records of one shape are siblings (the same kind of
# thing); `listed`: an item of a listing (a JSON list, a text line after the first).
Record = tuple[Any, list, bool]


def records_of(obj: Any) -> list[Record]:
    """The records of a tool result, each with its own scalar values: every non-empty dict of
    a JSON value (its shape: its keys), and every line or list item of a plain-text result
    (text_records), so a result reads the same whether the tool answered in JSON or prose."""
    out: list[Record] = []

    def walk(o: Any, in_list: bool = False) -> None:
        if isinstance(o, dict):
            values = [v for v in o.values() if is_scalar(v)]
            if values:
                out.append((frozenset(k for k, v in o.items() if is_scalar(v)), values, in_list))
            for v in o.values():
                if isinstance(v, (dict, list, tuple)):  # a field's own text is a value, not a listing
                    walk(v)
        elif isinstance(o, (list, tuple)):
            for v in o:
                walk(v, True)
        elif isinstance(o, str) and o.strip():
            parsed = from_json_text(o) if o.lstrip()[:1] in "[{" else None
            if isinstance(parsed, (dict, list)):
                walk(parsed, in_list)
            else:
                out.extend(text_records(o))

    walk(obj)
    return out


# Where a text result starts a new item: a new line, or a bullet inside a line (" - ").
_ITEM_BREAK = re.compile(r"\n|(?<=\s)-\s")
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d{1,3}[.)])\s+")
# A token of a text result: an id whole, as extract_artifacts reads it ("sku:88-b"), else a
# run between separators ("price", "64.75" in "price:64.75"; "qty", "2" in "qty: 2").
_TEXT_TOKEN = re.compile(ID_TOKEN.pattern + r"|[^\s;,:|()\[\]{}]+")
# Two items whose token sequences (values blanked) match this much share a template: siblings.
_SAME_TEMPLATE = 0.6
_RUN_ON_MIN = 6
_RUN_ON_SHARE = 0.75
_MAX_TEXT_ITEMS = 200


def _is_value(token: str) -> bool:
    """An id or a number (a price, an amount, a date's parts, a "#4471"), not a word."""
    token = token.lstrip("#")
    return bool(ID_TOKEN.fullmatch(token) or NUMBER.fullmatch(token.lstrip("$€£").rstrip("%")))


@functools.lru_cache(maxsize=512)
def text_records(text: str) -> tuple[Record, ...]:
    """The records of a plain-text result: each line or list item that names a value (an id
    or a number), its tokens as values. Items written from one template ("id A1; type red",
    "id B2; type blue", or "A1 is a red box", "B2 is a blue box") are siblings: their token
    sequences, with ids and numbers blanked, match at least _SAME_TEMPLATE; each takes the
    template of the first item it matched as its shape. An item that starts as an earlier
    template and runs on (see _runs_on) is that template's item; what follows is an item of
    its own. No field names needed, no format."""
    items = []
    for raw in _ITEM_BREAK.split(text)[:_MAX_TEXT_ITEMS]:
        tokens = [t.strip(".'\"") for t in _TEXT_TOKEN.findall(_BULLET.sub("", raw))]
        tokens = [t for t in tokens if t]
        if any(_is_value(t) for t in tokens):
            items.append(tokens)
    templates: list[tuple[str, ...]] = []
    out: list[Record] = []
    while items:
        tokens = items.pop(0)
        blanked = tuple("<v>" if _is_value(t) else t.lower() for t in tokens)
        shape = next((t for t in templates
                      if difflib.SequenceMatcher(None, t, blanked, autojunk=False).ratio() >= _SAME_TEMPLATE), None)
        if shape is None:
            shape = next((t for t in templates if _runs_on(t, blanked)), None)
            if shape is not None:
                tokens, tail = tokens[:len(shape)], tokens[len(shape):]
                if any(_is_value(t) for t in tail):
                    items.insert(0, tail)
        if shape is None:
            templates.append(blanked)
            shape = blanked
        out.append((("text", shape), tokens, bool(out)))
    return tuple(out)


MAX_PHRASE = 60


def _runs_on(template: Sequence[str], blanked: Sequence[str]) -> bool:
    """`blanked` (an item's tokens, values blanked) is an item of `template`, of at least
    _RUN_ON_MIN tokens, that runs on: its start matches nearly all of the template and more
    follows, the last item of a listing carrying its parent's fields on the same line
    ("- qty 1; sku B2; paid 9.50; status open")."""
    if len(template) < _RUN_ON_MIN or len(blanked) <= len(template):
        return False
    head = difflib.SequenceMatcher(None, template, blanked[:len(template)], autojunk=False)
    return sum(block.size for block in head.get_matching_blocks()) >= _RUN_ON_SHARE * len(template)


def same_template(a: Any, b: Any) -> bool:
    """Two records' shapes from two text results: their templates match (see text_records)."""
    return (isinstance(a, tuple) and isinstance(b, tuple) and a[:1] == b[:1] == ("text",)
            and difflib.SequenceMatcher(None, a[1], b[1], autojunk=False).ratio() >= _SAME_TEMPLATE)
