"""Session steps -> transition units (AgentTether section III-B).

A transition unit bundles one decision: its observation (what the agent newly saw), belief
(its text), action (text or tool calls with arguments) and feedback (tool results and
errors), plus derived attributes the graph and the detectors read: status, a normalized
error signature, tool, phase (plan | instruct | act | answer), the artifacts the step
produced and consumed, agent and tokens (not how long the step took: features.py says why).

Works on plain session-document dicts (docs/contracts.md section 1), for instrumented
sessions (kind "llm") and imported message logs (kind "message"). Pure Python: no numpy,
so it is cheap to import anywhere.
"""
from __future__ import annotations

import bisect
import difflib
import functools
import itertools
import json
import math
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from tracefix.attributes import from_json_text
from tracefix.collector.document import content_text, session_task

PHASES = ("plan", "instruct", "act", "answer")
STATUSES = ("ok", "error", "empty")
# What came back from the step's tools; "none" when the step called no tool.
OUTCOMES = ("none", "result", "empty_result", "error_result", "exception")

# Agent names that coordinate others (the planner): their text steps are plans or instructions.
# The one definition of who plans: replay's trial segmentation and the demo's scripted
# analyst ask is_coordinator too.
_COORDINATOR = re.compile(r"orchestrat|planner|manager|supervisor|coordinator|lead|router|boss", re.I)
# Tool names that hand work to another agent rather than act on the world.
_DELEGATION_TOOL = re.compile(r"delegat|handoff|hand_off|transfer_to_|ask_|instruct|assign|dispatch|call_agent|route", re.I)
# Speakers in message logs that are tools or environments rather than agents (Computer_terminal).
_TOOL_SPEAKER = re.compile(r"executor|terminal|computer|(?:^|_)tool(?:$|_)|environment", re.I)
_PLAN_TEXT = re.compile(r"\bplan\b|^\s*(?:step\s*)?1[.):]\s", re.I | re.M)
_REPLAN_TEXT = re.compile(r"re-?plan|new plan|revised plan|updated plan", re.I)
_ANSWER_TEXT = re.compile(r"final answer|\bdone\b|completed|task (?:is )?complete|summary|here is|result:", re.I)
_SUCCESS_CLAIM = re.compile(r"\b(?:success(?:fully)?|succeeded|completed|done|confirmed|worked)\b", re.I)
_FAILURE_CLAIM = re.compile(r"\b(?:fail(?:ed|ure)?|error|unable|could not|couldn't|cannot|can't|not found|invalid|denied|insufficient)\b", re.I)

# An identifier of any shape: a token of letters and digits, both present, its runs joined by
# "-", "_" or ":" or not at all (ACC-1007, acc1007, inv_2024_a1, sku:40-a, 7f3a9c, gpt4). A
# whole token only, so a word or a plain number never is one; a colon joins only between two
# runs, so "ACC-1007: closed" ends the id at the colon.
_ID_TOKEN = re.compile(r"(?<![\w:-])(?=[\w:-]*[A-Za-z])(?=[\w:-]*\d)[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+|:[A-Za-z0-9]+(?!\.\d))*"
                       r"(?![\w-]|:[A-Za-z0-9])")
_ID = _ID_TOKEN
# Artifacts: values a step can hand to a later step. Order matters: specific before generic.
_ARTIFACT_PATTERNS = [
    ("url", re.compile(r"https?://[^\s\"'<>)\]]+")),
    ("file", re.compile(r"\b[\w./-]+\.(?:json|csv|txt|py|md|pdf|xlsx?|log|html|ya?ml)\b")),
    ("id", _ID_TOKEN),
    # Not the tail of an id ("ACC-1007", "acc:1007") nor the digits after a decimal point; a
    # decimal after a colon is a key's value ("price:64.75"), as is compact JSON's '"n":1500'.
    # Not the hour of a clock reading either ("09:48", "1:30:00"): a time says when, and a
    # log line's stamp is no value the step took from anywhere.
    ("number", re.compile(r"(?<![\w.-])(?:(?<![A-Za-z0-9]:)-?\d+(?:\.\d+)?|(?<=[A-Za-z0-9]:)\d+\.\d+)(?![\w-]|\.\w|:\d)")),
]
# A date with a time of day, ISO 8601 style ("2026-03-14T09:48:54.1+01:00"): it has letters
# and digits, like an id, but it is a moment, not a record; read as nothing.
_DATETIME = re.compile(r"(?<![\w-])\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?(?![\w:])")
# A number written with thousands separators ("1,500", "12,345.50"), as people and models
# write amounts, read as the number its tool returned (1500). Not after "[" or ",", where
# "[100,200]" is a compact list of two numbers.
_GROUPED_NUMBER = re.compile(r"(?<![\w.,\[])\d{1,3}(?:,\d{3})+(?!\d|,\d)")
_GROUPED_HINT = re.compile(r"\d,\d{3}")  # twice as fast to rule out as the pattern above
# Quoted values; an apostrophe inside a word ("Erin's") does not open a quote.
_QUOTED = re.compile(r"(?<!\w)'([^'\n]{1,80})'(?!\w)|\"([^\"\n]{1,80})\"")
# Numbers this small are list markers, counts and booleans: linking on them is noise.
_MIN_NUMBER_LEN = 2


@dataclass
class TransitionUnit:
    index: int
    kind: str  # "llm" | "message"
    agent: str
    phase: str
    status: str
    outcome: str
    observation: str
    belief: str
    action: dict[str, Any]  # {"text": str, "calls": [{"name", "arguments"}]}
    feedback: list[dict[str, Any]]  # [{"tool", "result", "error"}]
    tool: str | None  # first tool called, the unit's acting tool
    tools: list[str]
    call_signatures: list[str]  # "tool(canonical args)" per call, for loop detection
    error_signature: str | None
    error_text: str | None
    # produced: values the step hands on (its tool results, its text); consumed: values its
    # own action carries (call arguments, text); context: values its input showed it.
    artifacts_produced: set[str] = field(default_factory=set)
    artifacts_consumed: set[str] = field(default_factory=set)
    # Values the action carries that neither the task nor the step's input showed it.
    unsupported: list[str] = field(default_factory=list)
    # Words a text step attaches to one record that belong to another record of its own
    # tool results ("item 1 is red" when the result says item 1 is blue, item 2 red).
    misattributed: list[str] = field(default_factory=list)
    # Records of its own tool results a text step leaves out while naming their siblings.
    omitted: list[str] = field(default_factory=list)
    # Fields a text step restated with another value than its tool result gave them: in a
    # listing of the record it looked up (misread_listings), or when a later call passed
    # that value in that field for that record (mark_restated_fields).
    restated: list[str] = field(default_factory=list)
    # Ids the action uses whose record (in earlier tool results) differs from its sibling
    # records only by words the task does not say, while a sibling's words are in the task
    # (the task asks for the blue item; the step picks the red one). The task's words are
    # those of its clauses that name a value the action uses, when one does (words_about).
    task_conflicts: list[str] = field(default_factory=list)
    # Ids the action picks whose sibling record the final answer names instead (a sibling no
    # call used, or one the answer pairs with a value the calls paired with the pick): the
    # answer and the acts disagree on which record (see mark_answer_conflicts).
    answer_conflicts: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    output_length: int = 0
    claims_success: bool = False
    claims_failure: bool = False
    # The step closed a round of work (the last word of an agent handed work) that the
    # agent who handed it over then handed out again: the round failed, whatever the
    # report's wording (see mark_failed_rounds).
    round_failed: bool = False
    # The step that made this error step's failed calls again soon after (its agent or
    # another) and did not fail the same way (results, or another failure): a failure the
    # run got past (a timeout, a 503, a rate limit, or one cleared by what happened in
    # between), not where it went wrong (see mark_recovered_errors). None: not made again,
    # or failed again.
    recovered_by: int | None = None

    @property
    def recovered(self) -> bool:
        return self.recovered_by is not None

    @property
    def failed(self) -> bool:
        """An error step the run did not get past by making the same calls again."""
        return self.status == "error" and not self.recovered

    def as_written(self, values: Sequence[str]) -> list[str]:
        """`values` (ids read in lower case) spelled as this step wrote them, in its words, its
        calls, their results or its error, for a reader: `ACC-7` where the analysis compares `acc-7`."""
        text = "\n".join([self.action["text"], *(_compact(c["arguments"]) for c in self.action["calls"]),
                          *(_compact(f.get("result")) for f in self.feedback), self.error_text or ""])
        out = []
        for value in values:
            found = (re.search(r"(?<![\w-])" + re.escape(value) + r"(?![\w-])", text, re.I)
                     if any(ch.isalpha() for ch in value) else None)  # a number is written as compared
            out.append(found.group() if found else value)
        return out

    def summary(self, width: int = 120) -> str:
        """One line a person (or an analyst LLM) can read."""
        if self.action["calls"]:
            what = "; ".join(f"{c['name']}({_compact(c['arguments'])})" for c in self.action["calls"])
        else:
            what = self.action["text"]
        text = f"[{self.index}] {self.agent} {self.phase}: {what}"
        if self.error_text:
            text += f" -> {self.error_text}"
        text = " ".join(text.split())
        return text if len(text) <= width else text[: width - 1] + "…"


