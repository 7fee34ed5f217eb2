"""Where edits sit in a conversation and the values they state.

An edit is the content of a message that someone (a person, a replay's intervention, a
guard's reminder) put into an agent's conversation. There is no keyword contract: no prefix
marks an edit and no tool has to be named. An edit is recognised by where it sits in the
conversation (see :func:`edit_messages`); this module reads the values it states
(:func:`read`: identifiers such as ``ACC-1002``, ``sku:88-b`` or ``#4471`` and amounts such
as ``$1,000``, ``1000 dollars`` or ``1000.00``, each with its direction word and whether it is
stated as the wrong one), and :mod:`tracefix.demo.edit_reader` reads what the edit asks the
agent to do (the actions, with negation and scope), which is what the models act on.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

# A value-like token: letters/digits with a digit inside (ids, check numbers), not a plain number.
_ID = re.compile(r"(?<![\w$.-])(sku:\d{2}-[a-z]\b|#\d{3,}\b|ord_[0-9a-f]{5}\b|[A-Za-z][A-Za-z_]*[-_]?\d[\w-]*)")
_AMOUNT = re.compile(r"(?:\$\s*|\b(?:amount|sum|of|is|be|=)\s+\$?)([\d,]*\d(?:\.\d{1,2})?)\b|"
                     r"\b(\d[\d,]*\.\d{2})\b|\b(\d[\d,]*(?:\.\d{1,2})?)\s*(?:dollars|usd|bucks)\b")
_NEGATED_BEFORE = re.compile(r"\b(not|never|instead of|rather than|wrong|incorrect|mistaken|invalid|bad|no longer)"
                             r"\b\W*(?:[\w=]+\W+){0,3}$", re.I)
_NEGATED_AFTER = re.compile(r"^[^.;:]{0,30}?\b(is|was|were|are)\s+(?:the |a |an )?(wrong|incorrect|not|invalid|"
                            r"mistaken|a mistake|bad)\b|"
                            r"^[^.;:]{0,30}?\b(appears nowhere|does not|doesn't|is nowhere)\b", re.I)
_DIRECTION_WORD = re.compile(r"\b(from|to|into|source|destination|recipient|target|payee)\b", re.I)

def _norm(text: str) -> str:
    return " ".join(re.sub(r"[_`'\"]", " ", text or "").lower().split())


@dataclass
class Stated:
    value: str
    direction: str | None  # "source" | "destination" | None
    negated: bool = False  # stated as the wrong one ("instead of X", "X is wrong")


@dataclass
class Reading:
    text: str
    ids: list[Stated] = field(default_factory=list)
    amounts: list[Stated] = field(default_factory=list)

    @property
    def words(self) -> str:
        return _norm(self.text)

    def empty(self) -> bool:
        return not self.text.strip()

    def states(self, value) -> bool:
        """The edit states this value (an id, or an amount compared as a number)."""
        if value is None:
            return False
        if isinstance(value, (int, float)) or re.fullmatch(r"[\d,]*\d(?:\.\d+)?", str(value)):
            try:
                number = float(str(value).replace(",", ""))
            except ValueError:
                return False
            return any(abs(float(a.value) - number) < 0.005 for a in self.amounts if not a.negated)
        return any(s.value.upper() == str(value).upper() for s in self.ids if not s.negated)

    def ids_like(self, example: str) -> list[Stated]:
        """Stated ids of the same shape as `example` (same letters before the digits)."""
        wanted = shape(example)
        return [s for s in self.ids if shape(s.value) == wanted and not s.negated]


def shape(value: str) -> str:
    return re.sub(r"\d.*$", "", str(value)).upper()


def _direction(before: str) -> str | None:
    """The direction word nearest before a value, within three words of it."""
    tail = before[-40:]
    found = list(_DIRECTION_WORD.finditer(tail))
    if not found or len(re.findall(r"[\w=]+", tail[found[-1].end():])) > 3:
        return None
    return "source" if found[-1].group(1).lower() in ("from", "source") else "destination"


def _negated(text: str, start: int, end: int) -> bool:
    # a negation counts only inside the value's own clause ("X is wrong; use Y": Y is meant)
    before = re.split(r"[.;:,]|\bbut\b|\binstead\b(?! of)|\buse\b", text[max(0, start - 40):start])[-1]
    return bool(_NEGATED_BEFORE.search(before) or _NEGATED_AFTER.search(text[end:end + 60]))


def read(text: str) -> Reading:
    reading = Reading(text or "")
    for m in _ID.finditer(reading.text):
        value = m.group(1).rstrip(".-")
        if re.fullmatch(r"(?i)steps?\d*|t\d+", value):
            continue  # "step 6" points into a log, it is no value
        reading.ids.append(Stated(value, _direction(reading.text[:m.start()]),
                                  _negated(reading.text, m.start(), m.end())))
    for m in _AMOUNT.finditer(reading.text):
        group = next(g for g in (1, 2, 3) if m.group(g))
        raw = m.group(group).replace(",", "")
        start = m.start(group)
        before = reading.text[max(0, start - 12):start]
        if re.search(r"[A-Za-z][-_]?$", before):
            continue  # the digits of an id (CHK-5001), not an amount
        try:
            float(raw)
        except ValueError:
            continue
        reading.amounts.append(Stated(raw, _direction(reading.text[:start]), _negated(reading.text, start, m.end())))
    return reading


def combine(texts: list[str]) -> Reading | None:
    texts = [t for t in texts if t and t.strip()]
    return read("\n".join(texts)) if texts else None


# --- where edits sit in a conversation ---------------------------------------------------------

def edit_messages(messages: list[dict], is_protocol) -> list[int]:
    """Indexes of the user messages that are edits: a user turn the agent's own protocol did
    not produce. `is_protocol(i, message)` says whether the user message at i is one the app
    sends itself (the task, an instruction, a report)."""
    return [i for i, m in enumerate(messages) if m.get("role") == "user" and not is_protocol(i, m)]


def worker_protocol(messages: list[dict]):
    """A worker's instructions come as the first user turn after the system prompt or after its
    own text report; a user turn right after a tool result or another user turn is an edit."""
    def is_instruction(i: int, m: dict) -> bool:
        prev = messages[i - 1] if i > 0 else {"role": "system"}
        return prev.get("role") == "system" or (prev.get("role") == "assistant" and not prev.get("tool_calls"))
    return is_instruction


# An orchestrator relays what an edit said about a worker's action as a note below its
# instruction; the worker reads the note as an edit (its own protocol, both sides scripted).
NOTE_MARK = "\n\nNote: "


def split_note(instruction: str) -> tuple[str, str]:
    head, _, note = (instruction or "").partition(NOTE_MARK)
    return head, note
