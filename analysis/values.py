"""The values a step's text names (ids, amounts, quoted strings, urls, files), and whether
its context showed them.

`extract_artifacts` reads the values of any text, whatever the app's id format;
`unsupported_in` tells which values a step used that its context never showed it (a number
worked out from two it was shown aside). Pure Python, cheap to import anywhere.
"""
from __future__ import annotations

import functools
import json
import math
import re
from typing import Any


# An identifier of any shape: a token of letters and digits, both present, its runs joined by
# "-", "_" or ":" or not at all (ACC-1007, acc1007, inv_2024_a1, sku:40-a, 7f3a9c, gpt4). A
# whole token only, so a word or a plain number never is one; a colon joins only between two
# runs, so "ACC-1007: closed" ends the id at the colon.
ID_TOKEN = re.compile(r"(?<![\w:-])(?=[\w:-]*[A-Za-z])(?=[\w:-]*\d)[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+|:[A-Za-z0-9]+(?!\.\d))*"
                       r"(?![\w-]|:[A-Za-z0-9])")
# Artifacts: values a step can hand to a later step. Order matters: specific before generic.
ARTIFACT_PATTERNS = [
    ("url", re.compile(r"https?://[^\s\"'<>)\]]+")),
    ("file", re.compile(r"\b[\w./-]+\.(?:json|csv|txt|py|md|pdf|xlsx?|log|html|ya?ml)\b")),
    ("id", ID_TOKEN),
    # Not the tail of an id ("ACC-1007", "acc:1007") nor the digits after a decimal point; a
    # decimal after a colon is a key's value ("price:64.75"), as is compact JSON's '"n":1500'.
    # Not the hour of a clock reading either ("09:48", "1:30:00"): a time says when, and a
    # log line's stamp is no value the step took from anywhere.
    ("number", re.compile(r"(?<![\w.-])(?:(?<![A-Za-z0-9]:)-?\d+(?:\.\d+)?|(?<=[A-Za-z0-9]:)\d+\.\d+)(?![\w-]|\.\w|:\d)")),
]
# A date with a time of day, ISO 8601 style ("2026-03-14T09:48:54.1+01:00"): it has letters
# and digits, like an id, but it is a moment, not a record; read as nothing.
DATETIME = re.compile(r"(?<![\w-])\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?(?![\w:])")
# A number written with thousands separators ("1,500", "12,345.50"), as people and models
# write amounts, read as the number its tool returned (1500). Not after "[" or ",", where
# "[100,200]" is a compact list of two numbers.
_GROUPED_NUMBER = re.compile(r"(?<![\w.,\[])\d{1,3}(?:,\d{3})+(?!\d|,\d)")
_GROUPED_HINT = re.compile(r"\d,\d{3}")  # twice as fast to rule out as the pattern above
# Quoted values; an apostrophe inside a word ("Erin's") does not open a quote.
_QUOTED = re.compile(r"(?<!\w)'([^'\n]{1,80})'(?!\w)|\"([^\"\n]{1,80})\"")
# Numbers this small are list markers, counts and booleans: linking on them is noise.
MIN_NUMBER_LEN = 2


def normalize_error(text: str | None) -> str | None:
    """Error text with instance details replaced, so two occurrences of the same failure
    share one signature: quoted strings, ids, hex and numbers become placeholders."""
    if not text:
        return None
    sig = str(text).strip().splitlines()[0] if str(text).strip() else ""
    sig = _QUOTED.sub("<str>", sig)
    sig = re.sub(r"https?://\S+", "<url>", sig)
    sig = re.sub(r"\b[0-9a-f]{8,}\b", "<hex>", sig, flags=re.I)
    sig = ID_TOKEN.sub("<id>", sig)
    sig = re.sub(r"-?\d+(?:\.\d+)?", "<num>", sig)
    sig = re.sub(r"\s+", " ", sig)
    return sig[:160] or None