def normalize_error(text: str | None) -> str | None:
    """Error text with instance details replaced, so two occurrences of the same failure
    share one signature: quoted strings, ids, hex and numbers become placeholders."""
    if not text:
        return None
    sig = str(text).strip().splitlines()[0] if str(text).strip() else ""
    sig = _QUOTED.sub("<str>", sig)
    sig = re.sub(r"https?://\S+", "<url>", sig)
    sig = re.sub(r"\b[0-9a-f]{8,}\b", "<hex>", sig, flags=re.I)
    sig = _ID_TOKEN.sub("<id>", sig)
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
    return bool(_ID.fullmatch(value))


# Patterns that only match around one of these characters: a text without any is not scanned.
_PATTERN_HINTS = {"url": ("://",), "file": (".",)}


@functools.lru_cache(maxsize=256)  # a step's text is read for what it produced, used and asserted
def _artifacts_of(text: str) -> frozenset[str]:
    text = plain_numbers(text)
    if ":" in text:
        text = _DATETIME.sub(" ", text)
    found: set[str] = set()
    for kind, pattern in _ARTIFACT_PATTERNS:
        if kind in _PATTERN_HINTS and not any(h in text for h in _PATTERN_HINTS[kind]):
            continue
        for m in pattern.finditer(text):
            value = m.group(0).rstrip(".,;:")
            if kind == "number":
                digits = value.lstrip("-").split(".")[0]
                if len(digits) < _MIN_NUMBER_LEN and "." not in value:
                    continue
                value = _canonical_number(value)
            elif kind == "id":
                value = value.lower()  # ORD_7F3A2 in a report is the store's ord_7f3a2
            found.add(value)
    if "'" in text or '"' in text:
        for m in _QUOTED.finditer(text):
            value = (m.group(1) or m.group(2) or "").strip()
            # Quoted single words are usually JSON keys; keep values with a digit or a space.
            if value and (any(ch.isdigit() for ch in value) or " " in value) and len(value) <= 60:
                found.add(value.lower() if _ID_TOKEN.fullmatch(value) else value)
    return frozenset(found)


def _canonical_number(value: str) -> str:
    try:
        number = float(value)
    except ValueError:
        return value
    if not math.isfinite(number):  # 309 digits and more: a float cannot hold it, keep it as written
        return value
    return str(int(number)) if number == int(number) else repr(number)


def _values_text(obj: Any) -> str:
    """The values (not keys) of a JSON-like object as text, for artifact extraction."""
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
    return " \n ".join(parts)


def _compact(obj: Any) -> str:
    try:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(obj)


def _result_error(result: Any) -> str | None:
    """A tool that reports failure in its return value rather than raising: in its own
    fields (an ok/success flag, an error, a failed status or an HTTP status of 400 or more),
    or by the flags of the one object an envelope wraps ({"status": 200, "data": {"ok":
    false, ...}}); a wrapped record's own status ("order": {"status": "rejected"}) is data."""
    outer = True
    while isinstance(result, dict):
        if result.get("ok") is False or result.get("success") is False:
            return str(result.get("error") or result.get("message") or result.get("reason") or "not ok")
        if result.get("error"):
            return str(result["error"])
        status = result.get("status", "") if outer else ""
        if isinstance(status, int) and not isinstance(status, bool) and 400 <= status <= 599:
            return str(result.get("message") or result.get("reason") or f"status {status}")
        if str(status).lower() in {"error", "failed", "failure", "denied", "rejected"}:
            return str(result.get("message") or result.get("reason") or status)
        inner = [v for v in result.values() if isinstance(v, (dict, list))]
        result, outer = (inner[0] if len(inner) == 1 and isinstance(inner[0], dict) else None), False
    if isinstance(result, str) and re.match(r"\s*(error|exception|traceback)\b", result, re.I):
        return result
    return None


def _off_shape_result(result: Any, tool: str, structured_tools: set[str]) -> str | None:
    """A plain-text result from a tool that answers in structured values (a JSON object or
    list) elsewhere in the session: the tool's failure message returned instead of raised,
    whatever its wording."""
    if tool not in structured_tools or not isinstance(result, str) or not result.strip():
        return None
    try:
        json.loads(result)
        return None  # JSON text is still the tool's usual shape
    except ValueError:
        return result.strip()


def _structured_tools(steps: list[dict]) -> set[str]:
    """Tools that answer in JSON: those that did in this session, and, in a session whose
    tools answer in JSON at least as often as in text, a tool whose one text answer (however
    often repeated) is all it said when another tool of the same agent answered in JSON (an
    agent's tools share one style: the text is the odd one out) and the text brings no value
    the call did not pass (a failure speaks of the request; an answer brings numbers and ids
    of its own: "X paid 59.30" is a till's answer, "a colour is needed" is a failure). A
    tool that answered two different texts (one that hands work on), or whose agent's tools
    all answer in text (a tool set that reports in prose), is a text tool."""
    structured: dict[str, int] = {}
    text: dict[str, int] = {}
    distinct: dict[str, set[str]] = {}
    answers: set[str] = set()  # tools whose text brought values of its own
    toolset: dict[str, set[str]] = {}  # agent -> the tools it called
    for s in steps:
        for tc in s.get("tool_calls") or []:
            name, result = tc.get("name") or "", tc.get("result")
            toolset.setdefault(s.get("agent") or "agent", set()).add(name)
            if isinstance(result, (dict, list)):
                structured[name] = structured.get(name, 0) + 1
            elif isinstance(result, str) and result.strip():
                text[name] = text.get(name, 0) + 1
                distinct.setdefault(name, set()).add(result.strip())
                if extract_artifacts(result) - extract_artifacts(_values_text(from_json_text(tc.get("arguments")))):
                    answers.add(name)
    tools = set(structured)
    if sum(structured.values()) >= sum(text.values()):
        for names in toolset.values():
            if names & structured.keys():
                tools |= {name for name in names if len(distinct.get(name, ())) == 1 and name not in answers}
    return tools


def _is_empty_result(result: Any) -> bool:
    return result is None or result == "" or result == [] or result == {}


# How much of a growing prompt is read for the step's context: enough for the current
# sub-task, bounded so long sessions stay linear.
_CONTEXT_MESSAGES = 40
_CONTEXT_CHARS = 40_000


def _context_text(input_messages: list[dict]) -> str:
    """The text the agent could see in its input (recent messages, tool calls included)."""
    parts: list[str] = []
    size = 0
    for msg in reversed((input_messages or [])[-_CONTEXT_MESSAGES:]):
        text = content_text(msg.get("content"))
        for tc in msg.get("tool_calls") or []:
            text += " " + str((tc.get("function") or {}).get("arguments") or "")
        parts.append(text)
        size += len(text)
        if size > _CONTEXT_CHARS:
            break
    return "\n".join(reversed(parts))[-_CONTEXT_CHARS:]


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
    if any(_NUMBER.fullmatch(v) for v in missing):
        seen = _operand_cents(context)
        missing = [v for v in missing if not (_NUMBER.fullmatch(v) and _sum_or_difference(float(v), seen))]
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
    for text in set(_NUMBER.findall(context[-_ARITHMETIC_CHARS:])):
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
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")  # the values _token_pattern treats as numbers


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
        anchor = runs[0] if _NUMBER.fullmatch(value) else max(runs, key=lambda m: len(m.group()))
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
    if _NUMBER.fullmatch(value):
        tail = r"0*" if "." in value else r"(?:\.0+)?"
        return r"(?<![\w.])" + re.escape(value) + tail + r"(?![\w.]\d|\d)"
    return r"(?<![\w.])" + re.escape(value) + r"(?![\w])"


def _tail(texts: list[str], chars: int) -> str:
    """The last `chars` characters of the texts joined by newlines, joining only what is kept."""
    kept, size = [], 0
    for text in reversed(texts):
        kept.append(text)
        size += len(text) + 1
        if size > chars:
            break
    return "\n".join(reversed(kept))[-chars:]


def _used_values(calls: list[dict], text: str) -> set[str]:
    """What the action asserts: its call arguments, or the text of a text-only step."""
    if calls:
        return extract_artifacts(_values_text([c["arguments"] for c in calls]))
    return extract_artifacts(text)


def _text_signature(agent: str, text: str) -> str | None:
    """A text-only step said again word for word (an instruction re-sent) is a loop too."""
    norm = " ".join(text.split())
    return f"{agent} says {norm[:300]}" if len(norm) >= 20 else None


def _observation(input_messages: list[dict]) -> str:
    """What the agent newly saw: the input messages after its last own assistant turn.
    Reading only the tail keeps a step O(1) however long the growing prompt is."""
    tail: list[str] = []
    for msg in reversed(input_messages or []):
        if msg.get("role") == "assistant":
            break
        tail.append(content_text(msg.get("content")))
        if len(tail) >= 8:
            break
    return "\n".join(reversed(tail))


