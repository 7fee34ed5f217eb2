"""How the scripted model reads an edit: the content of a message that someone (a person, a
replay's intervention, a guard's reminder) put into an agent's conversation.

There is no keyword contract: no prefix marks an edit and no tool has to be named. An edit is
recognised by where it sits in the conversation (see :func:`edit_messages`), and it is read
for what it *says*:

- the values it states: identifiers (a word with a digit, e.g. ``ACC-1002``, ``CHK-5001``)
  and amounts (``$200``, ``312.20``), each with the direction word just before it (``from``,
  ``to``, ``into``) so a stated destination goes to the destination;
- the actions it talks about (a tool name, or the way people say it: "deposit", "move $");
- the arguments it talks about (``check_number``, "check number", "destination account");
- where it points for the right value: the instruction or request the agent was given, the
  results its tools returned, the reports of other agents;
- whether it says the work is not finished ("not done yet", "do not answer before ...").

What the model *does* with a reading is decided per step in :mod:`tracefix.demo.bank_edits`: a
stated value is adopted (right or wrong), a slip is repaired only when the reading carries
what that slip needs (:class:`Need`), anything else is ignored.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

# A value-like token: letters/digits with a digit inside (ids, check numbers), not a plain number.
_ID = re.compile(r"(?<![\w$.-])([A-Za-z][A-Za-z_]*[-_]?\d[\w-]*)")
_AMOUNT = re.compile(r"(?:\$\s*|\b(?:amount|sum|of|is|be)\s+\$?)([\d,]*\d(?:\.\d{1,2})?)\b|\b(\d[\d,]*\.\d{2})\b")
_NEGATED_BEFORE = re.compile(r"\b(not|never|instead of|rather than|wrong|incorrect|mistaken|invalid|bad|no longer)"
                             r"\b\W*(?:[\w=]+\W+){0,3}$", re.I)
_NEGATED_AFTER = re.compile(r"^[^.;:]{0,30}?\b(is|was|were|are)\s+(wrong|incorrect|not|invalid|a mistake)\b|"
                            r"^[^.;:]{0,30}?\b(appears nowhere|does not|doesn't|is nowhere)\b", re.I)
_DIRECTION_WORD = re.compile(r"\b(from|to|into|source|destination|recipient|target|payee)\b", re.I)

# Where a value can be found in an agent's context.
SOURCES = {
    "instruction": re.compile(r"\b(instruction|instructed|request(?:ed)?|ask(?:ed|s)?|task|told|orchestrator|"
                              r"the customer (?:gave|said|wants|asked)|you were given|given|specified|stated|"
                              r"mentioned|says)\b", re.I),
    "results": re.compile(r"\b(results?|returned|returns|response|output|tool (?:said|says)|looked up|lookup|"
                          r"came back|data)\b", re.I),
    "reports": re.compile(r"\b(report(?:s|ed)?|found|looked up|lookup|listed|workers? (?:said|found|gave))\b", re.I),
}
_NOT_DONE = re.compile(r"\b(not (?:yet |been |actually )?(?:done|finished|complete[d]?|carried out|performed|made|"
                       r"deposited|transferred|closed|moved)|(?:has|have|was|were)(?:n't| not) (?:yet )?(?:been )?"
                       r"(?:done|finished|completed|carried out|made|performed)|still (?:has|have|needs?|to do|"
                       r"pending|missing|open)|remaining|premature(?:ly)?|too early|before (?:you )?(?:give |giving )?"
                       r"(?:the |a |your )?(?:final )?answer|do not (?:give|send|write) (?:the |a |your )?(?:final )?"
                       r"answer|don't (?:give|answer)|(?:is|are) missing|left to do|pending)\b", re.I)


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

    def mentions_argument(self, argument: str) -> bool:
        """The edit talks about this argument: its name as written or spoken ("check number"),
        or, for an ``*_account``/``*_id`` argument, the thing it identifies ("account")."""
        words = self.words
        spoken = _norm(argument)
        if re.search(rf"\b{re.escape(spoken)}\b", words):
            return True
        parts = spoken.split()
        if len(parts) > 1 and parts[-1] in ("account", "id") and parts[0] in ("to", "from"):
            side = {"to": r"destination|recipient|target|to account|into", "from": r"source|from account"}[parts[0]]
            return bool(re.search(rf"\b({side})\b", words))
        return False

    def mentions_any(self, pattern: str) -> bool:
        return bool(re.search(pattern, self.words, re.I))

    def points_to(self, source: str) -> bool:
        return bool(SOURCES[source].search(self.text))

    def says_not_done(self) -> bool:
        return bool(_NOT_DONE.search(self.text))

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
        raw = (m.group(1) or m.group(2) or "").replace(",", "")
        start = m.start(1) if m.group(1) else m.start(2)
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


@dataclass
class Need:
    """What an edit must carry to repair one slip; any one of these is enough:

    - ``values``: stating a right value (it is adopted);
    - ``decides``: stating *any* value of this shape for the slot: the edit then decides the
      slot itself (a wrong value is adopted too: the slip is replaced by the edit's mistake);
    - ``arguments``: naming an argument whose value is in the agent's context (a dropped one);
    - ``sources`` together with talking about the slip (``about`` regex or ``related``
      arguments): a pointer to where the right value is;
    - ``action_alone``: talking about the action (``about``) is itself the content needed;
    - ``not_done``: saying the work is not finished.
    ``target`` only labels the ground truth."""
    values: tuple = ()
    decides: tuple = ()
    arguments: tuple = ()
    related: tuple = ()
    about: str | None = None
    sources: tuple = ()
    action_alone: bool = False
    not_done: bool = False
    pointer_alone: bool = False  # a pointer to the source is enough (re-read the results)
    target: tuple = ()

    def met_by(self, edit: Reading | None) -> bool:
        if edit is None or edit.empty():
            return False
        if any(edit.states(v) for v in self.values):
            return True
        if any(edit.ids_like(v) if not _is_number(v) else
               [a for a in edit.amounts if not a.negated] for v in self.decides):
            return True
        if any(edit.mentions_argument(a) for a in self.arguments):
            return True
        about = (self.about is not None and edit.mentions_any(self.about)) or any(
            edit.mentions_argument(a) for a in self.related)
        if self.action_alone and about:
            return True
        if self.not_done and edit.says_not_done():
            return True
        return any(edit.points_to(s) for s in self.sources) and (about or self.pointer_alone)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) or bool(re.fullmatch(r"[\d,]*\d(?:\.\d+)?", str(value)))