def plain_numbers(text: str) -> str:
    """`text` with its grouped numbers written plain ("1,500.50" -> "1500.50"): every reader
    of numbers in a text reads this, so a report's "1,500" is the result's 1500."""
    if "," not in text or not _GROUPED_HINT.search(text):
        return text
    return _GROUPED_NUMBER.sub(lambda m: m.group().replace(",", ""), text)


def extract_artifacts(text: str) -> set[str]:
    """Identifiers, URLs, file names, multi-digit numbers and short quoted values in `text`.
    Ids in lower case (an id is the same whatever case an agent writes it in), numbers in
    canonical form ("1,500.00" -> "1500")."""
    return set(_artifacts_of(text)) if text else set()


def is_identifier(value: str) -> bool:
    """A token of letters and digits, both present (an id of any shape), as artifacts find it."""
    return bool(ID_TOKEN.fullmatch(value))


# Patterns that only match around one of these characters: a text without any is not scanned.
_PATTERN_HINTS = {"url": ("://",), "file": (".",)}


@functools.lru_cache(maxsize=256)  # a step's text is read for what it produced, used and asserted
def _artifacts_of(text: str) -> frozenset[str]:
    text = plain_numbers(text)
    if ":" in text:
        text = DATETIME.sub(" ", text)
    found: set[str] = set()
    for kind, pattern in ARTIFACT_PATTERNS:
        if kind in _PATTERN_HINTS and not any(h in text for h in _PATTERN_HINTS[kind]):
            continue
        for m in pattern.finditer(text):
            value = m.group(0).rstrip(".,;:")
            if kind == "number":
                digits = value.lstrip("-").split(".")[0]
                if len(digits) < MIN_NUMBER_LEN and "." not in value:
                    continue
                value = canonical_number(value)
            elif kind == "id":
                value = value.lower()  # ORD_7F3A2 in a report is the store's ord_7f3a2
            found.add(value)
    if "'" in text or '"' in text:
        for m in _QUOTED.finditer(text):
            value = (m.group(1) or m.group(2) or "").strip()
            # Quoted single words are usually JSON keys; keep values with a digit or a space.
            if value and (any(ch.isdigit() for ch in value) or " " in value) and len(value) <= 60:
                found.add(value.lower() if ID_TOKEN.fullmatch(value) else value)
    return frozenset(found)


def canonical_number(value: str) -> str:
    try:
        number = float(value)
    except ValueError:
        return value
    if not math.isfinite(number):  # 309 digits and more: a float cannot hold it, keep it as written
        return value
    return str(int(number)) if number == int(number) else repr(number)


def scalar_values(obj: Any) -> list[str]:
    """The values (not keys) of a JSON-like object, each as text; nulls and booleans are no
    values a step can hand on."""
    parts: list[str] = []

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            for v in o.values():
                walk(v)
        elif isinstance(o, (list, tuple)):
            for v in o:
                walk(v)
        elif o is None or isinstance(o, bool):
            return
        else:
            parts.append(str(o))

    walk(obj)
    return parts


def values_text(obj: Any) -> str:
    """The values (not keys) of a JSON-like object as text, for artifact extraction."""
    return " \n ".join(scalar_values(obj))


def compact_json(obj: Any) -> str:
    try:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(obj)


def unsupported_in(used: set[str], context: str) -> list[str]:
    """The values of `used` that `context` never mentions (as an artifact or a whole token),
    whatever the case: an agent that writes `ORD_7F3A2` for the store's `ord_7f3a2` was shown it."""
    if not used:
        return []
    context = plain_numbers(context).lower()
    # Each value searched in the context costs values x context: a 200 KB message asserts
    # thousands of values. Past a budget, an index of the context's tokens finds each in O(1).
    if len(used) * len(context) > _DIRECT_SEARCH_CHARS:
        index = _TokenIndex(context)

        def mentioned(value: str) -> bool:
            return index.mentions(value.lower())
    else:
        def mentioned(value: str) -> bool:
            # A plain substring test first: cheap on a long context, and most values are there.
            value = value.lower()
            return value in context and re.search(_token_pattern(value), context) is not None
    missing = [value for value in sorted(used) if not mentioned(value)]
    if any(NUMBER.fullmatch(v) for v in missing):
        seen = _operand_cents(context)
        missing = [v for v in missing if not (NUMBER.fullmatch(v) and _sum_or_difference(float(v), seen))]
    return missing