def speaker_of(agent: str | None) -> str:
    """The agent behind a speaker label: message logs decorate one agent's turns
    ("Planner (thought)", "Planner (-> Coder)")."""
    return re.sub(r"\s*\(.*\)\s*$", "", agent or "").strip().lower()


def is_coordinator(agent: str | None) -> bool:
    """An agent named like one that plans and instructs others rather than acting."""
    return bool(_COORDINATOR.search(agent or ""))


def hub_agents(agents: list[str]) -> set[str]:
    """The agent that coordinates the others, read from the conversation's shape rather than
    its name: in a session of several agents, the one that takes the first step and takes a
    step right before every other agent's turn (work goes out from it and comes back to it)."""
    if len(set(agents)) < 2:
        return set()
    hub = agents[0]
    handed = all(agents[i - 1] == hub for i in range(1, len(agents))
                 if agents[i] != hub and agents[i - 1] != agents[i])
    return {hub} if handed else set()


def _phase_for_llm(agent: str, text: str, calls: list[dict], is_last: bool, coordinator: bool) -> str:
    if calls:
        if all(_DELEGATION_TOOL.search(c["name"] or "") for c in calls):
            return "instruct"
        return "act"
    if coordinator and (_PLAN_TEXT.search(text) or _REPLAN_TEXT.search(text)) and not (is_last and _ANSWER_TEXT.search(text)):
        return "plan"
    if is_last:
        return "answer"
    if coordinator:
        return "answer" if re.search(r"final answer", text, re.I) else "instruct"
    return "answer"


def _phase_for_message(role: str, agent: str, text: str, is_last: bool) -> str:
    role = (role or "").lower()
    if role in {"tool", "function", "ipython"} or _TOOL_SPEAKER.search(agent or ""):
        return "act"
    if is_last:
        return "answer"
    if is_coordinator(agent):
        return "plan" if (_PLAN_TEXT.search(text) or _REPLAN_TEXT.search(text)) else "instruct"
    if re.search(r"final answer", text, re.I):
        return "answer"
    if _PLAN_TEXT.search(text):
        return "plan"
    return "act" if role == "assistant" else "instruct"


def build_units(doc: dict) -> list[TransitionUnit]:
    """All transition units of a session document, in step order."""
    steps = sorted(doc.get("steps") or [], key=lambda s: s.get("index", 0))
    task = session_task(doc)
    units: list[TransitionUnit] = []
    n = len(steps)
    said: list[str] = []  # message logs: what was said before, the context of the next message
    results: list[list[Record]] = []  # the records of each tool result so far, newest last
    task_words = {w.lower() for w in _WORD.findall(task or "")}
    task_clauses = task_clauses_of(task or "")
    conflicted: set[str] = set()
    hubs = hub_agents([s.get("agent") or "agent" for s in steps if (s.get("kind") or "llm") == "llm"])
    structured = _structured_tools(steps)
    # (agent, tool) -> the steps and results of its calls, in order; the reports of text steps.
    fetched: dict[tuple[str, str], tuple[list[int], list[Any]]] = {}
    reports: list[tuple[TransitionUnit, list[Any], int, set[str]]] = []
    for pos, step in enumerate(steps):
        is_last = pos == n - 1
        if (step.get("kind") or "llm") == "message":
            unit = _unit_from_message(step, pos, is_last)
            context = (task or "") + "\n" + _tail(said, _CONTEXT_CHARS)
            if not unit.feedback:  # a tool's output reports the world; only agents can invent
                unit.unsupported = unsupported_in(_used_values(unit.action["calls"], unit.action["text"]), context)
            said.append(unit.action["text"])
            if len(said) > _CONTEXT_MESSAGES:
                del said[0]
        else:
            unit = _unit_from_llm(step, pos, is_last, task, hubs, structured)
            if not unit.action["calls"] and unit.action["text"]:
                calls = _own_calls(units, unit.agent)
                own = [result for _, result in calls]
                unit.misattributed = sorted(set(misattributed_values(unit.action["text"], own))
                                            | set(mispaired_numbers(unit.action["text"], own)))
                if own:
                    reports.append((unit, own, *_block(units, unit.agent)))
                unit.omitted = sorted(set(omitted_records(unit.action["text"], own))
                                      | set(dropped_findings(unit.action["text"], calls)))
                unit.restated = misread_listings(unit.action["text"], calls)
            if task_words and results and not is_last:
                # Only the first step to pick a conflicting id chose it; later ones were handed it.
                used = _used_values(unit.action["calls"], unit.action["text"])
                unit.task_conflicts = [v for v in _conflicts_in(used, results[-_CONTEXT_MESSAGES:],
                                                                words_about(used, task_clauses) or task_words)
                                       if v not in conflicted]
                conflicted.update(unit.task_conflicts)
            for c, f in zip(unit.action["calls"], unit.feedback):
                if f.get("result") is not None and not f.get("error"):
                    steps_of, results_of = fetched.setdefault((unit.agent, c["name"]), ([], []))
                    steps_of.append(pos)
                    results_of.append(f["result"])
            results += [_records(f["result"]) for f in unit.feedback if isinstance(f.get("result"), (dict, list))
                        or (_text_result(f.get("result")) and not f.get("error"))]
        units.append(unit)
    for unit, own, start, tools in reports:
        # The same lookups the agent made for other values, before or after this report: a
        # word of theirs that it attaches to its own record is not that record's.
        others = _other_results(fetched, unit.agent, tools, start, unit.index)
        if others:
            unit.misattributed = sorted(set(unit.misattributed) | set(misattributed_values(unit.action["text"], own, others)))
    mark_error_shaped_results(units)
    mark_recovered_errors(units)
    mark_failed_rounds(units)
    mark_restated_fields(units, task or "")
    clear_misled_picks(units)
    mark_answer_conflicts(units)
    return units


def mark_answer_conflicts(units: list[TransitionUnit]) -> None:
    """Set `answer_conflicts` on the step that first picked record Y where the final answer
    names Y's sibling X instead: the answer says the work was done on X, the acts did it on
    Y. Two readings: no call ever used X (_answer_names_unused_records), or the answer pairs
    a value with X that every call passing it paired with Y (_answer_repairs_values)."""
    final = next((k for k in range(len(units) - 1, -1, -1) if in_words_only(units[k])), None)
    if final is None or units[final].kind != "llm":
        return
    shown: list[tuple[int, list[Record], list[set[str]]]] = []  # each tool result before the answer
    for r in range(final):
        for f in units[r].feedback:
            if not f.get("error") and f.get("result") is not None:
                records = _records(f["result"])
                shown.append((r, records, _record_ids(records)))
    _answer_names_unused_records(units, final, shown)
    _answer_repairs_values(units, final, shown)


def _mark_picker(units: list[TransitionUnit], start: int, final: int, picked: set[str], instead: str,
                 value: str | None = None) -> None:
    """The first step in (start, final) to carry one of `picked` (and `value`, if given)
    without `instead` (an instruction, a call) is where the acts parted from the answer; a
    report listing both chose nothing."""
    for k in range(start + 1, final):
        consumed = units[k].artifacts_consumed
        if picked & consumed and instead not in consumed and (value is None or value in consumed):
            units[k].answer_conflicts += sorted((picked & consumed) - set(units[k].answer_conflicts))
            return


def _answer_names_unused_records(units: list[TransitionUnit], final: int,
                                 shown: list[tuple[int, list[Record], list[set[str]]]]) -> None:
    """X and Y records of one shape in one tool result; the final answer names X, no call
    ever used X, and a call used Y (which the answer does not name). An X that an earlier
    error named is the answer relaying that failure ("blocked: nothing reserved for X"),
    not claiming work done on X."""
    named = {v for v in extract_artifacts(units[final].action["text"]) if _ID.fullmatch(v)}
    called: set[str] = set()
    failed_on: set[str] = set()
    for u in units:
        if u.action["calls"]:
            called |= extract_artifacts(" ".join(u.call_signatures))
        failed_on |= extract_artifacts(u.error_text or "")
    answered_only = named - called - failed_on
    if not answered_only:
        return
    for r, records, ids in shown:
        for i, mine in enumerate(ids):
            for x in mine & answered_only:
                siblings = [j for j in range(len(records)) if j != i and records[j][0] == records[i][0]]
                for y in sorted(set().union(*(ids[j] - mine for j in siblings)) & (called - named)):
                    _mark_picker(units, r, final, {y}, x)


def _answer_repairs_values(units: list[TransitionUnit], final: int,
                           shown: list[tuple[int, list[Record], list[set[str]]]]) -> None:
    """A clause of the final answer pairs value V with record X ("moved 1000 into X"); every
    call that passed V passed none of the clause's records but one of X's shape, Y: the
    calls paired V with Y. A clause that also names a record of the call says both, so it
    pairs nothing, and a value no call passed is the answer's own."""
    shapes: dict[str, set[Any]] = {}
    first_shown: dict[str, int] = {}
    for r, records, ids in shown:
        for (shape, _, _), mine in zip(records, ids):
            for i in mine:
                shapes.setdefault(i, set()).add(shape)
                first_shown.setdefault(i, r)
    calls = [extract_artifacts(signature) for u in units[:final] if u.action["calls"] for signature in u.call_signatures]
    for clause in _CLAUSE.split(units[final].action["text"]):
        said = extract_artifacts(clause)
        records = {v for v in said if v in shapes}
        for value in said:
            if not _NUMBER.fullmatch(value) or len(value.lstrip("-").replace(".", "")) < _MIN_NUMBER_LEN:
                continue
            passing = [c for c in calls if value in c]
            if not passing or any(c & records for c in passing):
                continue
            for x in sorted(records):
                ys = set.intersection(*({y for y in c if shapes.get(y, set()) & shapes[x]} for c in passing))
                if ys:
                    _mark_picker(units, max(first_shown[y] for y in ys | {x}), final, ys, x, value)


def clear_misled_picks(units: list[TransitionUnit]) -> None:
    """A pick of a record the task's wording does not fit (task_conflicts) was no choice of
    the picker when the latest report that named the record misread its own tool results
    (misattributed, restated): the picker took the report's word for which record is which,
    and the misreading is where the run went wrong. The report keeps its evidence."""
    for k, u in enumerate(units):
        if not u.task_conflicts:
            continue
        kept = []
        for value in u.task_conflicts:
            source = next((j for j in range(k - 1, -1, -1) if not units[j].action["calls"]
                           and value in extract_artifacts(units[j].action["text"])), None)
            if source is None or not (units[source].misattributed or units[source].restated):
                kept.append(value)
        u.task_conflicts = kept


# Words a failure message is made of in any app: an outcome that did not happen (not found,
# unable, denied, timed out) or a precondition unmet (missing, required, invalid, unknown).
_ERROR_WORDS = re.compile(
    r"\b(?:errors?|exception|traceback|fail(?:s|ed|ure)?|unable|cannot|can't|could ?n[o']t|"
    r"not (?:found|allowed|permitted|supported|available|valid|authori[sz]ed)|no such|does not exist|"
    r"missing|required|invalid|denied|forbidden|unauthori[sz]ed|insufficient|exceed(?:s|ed)?|"
    r"rejected|refused|timed? ?out|unavailable|unknown)\b", re.I)
# A statement that something is not so ("x is not packed", "isn't open", "no such box", "not
# yet booked", "not able to"), and a result's own verdict field written out ("ok: false", "success = no",
# "ok False" in a record laid out as prose, "data ok False" / "data.ok=false" under an envelope's
# field): generic English and generic field names, read only in a short text result (a tool's
# answer, not a listing).
_NEGATED = re.compile(
    r"\b(?:is|are|was|were|has|have|had|does|do|did|has been|have been)\s+not\b|"
    r"\b(?:is|are|was|were|has|have|had|does|do|did)n[\u2019']t\b|\bnot (?:yet|able)\b|\bno such\b|"
    r"(?:^|[;,\n{(])\s*(?:[\"']?\w+[\"']?\s*[.:]?\s*)?[\"']?(?:ok|success)[\"']?\s*[:=]?\s*(?:false|no)\b", re.I)
# A failure message is a line or two; a listing of records is longer.
_SHORT_RESULT_CHARS = 300


def _text_result(result: Any) -> str | None:
    """A tool result given as plain text (not JSON text): its stripped text, else None."""
    if not isinstance(result, str) or not result.strip():
        return None
    if result.lstrip()[:1] in "[{" and isinstance(from_json_text(result), (dict, list)):
        return None
    return result.strip()


# How far after a failed call its retry is looked for (steps): a retry comes soon, in the
# agent's own retry loop or after its report and the same request handed to it (or to
# another agent) again, and the bound keeps the reading linear in a long session.
_RETRY_WINDOW = 10


def _worded_as_failure(text: str | None) -> bool:
    return bool(text) and bool(_ERROR_WORDS.search(text) or _NEGATED.search(text))


def mark_error_shaped_results(units: list[TransitionUnit]) -> None:
    """Tool results that are failures returned as text rather than raised, read from their
    shape and from what the agent did next, not from the tool's vocabulary alone:

    - a short text result worded as a failure (error words, a negated statement, a verdict
      field saying no; not a record listing);
    - a short text result whose call the agent makes again as its next call, with nothing
      done in between but words (a retry at once, or after it reported and was handed the
      request again: the result was of no use to it), when the call answers in JSON this
      time (the first answer was the odd one out), or at once the same text again (a
      failure that does not go away) or a failure, or after words when the agent's answer
      in between was that text, relayed word for word, and the retry answered otherwise
      while no later step used a value of the first text: the agent passed on what its tool
      said, was asked again, and the run went on with what the retry gave (a record relayed
      and then lost to a timeout on the retry keeps its values in use, and is not read so);
    and, once one result is known for an error, the same text from the same tool elsewhere.
    Each such step becomes an error step (outcome "error_result"), as if the tool had raised."""
    flagged: set[tuple[str, str]] = set()
    last_use = {v: w.index for w in units for v in w.artifacts_consumed}  # value -> the last step using it
    for k, u in enumerate(units):
        if u.kind != "llm":
            continue
        # What the same call gave when the agent made it again as the session's next call.
        nxt = next((w for w in units[k + 1:k + 1 + _RETRY_WINDOW] if w.action["calls"]), None)
        again = {sig: f for sig, f in zip(nxt.call_signatures, nxt.feedback)} \
            if nxt is not None and nxt.agent == u.agent else {}
        at_once = nxt is not None and nxt.index == u.index + 1
        for sig, f in zip(u.call_signatures, u.feedback):
            text = None if f.get("error") else _text_result(f.get("result"))
            if text is None or len(text) > _SHORT_RESULT_CHARS:
                continue
            # JSON this time; or, at once, the same text again or a failure (other text at once
            # is a conversation, "noted", "noted twice", but a call that worked is not made
            # again at once only to fail). Other text after words is left alone: a timeout
            # then the record, and the record then a timeout, read alike once both are prose.
            retry = again.get(sig)
            answer = None if retry is None else (retry.get("error") or retry.get("result"))
            retried = retry is not None and (
                isinstance(answer, (dict, list))
                or (at_once and (answer == f.get("result") or bool(retry.get("error"))
                                 or _worded_as_failure(_text_result(answer))))
                or (not at_once and answer != f.get("result") and _relayed_then_dropped(units, k, nxt, text, last_use)))
            if retried or _worded_as_failure(text):
                flagged.add((f["tool"], normalize_error(text) or ""))
    if not flagged:
        return
    for u in units:
        if u.kind != "llm" or u.status == "error":
            continue
        for f in u.feedback:
            text = None if f.get("error") else _text_result(f.get("result"))
            if text is not None and (f["tool"], normalize_error(text) or "") in flagged:
                u.status, u.outcome = "error", "error_result"
                u.error_text = f"{f['tool']}: {text}"
                u.error_signature = normalize_error(u.error_text)
                break


def _relayed_then_dropped(units: list[TransitionUnit], k: int, retry: TransitionUnit, text: str,
                          last_use: dict[str, int]) -> bool:
    """Whether step k's agent answered with `text` (its tool's short text result) before
    `retry` made the call again, every word of it (`_WORD`, the module's words of three
    letters or more: its numbers and stamps aside, as an agent relays a message with its
    own), and no step from the retry on used a value of `text` that the call itself did not
    carry (`last_use`: value -> the last step using it, read once per session, so that the
    reading stays linear in the session's length)."""
    words = set(_WORD.findall(text.lower()))
    relayed = len(words) >= 2 and any(w.agent == units[k].agent and words <= set(_WORD.findall(w.action["text"].lower()))
                                      for w in units[k + 1:retry.index])  # a unit's index is its place in `units`
    if not relayed:
        return False
    return all(last_use.get(v, -1) < retry.index for v in extract_artifacts(text) - units[k].artifacts_consumed)


def mark_recovered_errors(units: list[TransitionUnit]) -> None:
    """Set `recovered_by` on an error step whose failed calls were made again with the same
    arguments within _RETRY_WINDOW steps, by its agent or another (a team may hand a failed
    request to another of its agents), and the retry did not fail the same way: each call
    returned a result this time, or the retry failed otherwise. Read from the calls
    alone, not from the error's words: whatever failed and then worked when asked again was
    transient (a retry, in the same turn or after the request was handed out again) or
    cleared by what happened in between, and a failure that the same calls did not meet
    again did not stop them (a timeout, then "only 3 on the shelf": the run lived with the
    second). Either way the step that made the calls first is no more where the run went
    wrong than the retry; a retry that fails the same way keeps the failure, and so does one
    that fails otherwise only on its way to failing the same way again (a refusal, a timeout
    on the retry, the refusal again). Read from the last step back, so that what became of
    each retry is known when the step before it is read."""
    for k in range(len(units) - 1, -1, -1):
        u = units[k]
        if u.status != "error" or not u.action["calls"]:
            continue
        failed = {sig for sig, f in zip(u.call_signatures, u.feedback) if f.get("error")} \
            or (set(u.call_signatures) if u.outcome == "error_result" else set())
        if not failed:
            continue
        later = next((w for w in units[k + 1:k + 1 + _RETRY_WINDOW] if failed & set(w.call_signatures)), None)
        if later is None or not failed <= set(later.call_signatures):
            continue  # not made again, or only some of the calls: nothing to read
        if later.status != "error":
            worked = {sig for sig, f in zip(later.call_signatures, later.feedback)
                      if f.get("result") is not None and not f.get("error")}
            if failed <= worked:
                u.recovered_by = later.index
            continue
        last = later  # where the retries of the same calls ended
        while last.recovered_by is not None:
            last = units[last.recovered_by]
        if not (last.status == "error" and last.error_signature == u.error_signature):
            u.recovered_by = later.index