# A number an agent worked out from two it was shown (a total, what is left, a change) is
# no value made up: read against the numbers of the context's tail, so that a step costs
# the same however long its context.
_ARITHMETIC_CHARS = 8_000
_MAX_OPERAND = 1e15  # past this no float holds its cents (and a number of 400 digits is inf)


def _operand_cents(context: str) -> set[int]:
    """The numbers of a (plain-numbered) context's tail, in cents, 10 or more: a list's
    numbering and a count of a few would otherwise cover any value near one seen (a made-up
    1008 next to a 1007)."""
    cents = set()
    for text in set(NUMBER.findall(context[-_ARITHMETIC_CHARS:])):
        x = float(text)
        if 10 <= abs(x) < _MAX_OPERAND:
            cents.add(round(x * 100))
    return cents


def _sum_or_difference(value: float, cents: set[int]) -> bool:
    """Whether `value` is a + b or a - b for numbers a, b of `cents` (to the cent)."""
    if not abs(value) < _MAX_OPERAND:
        return False
    target = round(value * 100)
    return any(target - a in cents or a - target in cents for a in cents)


_DIRECT_SEARCH_CHARS = 2_000_000
_RUN = re.compile(r"[A-Za-z0-9]+")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")  # the values _token_pattern treats as numbers


class _TokenIndex:
    """Where each ASCII alphanumeric run of a context starts. A value mentioned at p (as
    _token_pattern matches it) has each of its runs at the same offset from p in the
    context, whole: the value's own characters and the pattern's boundaries end them there.
    Except at a number's end, which the pattern lets go on ("820.5" in "820.50", "200" in
    "200abc"): a number is looked up by its first run, and a run of digits then letters is
    also indexed by its leading digits. Other values by their longest run, the rarest."""

    def __init__(self, context: str):
        self.context = context
        self.starts: dict[str, list[int]] = {}
        for m in _RUN.finditer(context):
            run = m.group()
            self.starts.setdefault(run, []).append(m.start())
            if run[0].isdigit() and not run.isdigit():
                self.starts.setdefault(run[:len(run) - len(run.lstrip("0123456789"))], []).append(m.start())

    def mentions(self, value: str) -> bool:
        runs = list(_RUN.finditer(value))
        if not runs:
            return value in self.context and re.search(_token_pattern(value), self.context) is not None
        anchor = runs[0] if NUMBER.fullmatch(value) else max(runs, key=lambda m: len(m.group()))
        pattern = None
        for start in self.starts.get(anchor.group(), ()):
            p = start - anchor.start()
            if p >= 0 and self.context.startswith(value, p):
                pattern = pattern or re.compile(_token_pattern(value))
                if pattern.match(self.context, p):  # lookbehind sees the context before p
                    return True
        return False


def _token_pattern(value: str) -> str:
    """`value` as a whole token; a canonical number also matches its written forms
    ("820.5" in "820.50", "200" in "200.00")."""
    if NUMBER.fullmatch(value):
        tail = r"0*" if "." in value else r"(?:\.0+)?"
        return r"(?<![\w.])" + re.escape(value) + tail + r"(?![\w.]\d|\d)"
    return r"(?<![\w.])" + re.escape(value) + r"(?![\w])"


def used_values(calls: list[dict], text: str) -> set[str]:
    """What the action asserts: its call arguments, or the text of a text-only step."""
    if calls:
        return extract_artifacts(values_text([c["arguments"] for c in calls]))
    return extract_artifacts(text)


WORD = re.compile(r"[A-Za-z][A-Za-z_-]{2,}")


def words_of(values: list) -> set[str]:
    return {str(v).lower() for v in values if isinstance(v, str) and WORD.fullmatch(v)}