def _request(u: TransitionUnit) -> tuple[set[str], set[str]]:
    """A hand-over's words (lower-cased) and its values: the artifacts and capitalized words
    it names (who and what the request is about)."""
    text = u.action["text"] + " " + " ".join(u.call_signatures if u.action["calls"] else [])
    words = {t.lower() for t in re.findall(r"[A-Za-z0-9][\w.-]*", text)}
    values = set(extract_artifacts(text)) | set(re.findall(r"\b[A-Z][a-z]+\b", text))
    return words, values


def _same_request(a: tuple[set[str], set[str]], b: tuple[set[str], set[str]]) -> bool:
    """The same values, and words that overlap at least _SAME_REQUEST (Jaccard)."""
    (wa, va), (wb, vb) = a, b
    return va == vb and len(wa & wb) >= _SAME_REQUEST * len(wa | wb)


# Two hand-overs naming the same values with words that overlap this much ask for the same work.
_SAME_REQUEST = 0.7
_MIN_REQUEST_TOKENS = 4


# A report's clauses: a value is read as said of the record its own clause names.
_CLAUSE = re.compile(r"\n|;|(?<=[.!?])\s+")
# Records per tool result read for restated fields, and how far back a call looks for them.
_MAX_FIELD_RECORDS = 50
_FIELD_LOOKBACK = 40


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def _is_key_value(value: Any) -> bool:
    """A value that names a record: one token mixing letters and digits ("ord_1c9e0",
    "sku:40-a"), whatever its separators."""
    return (isinstance(value, str) and 0 < len(value) <= _MAX_PHRASE and not any(c.isspace() for c in value)
            and any(c.isalpha() for c in value) and any(c.isdigit() for c in value))


def _result_dicts(result: Any) -> Iterator[dict[str, Any]]:
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


def _keyed_records(result: Any) -> list[dict[str, Any]]:
    """The dicts of a JSON tool result (or of a JSON text) that name a record: a key value
    among their scalar values."""
    named = (o for o in _result_dicts(result) if any(_is_key_value(v) for v in o.values()))
    return list(itertools.islice(named, _MAX_FIELD_RECORDS))


def _same_scalar(a: Any, b: Any) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a).strip().lower() == str(b).strip().lower()


def _phrase_at(text: str, phrase: str) -> re.Match | None:
    """Where `phrase` stands in `text` as a whole (case-insensitive), not inside a longer token."""
    return re.search(r"(?<![\w-])" + re.escape(phrase.strip().lower()) + r"(?![\w-])", text.lower())


def _says(text: str, value: Any) -> bool:
    """`text` states `value`: a number as a whole number token (not inside an id), a string
    as a whole phrase."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return any(_same_scalar(m.group(), value) for m in _WHOLE_NUMBER.finditer(plain_numbers(text)))
    return bool(str(value).strip()) and _phrase_at(text, str(value)) is not None


def _said_of(clause: str, key_value: str, value: Any, others: Sequence[Any] = ()) -> bool:
    """`clause` names the record `key_value` and says `value` of it: a string as a phrase
    anywhere in the clause; a number as the number written nearest the record's name ("2 x
    A1", "A1: 2"), leaving out numbers that are the record's other fields (`others`: its
    price is said of the price), so an ordinal or a price is not taken for it."""
    clause = plain_numbers(clause)
    at = _phrase_at(clause, key_value)
    if at is None:
        return False
    if not (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return _says(clause, value)
    numbers = [m for m in _WHOLE_NUMBER.finditer(clause) if (m.end() <= at.start() or m.start() >= at.end())
               and not any(_same_scalar(m.group(), v) for v in others)]
    if not numbers:
        return False
    nearest = min(numbers, key=lambda m: at.start() - m.end() if m.end() <= at.start() else m.start() - at.end())
    return _same_scalar(nearest.group(), value)


def mark_restated_fields(units: list[TransitionUnit], task: str = "") -> None:
    """Set `restated` on a report that gave a record's field another value than the tool
    result it reports on, when the team then acted on it.

    A call's arguments name their fields: when a call passes field f = v for record X (an id
    among its arguments) and an earlier tool result showed record X with f = w (w != v, and v
    none of X's values), the value changed on the way from the result to the call. If the
    agent that got that result later restated it in words that say v of X (in the clause that
    names X, and for a number the one written nearest X), and the task never said v, that
    report misread the result: "line 1: 3 x A1" of a line whose count is 2, and a
    reservation of 3 follows. The field's name comes from the call and the
    result themselves; nothing here knows what a field means."""
    # (step, agent, record) of the latest results' records (a JSON dict, or a line of a prose
    # result): how far back a call is compared.
    seen: deque[tuple[int, str, dict[str, Any] | str]] = deque(maxlen=_FIELD_LOOKBACK)
    for u in units:
        for call in u.action["calls"]:
            args = call.get("arguments")
            if not isinstance(args, dict):
                continue
            ids = {v for v in args.values() if _is_key_value(v)}
            if not ids:
                continue
            for step, agent, record in seen:
                if isinstance(record, str):  # a line of a prose result, read for this call's fields
                    record = _prose_record(record, list(args))
                    if len({v for v in record.values() if _is_key_value(v) and not _DATETIME.fullmatch(v)}) != 1:
                        continue  # it names two records: whose field it writes cannot be told
                named = ids & {v for v in record.values() if isinstance(v, str)}
                if not named or any(_is_key_value(v) and isinstance(record.get(k), str) and _is_key_value(record[k])
                                    and record[k] != v for k, v in args.items()):
                    continue  # (a call naming another id in one of the record's id fields is about another record)
                for key, value in args.items():
                    if (key not in record or isinstance(value, (dict, list, bool)) or value is None
                            or isinstance(record[key], (dict, list, bool))
                            or any(_same_scalar(v, value) for v in record.values() if not isinstance(v, (dict, list)))
                            or (isinstance(value, str) and (_is_key_value(value) or len(value) > _MAX_PHRASE))
                            or _says(task, value)):
                        continue
                    report = next((units[j] for j in range(step + 1, u.index)
                                   if units[j].agent == agent and not units[j].action["calls"]
                                   and any(_said_of(clause, x, value, [v for k, v in record.items() if k != key])
                                           for x in named for clause in _CLAUSE.split(units[j].action["text"]))),
                                  None)
                    if report is not None:
                        entry = f"{key} {value} for {sorted(named)[0]} (its result said {record[key]}; a later call used {value})"
                        if entry not in report.restated:
                            report.restated.append(entry)
        for f in u.feedback:
            if f.get("result") is not None and not f.get("error"):
                seen.extend((u.index, u.agent, record) for record in _keyed_records(f["result"]))
                seen.extend((u.index, u.agent, item) for item in _prose_items(f["result"]))


def _prose_items(result: Any) -> list[str]:
    """The items (lines, bulleted parts) of a plain-text tool result that name a record."""
    text = _text_result(result)
    if text is None:
        return []
    items = (item for item in _ITEM_BREAK.split(text)[:_MAX_TEXT_ITEMS]
             if any(_is_key_value(t) for t in _TEXT_TOKEN.findall(item)))
    return list(itertools.islice(items, _MAX_FIELD_RECORDS))


# A field written out in prose: its name's words ("unit_price", "unitPrice" -> "unit price"),
# an optional ":" or "=", then its value: a number, or the words up to the next separator.
_NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_PROSE_VALUE = r"\s*[:=]?\s*(-?\d[\d,]*(?:\.\d+)?(?![\w:-])|[^\s;,|()\[\]{}][^;,\n|]*?)\s*(?:[;,|\n]|$)"


def _prose_record(item: str, fields: Sequence[str]) -> dict[str, Any]:
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


def mark_failed_rounds(units: list[TransitionUnit]) -> None:
    """Set `round_failed` on the report of every round of work that was handed out again.

    A hand-over is a coordinator's step after which another agent speaks; its round runs
    until the hand-over's agent speaks again, and its report is the round's last text step.
    When the same agent later hands the same agent the same request again (nearly the same
    words) and no call of the round returned a usable result, the first round did not get
    the work done, whatever its report says: that report is a failure report. (A round whose
    calls succeeded and that is handed out again is repeated work, not a retry: no verdict.)
    Read from the conversation's structure alone: no wording, no names."""
    n = len(units)
    if single_agent(units):
        _mark_failed_own_rounds(units)
        return
    # Who hands work out: the hub of the conversation's shape (or an agent named as a
    # coordinator); a worker's report handed back is the end of a round, not a request.
    givers = hub_agents([u.agent for u in units]) | {u.agent for u in units if is_coordinator(u.agent)}
    speakers = [speaker_of(u.agent) for u in units]  # an agent talking to itself hands nothing over
    handovers = [k for k in range(n - 1) if units[k].agent in givers and speakers[k + 1] != speakers[k]
                 and (units[k].action["text"].strip() or units[k].action["calls"])]
    requests = {k: _request(units[k]) for k in handovers}
    # Only hand-overs between the same two agents about the same values can be the same request.
    alike: dict[tuple, list[int]] = {}
    for k in handovers:
        alike.setdefault((units[k].agent, units[k + 1].agent, frozenset(requests[k][1])), []).append(k)
    for h in handovers:
        if len(requests[h][0]) < _MIN_REQUEST_TOKENS:
            continue
        peers = alike[(units[h].agent, units[h + 1].agent, frozenset(requests[h][1]))]
        if not any(g > h and _same_request(requests[h], requests[g]) for g in peers):
            continue
        end = next((j for j in range(h + 1, n) if units[j].agent == units[h].agent), None)
        if end is None or end == h + 1:
            continue
        if _got_a_result(units[h + 1:end]):
            continue  # the round got something done: handing it out again repeats work, it does not retry it
        report = next((j for j in range(end - 1, h, -1) if in_words_only(units[j])), end - 1)
        units[report].round_failed = True


def _got_a_result(round_: list[TransitionUnit]) -> bool:
    """Whether a call of the round returned a usable result (one that is no error, empty or not)."""
    return any(u.status != "error" and u.outcome in ("result", "empty_result") for u in round_)


def _mark_failed_own_rounds(units: list[TransitionUnit]) -> None:
    """mark_failed_rounds for a single agent, whose hand-overs are its own words-only steps:
    when it says the same request to itself again and no call in between returned a usable
    result, the first words after the first saying (its report on that round) are a
    failure report, whatever they say."""
    said = [k for k in range(len(units)) if in_words_only(units[k])]
    requests = {k: _request(units[k]) for k in said}
    alike: dict[frozenset, list[int]] = {}  # only requests about the same values can be the same
    for i, k in enumerate(said):
        alike.setdefault(frozenset(requests[k][1]), []).append(i)
    for i, h in enumerate(said[:-2]):
        if len(requests[h][0]) < _MIN_REQUEST_TOKENS:
            continue
        again = next((said[j] for j in alike[frozenset(requests[h][1])]
                      if j > i + 1 and _same_request(requests[h], requests[said[j]])), None)
        if again is None or _got_a_result(units[h + 1:again]):
            continue
        units[said[i + 1]].round_failed = True


def _record_ids(records: list[Record]) -> list[set[str]]:
    """The ids among each record's values, in lower case as artifacts read them."""
    return [{v.lower() for v in values if isinstance(v, str) and _ID.fullmatch(v)} for _, values, _ in records]


def omitted_records(text: str, results: list[Any]) -> list[str]:
    """Ids of records that a summary of `results` leaves out although it names a sibling
    record (same fields) of the same result: an incomplete or misread listing."""
    named = extract_artifacts(text)
    out: set[str] = set()
    for result in results:
        records = _records(result)
        ids = _record_ids(records)
        unique = [mine - set().union(*(other for j, other in enumerate(ids) if j != i)) for i, mine in enumerate(ids)]
        mentioned = [bool(u & named) for u in unique]
        groups: dict[Any, list[int]] = {}
        for i, (shape, _, _) in enumerate(records):
            groups.setdefault(shape, []).append(i)
        for members in groups.values():
            if len(members) >= 2 and any(mentioned[i] for i in members):
                out |= {sorted(unique[i])[0] for i in members if unique[i] and not mentioned[i]}
    return sorted(out)


def dropped_findings(text: str, calls: list[tuple[Any, Any]]) -> list[str]:
    """Ids a call found (in its result, not in its arguments) that a summary naming the
    call's subject (an id among its arguments) relays none of: the summary speaks of what
    the call looked at and drops everything it found ("no transactions on A1" of a result
    that listed one). Read from the flow of values, so the result's layout does not matter."""
    named = extract_artifacts(text)
    out: set[str] = set()
    for arguments, result in calls:
        subject = {v for v in extract_artifacts(_values_text(arguments)) if _ID.fullmatch(v)}
        found = {v for v in extract_artifacts(_values_text(result) if not isinstance(result, str) else result)
                 if _ID.fullmatch(v)} - subject
        if subject & named and found and not found & named:
            out.add(sorted(found)[0])
    return sorted(out)


# A listing's item that can stand for a field's value: a short phrase, not a sentence.
_ITEM_SPLIT = re.compile(r"[,;:]")
_MAX_ITEM_WORDS = 4
_MIN_SUBJECT_CHARS = 3


def _looked_up(arguments: Any, result: Any) -> list[tuple[str, dict[str, Any]]]:
    """(subject, record) for each dict of `result` that has a field equal to one of the
    call's own string arguments: the record the call asked for, whatever its id looks like
    (a short argument, a page number or a flag, names no record)."""
    subjects = ([v for v in arguments.values() if isinstance(v, str) and len(v.strip()) >= _MIN_SUBJECT_CHARS]
                if isinstance(arguments, dict) else [])
    out: list[tuple[str, dict[str, Any]]] = []
    for o in itertools.islice(_result_dicts(result), _MAX_FIELD_RECORDS):
        subject = next((s for s in subjects for v in o.values() if _is_scalar(v) and _same_scalar(v, s)), None)
        if subject is not None:
            out.append((subject, o))
    return out


def misread_listings(text: str, calls: list[tuple[Any, Any]]) -> list[str]:
    """Fields of a looked-up record that a report lists with a phrase the result never gave:
    "#4472: delivered, Bristol, 0 attempts" of a record whose state was "out for delivery".

    The report reads as a listing of the record when a clause names it (a call's argument
    that a field of the result carries) and says at least two of its other fields. If
    exactly one of its text fields goes unsaid there and exactly one of the clause's items
    after the name says none of the record's values, that item stands where the field
    should be. The field's name comes from the result; nothing here knows what it means."""
    text = plain_numbers(text)
    out: list[str] = []
    for arguments, result in calls:
        for subject, record in _looked_up(arguments, result):
            fields = {k: v for k, v in record.items() if _is_scalar(v) and not _same_scalar(v, subject)}
            for clause in _CLAUSE.split(text):
                at = _phrase_at(clause, subject)
                if at is None:
                    continue
                said = {k for k, v in fields.items() if _says(clause, v)}
                unsaid = [k for k, v in fields.items() if k not in said and isinstance(v, str)
                          and not _is_key_value(v) and len(v) <= _MAX_PHRASE]
                if len(said) < 2 or len(unsaid) != 1:
                    continue
                items = (item.strip(" .!?()[]\"'") for item in _ITEM_SPLIT.split(clause[at.end():]))
                strays = [item for item in items if any(c.isalpha() for c in item)
                          and len(item.split()) <= _MAX_ITEM_WORDS and not any(_says(item, v) for v in fields.values())]
                if len(strays) == 1:
                    out.append(f"{unsaid[0]} {strays[0]} for {subject} (its result said {fields[unsaid[0]]})")
    return sorted(set(out))


# Where a task's request splits into parts: "deposit X into checking, then move 500 to savings".
_TASK_CLAUSE = re.compile(r"[,;\n]|(?<=[.!?])\s+")


# "and" / "then" joins two requests of a task where both sides name a value and the second
# starts with a word ("deposit CHK-5003 into his checking and then move $500 to his
# savings"); elsewhere it joins one request's objects ("Alice and Bob", "ACC-1 and ACC-2",
# "$500 and $300 from savings", "... and tell him the balance").
_JOINED_PARTS = re.compile(r"\s+(?:and\s+then|and|then)\s+", re.I)
_STARTS_WITH_WORD = re.compile(r"\s*[A-Za-z]+\b(?![-_:]?\d)")


def task_clauses_of(task: str) -> list[tuple[set[str], set[str]]]:
    """(values, lower-case words) of each clause of the task: split at punctuation, and at
    "and" / "then" where a second request starts (_JOINED_PARTS)."""
    out: list[tuple[set[str], set[str]]] = []
    for clause in _TASK_CLAUSE.split(plain_numbers(task)) if task else []:
        parts: list[tuple[set[str], str]] = []
        for part in _JOINED_PARTS.split(clause):
            values = extract_artifacts(part)
            if parts and not (values and parts[-1][0] and _STARTS_WITH_WORD.match(part)):
                before_values, before = parts.pop()  # the same request: join it back
                values, part = before_values | values, f"{before} and {part}"
            parts.append((values, part))
        out += [(values, {w.lower() for w in _WORD.findall(part)}) for values, part in parts if part.strip()]
    return out


def words_about(used: set[str], clauses: list[tuple[set[str], set[str]]]) -> set[str]:
    """The words of the task's clauses that name a value the action uses: the part of the task
    the action carries out, so a record type the task asks for elsewhere ("to his savings",
    of another part) is not taken for what this part asked. Empty when no clause names one."""
    return set().union(*(words for values, words in clauses if values & used))


def task_conflicts(used: set[str], results: list[Any], task_words: set[str]) -> list[str]:
    """The ids in `used` whose record contradicts the task's wording (see TransitionUnit)."""
    return _conflicts_in(used, [_records(result) for result in results] if used else [], task_words)


def _conflicts_in(used: set[str], record_lists: list[list[Record]], task_words: set[str]) -> list[str]:
    """task_conflicts over results already read into records (one list per result)."""
    out: set[str] = set()
    if not used:
        return []
    for records in record_lists:
        if len(records) < 2:
            continue
        words = [_words_of(values) for _, values, _ in records]
        owner_of = {}
        for v in used:
            owners = [i for i, (_, values, _) in enumerate(records) if any(str(x).lower() == v for x in values)]
            if len(owners) == 1:
                owner_of[v] = owners[0]
        for v, i in owner_of.items():
            siblings = [j for j in range(len(records)) if j != i and records[j][0] == records[i][0]]
            if not siblings or any(j in owner_of.values() for j in siblings):
                continue  # naming several siblings lists them; naming one chooses it
            mine = words[i] - set().union(*(words[j] for j in siblings))
            theirs = set().union(*(words[j] - words[i] for j in siblings))
            if mine and not (mine & task_words) and (theirs & task_words):
                out.add(v)
    return sorted(out)


def in_words_only(unit: TransitionUnit) -> bool:
    """A step in words only, no call (a report, an answer, an instruction, a plan)."""
    return bool(unit.action["text"].strip()) and not unit.action["calls"]


def single_agent(units: list[TransitionUnit]) -> bool:
    """An instrumented session of one agent: no one else hands it work, so its own
    words-only steps (a plan, a thought, an instruction to itself) do."""
    return bool(units) and all(u.kind == "llm" for u in units) and len({u.agent for u in units}) == 1


def _own_calls(units: list[TransitionUnit], agent: str) -> list[tuple[Any, Any]]:
    """(arguments, result) of `agent`'s calls that returned a result in its current block,
    newest first (see `_block`)."""
    out: list[tuple[Any, Any]] = []
    for u in reversed(units):
        if u.agent != agent or in_words_only(u):
            break
        out += [(c["arguments"], f["result"]) for c, f in zip(u.action["calls"], u.feedback)
                if f.get("result") is not None and not f.get("error")]
    return out


def _block(units: list[TransitionUnit], agent: str) -> tuple[int, set[str]]:
    """Where `agent`'s current block starts, and the tools it called in it. A block is the
    agent's steps since another agent spoke or since it last spoke in words only: a report
    covers the calls after the last report, so a single agent that plans, acts and reports
    in turn has one block per report, as a worker handed work by a coordinator has."""
    start = len(units)
    while start > 0 and units[start - 1].agent == agent and not in_words_only(units[start - 1]):
        start -= 1
    return start, {c["name"] for u in units[start:] for c in u.action["calls"]}


# How many results of the same lookup, on each side of a report, it is compared with.
_OTHER_RESULTS = 20


def _other_results(fetched: dict[tuple[str, str], tuple[list[int], list[Any]]], agent: str, tools: set[str],
                   start: int, end: int) -> list[Any]:
    """Results of `agent`'s calls to `tools` outside the steps start..end (its block and
    its report): the nearest _OTHER_RESULTS before and after, per tool."""
    out: list[Any] = []
    for tool in sorted(tools):
        steps_of, results_of = fetched.get((agent, tool), ([], []))
        lo, hi = bisect.bisect_left(steps_of, start), bisect.bisect_right(steps_of, end)
        out += results_of[max(0, lo - _OTHER_RESULTS):lo] + results_of[hi:hi + _OTHER_RESULTS]
    return out


_WORD = re.compile(r"[A-Za-z][A-Za-z_-]{2,}")


def _words_of(values: list) -> set[str]:
    return {str(v).lower() for v in values if isinstance(v, str) and _WORD.fullmatch(v)}


# A record: (shape, values, listed). Records of one shape are siblings (the same kind of
# thing); `listed`: an item of a listing (a JSON list, a text line after the first).
Record = tuple[Any, list, bool]


def _records(obj: Any) -> list[Record]:
    """The records of a tool result, each with its own scalar values: every non-empty dict of
    a JSON value (its shape: its keys), and every line or list item of a plain-text result
    (text_records), so a result reads the same whether the tool answered in JSON or prose."""
    out: list[Record] = []

    def walk(o: Any, in_list: bool = False) -> None:
        if isinstance(o, dict):
            values = [v for v in o.values() if _is_scalar(v)]
            if values:
                out.append((frozenset(k for k, v in o.items() if _is_scalar(v)), values, in_list))
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
_TEXT_TOKEN = re.compile(_ID_TOKEN.pattern + r"|[^\s;,:|()\[\]{}]+")
# Two items whose token sequences (values blanked) match this much share a template: siblings.
_SAME_TEMPLATE = 0.6
_RUN_ON_MIN = 6
_RUN_ON_SHARE = 0.75
_MAX_TEXT_ITEMS = 200


def _is_value(token: str) -> bool:
    """An id or a number (a price, an amount, a date's parts, a "#4471"), not a word."""
    token = token.lstrip("#")
    return bool(_ID_TOKEN.fullmatch(token) or _NUMBER.fullmatch(token.lstrip("$€£").rstrip("%")))


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


def misattributed_values(text: str, results: list[Any], others: list[Any] = ()) -> list[str]:
    """Words that a line of `text` attaches to a record of `results` (named by an id unique
    to that record) but that belong to a sibling record and not to it. A value of several
    words ("on hold at the gate") counts as said when the line says it as a phrase. Siblings
    are the record's own result's records of the same shape, and the records of `others`
    results of the same shape (the same lookup made for other values, before or after: a
    report that reads one lookup's answer into another); a line about one of theirs is not read."""
    own = _records(results)
    records = own + (_records(list(others)) if others else [])
    if len(records) < 2 or not own:
        return []
    ids = [extract_artifacts(" ".join(str(v) for v in values)) for _, values, _ in records]
    owners: dict[str, list[int]] = {}
    for i, found in enumerate(ids):
        for a in found:
            owners.setdefault(a, []).append(i)
    words = [_words_of(values) for _, values, _ in records]
    phrases = [_phrases_of(values) for _, values, _ in records]
    out: list[str] = []
    for line in re.split(r"\n|\s-\s|;", text):
        named = {i for a in extract_artifacts(line) for i in owners.get(a, []) if len(owners[a]) == 1}
        if len(named) != 1:
            continue
        (i,) = named
        if i >= len(own):
            continue
        said = {w.lower() for w in _WORD.findall(line)}
        flat = " ".join(line.lower().split())
        for j in range(len(records)):
            # A sibling: the same kind of record, in this result or in a like one of the same lookup.
            if j != i and (records[j][0] == records[i][0] or (j >= len(own) and _same_template(records[j][0], records[i][0]))):
                out += sorted((words[j] - words[i]) & said)
                out += sorted(p for p in phrases[j] - phrases[i] if _phrase_at(flat, p))
    return sorted(set(out))


# A value of several words and nothing else ("held at depot", "on hold"), no longer than this.
_PHRASE = re.compile(r"[A-Za-z][A-Za-z'-]*(?:\s+[A-Za-z][A-Za-z'-]*)+")
_MAX_PHRASE = 60


def _phrases_of(values: list) -> set[str]:
    return {" ".join(v.lower().split()) for v in values
            if isinstance(v, str) and len(v) <= _MAX_PHRASE and _PHRASE.fullmatch(v.strip())}


def _runs_on(template: Sequence[str], blanked: Sequence[str]) -> bool:
    """`blanked` (an item's tokens, values blanked) is an item of `template`, of at least
    _RUN_ON_MIN tokens, that runs on: its start matches nearly all of the template and more
    follows, the last item of a listing carrying its parent's fields on the same line
    ("- qty 1; sku B2; paid 9.50; status open")."""
    if len(template) < _RUN_ON_MIN or len(blanked) <= len(template):
        return False
    head = difflib.SequenceMatcher(None, template, blanked[:len(template)], autojunk=False)
    return sum(block.size for block in head.get_matching_blocks()) >= _RUN_ON_SHARE * len(template)


def _same_template(a: Any, b: Any) -> bool:
    """Two records' shapes from two text results: their templates match (see text_records)."""
    return (isinstance(a, tuple) and isinstance(b, tuple) and a[:1] == b[:1] == ("text",)
            and difflib.SequenceMatcher(None, a[1], b[1], autojunk=False).ratio() >= _SAME_TEMPLATE)


# A summary's items: lines, bullets, clauses, sentences.
_SEGMENT_BREAK = re.compile(r"\n|\s-\s|;|(?<=[.!?])\s+")
# A number as a whole token (not a part of an id such as ab-12 or 12x, nor of 1.5.2).
_WHOLE_NUMBER = re.compile(r"(?<![\w.:-])-?\d+(?:\.\d+)?(?![\w:-]|\.\d)")


def mispaired_numbers(text: str, results: list[Any]) -> list[str]:
    """Numbers that an item of a summary pairs with a record of `results` (named by an id
    unique to it among its siblings) but that are a sibling's values and not its own: every
    value of the summary is in the result, only the pairing is wrong ("2 x B" where the
    result has 2 of A and 1 of B). Small numbers count too (quantities); the item's own
    ordinal in the summary ("item 2: ...") is a list marker, not a value."""
    records = _records(results)
    shapes: dict[Any, int] = {}
    for shape, _, _ in records:
        shapes[shape] = shapes.get(shape, 0) + 1
    listed = [i for i, (shape, _, _) in enumerate(records) if shapes[shape] >= 2]
    if len(listed) < 2:
        return []
    owners: dict[str, list[int]] = {}
    numbers: dict[int, set[str]] = {}
    for i in listed:
        values = records[i][1]
        for a in {v for v in extract_artifacts(" ".join(str(v) for v in values)) if _ID.fullmatch(v)}:
            owners.setdefault(a, []).append(i)
        numbers[i] = {_canonical_number(str(v)) for v in values
                      if not isinstance(v, bool) and _NUMBER.fullmatch(str(v).strip())}
    out: set[str] = set()
    ordinal = 0
    for segment in _SEGMENT_BREAK.split(text):
        named = {i for a in extract_artifacts(segment) for i in owners.get(a, ()) if len(owners[a]) == 1}
        if len(named) != 1:
            continue
        ordinal += 1
        (i,) = named
        said = {_canonical_number(m.group()) for m in _WHOLE_NUMBER.finditer(plain_numbers(segment))} - {str(ordinal)}
        siblings = set().union(*(numbers[j] for j in listed if j != i and records[j][0] == records[i][0]))
        out |= (said & siblings) - numbers[i]
    return sorted(out)


def _unit_from_llm(step: dict, pos: int, is_last: bool, task: str | None, hubs: set[str] = frozenset(),
                   structured_tools: set[str] = frozenset()) -> TransitionUnit:
    out = step.get("output_message") or {}
    text = content_text(out.get("content"))
    reasoning = content_text(out.get("reasoning_content") or out.get("reasoning") or "")
    calls: list[dict] = []
    feedback: list[dict] = []
    for tc in step.get("tool_calls") or []:
        args = from_json_text(tc.get("arguments"))
        calls.append({"name": tc.get("name") or "", "arguments": args})
        feedback.append({"tool": tc.get("name") or "", "result": tc.get("result"), "error": tc.get("error")})
    if not calls:  # a call requested but never executed still counts as the action
        for tc in out.get("tool_calls") or []:
            fn = tc.get("function") or {}
            calls.append({"name": fn.get("name") or "", "arguments": from_json_text(fn.get("arguments"))})
    agent = step.get("agent") or "agent"
    phase = _phase_for_llm(agent, text, calls, is_last, agent in hubs or is_coordinator(agent))

    errors = [f"{f['tool']}: {f['error']}" for f in feedback if f.get("error")]
    result_errors = [f"{f['tool']}: {e}" for f in feedback if not f.get("error")
                     and (e := _result_error(f.get("result")) or _off_shape_result(f.get("result"), f["tool"], structured_tools))]
    step_error = step.get("error")
    error_text = step_error or (errors + result_errors or [None])[0]
    if step_error or errors:
        outcome = "exception"
    elif result_errors:
        outcome = "error_result"
    elif feedback and all(_is_empty_result(f.get("result")) for f in feedback):
        outcome = "empty_result"
    elif feedback:
        outcome = "result"
    else:
        outcome = "none"
    status = "error" if error_text else ("empty" if not text.strip() and not calls else "ok")

    produced = extract_artifacts(_values_text([f.get("result") for f in feedback]))
    produced |= extract_artifacts(" ".join(str(f.get("error") or "") for f in feedback))
    produced |= extract_artifacts(text)  # a plan or instruction hands values on too
    consumed = extract_artifacts(_values_text([c["arguments"] for c in calls]))
    consumed |= extract_artifacts(text)
    return TransitionUnit(
        index=pos, kind="llm", agent=agent, phase=phase, status=status, outcome=outcome,
        observation=_observation(step.get("input_messages") or []), belief=reasoning or text,
        action={"text": text, "calls": calls}, feedback=feedback,
        tool=calls[0]["name"] if calls else None, tools=[c["name"] for c in calls],
        call_signatures=[f"{c['name']}({_compact(c['arguments'])})" for c in calls]
        or [sig for sig in [_text_signature(agent, text)] if sig],
        error_signature=normalize_error(error_text), error_text=str(error_text) if error_text else None,
        artifacts_produced=produced, artifacts_consumed=consumed,
        unsupported=unsupported_in(_used_values(calls, text),
                                   (task or "") + "\n" + _context_text(step.get("input_messages") or [])),
        input_tokens=int(step.get("input_tokens") or 0), output_tokens=int(step.get("output_tokens") or 0),
        output_length=len(text) + sum(len(s) for s in (_compact(c["arguments"]) for c in calls)),
        claims_success=bool(_SUCCESS_CLAIM.search(text)), claims_failure=bool(_FAILURE_CLAIM.search(text)),
    )


def _message_calls(tool_calls: Any) -> list[dict]:
    """The tool calls an OpenAI-format log keeps on an assistant's message, as {name,
    arguments}; an imported log is the user's file, so anything not shaped like a call is
    skipped rather than trusted."""
    calls = []
    for tc in tool_calls if isinstance(tool_calls, list) else []:
        fn = tc.get("function") if isinstance(tc, dict) else None
        fn = fn if isinstance(fn, dict) else tc
        if isinstance(fn, dict):
            calls.append({"name": str(fn.get("name") or ""), "arguments": from_json_text(fn.get("arguments"))})
    return calls


def _unit_from_message(step: dict, pos: int, is_last: bool) -> TransitionUnit:
    """An imported message: the message is the action; a tool/function message is also feedback."""
    msg = step.get("output_message") if isinstance(step.get("output_message"), dict) else {}
    text = content_text(msg.get("content") if msg else step.get("content"))
    role = (msg.get("role") if msg else None) or step.get("role") or ""
    agent = step.get("agent") or msg.get("name") or role or "agent"
    phase = _phase_for_message(role, agent, text, is_last)
    error_text = step.get("error") or _message_error(text)
    is_tool_output = role.lower() in {"tool", "function", "ipython"} or bool(_TOOL_SPEAKER.search(agent))
    if error_text:
        outcome = "exception" if is_tool_output else "error_result"
    elif is_tool_output:
        outcome = "empty_result" if not text.strip() else "result"
    else:
        outcome = "none"
    calls = [] if is_tool_output else _message_calls(msg.get("tool_calls"))
    if calls and phase != "answer":
        phase = "instruct" if all(_DELEGATION_TOOL.search(c["name"]) for c in calls) else "act"
    status = "error" if error_text else ("empty" if not text.strip() and not calls else "ok")
    artifacts = extract_artifacts(text)
    # A message both hands values on (produced) and uses values it was given (consumed).
    if is_tool_output:
        tools, signatures = [agent], []
    elif calls:
        tools = [c["name"] for c in calls]
        signatures = [f"{c['name']}({_compact(c['arguments'])})" for c in calls]
    else:
        tools, signatures = [], [sig for sig in [_text_signature(agent, text)] if sig]
    return TransitionUnit(
        index=pos, kind="message", agent=agent, phase=phase, status=status, outcome=outcome,
        observation="", belief=text, action={"text": text, "calls": calls},
        feedback=[{"tool": agent, "result": text, "error": error_text}] if is_tool_output else [],
        tool=tools[0] if tools else None, tools=tools,
        call_signatures=signatures,
        error_signature=normalize_error(error_text), error_text=error_text,
        artifacts_produced=artifacts, artifacts_consumed=(artifacts | _used_values(calls, "")) if calls else artifacts,
        input_tokens=int(step.get("input_tokens") or 0), output_tokens=int(step.get("output_tokens") or 0),
        output_length=len(text) + sum(len(_compact(c["arguments"])) for c in calls),
        claims_success=bool(_SUCCESS_CLAIM.search(text)), claims_failure=bool(_FAILURE_CLAIM.search(text)),
    )


_MESSAGE_ERROR = re.compile(
    r"^(?:.*\b)?((?:[A-Z][a-zA-Z]+(?:Error|Exception))\b[^\n]*|Traceback \(most recent call last\)[^\n]*"
    r"|(?i:error|failed|failure)\s*:[^\n]*)", re.M)


def _message_error(text: str) -> str | None:
    lowered = (text or "").lower()  # every branch of the pattern needs one of these words: skip the slow scan
    if not any(word in lowered for word in ("error", "exception", "traceback", "fail")):
        return None
    m = _MESSAGE_ERROR.search(text or "")
    return m.group(1).strip()[:300] if m else None
