"""Picks that conflict with the task or with the final answer: a record chosen whose
sibling the task's words describe (`task_conflicts`), and a pick for which the final answer
names another record (`mark_answer_conflicts`).
"""
from __future__ import annotations

import re
from typing import Any

from .agent_reports import CLAUSE
from .records import Record, record_ids, records_of
from .roles import in_words_only
from .transition_unit import TransitionUnit
from .values import ID_TOKEN, MIN_NUMBER_LEN, NUMBER, WORD, extract_artifacts, plain_numbers, words_of


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
                records = records_of(f["result"])
                shown.append((r, records, record_ids(records)))
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
    named = {v for v in extract_artifacts(units[final].action["text"]) if ID_TOKEN.fullmatch(v)}
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
    for clause in CLAUSE.split(units[final].action["text"]):
        said = extract_artifacts(clause)
        records = {v for v in said if v in shapes}
        for value in said:
            if not NUMBER.fullmatch(value) or len(value.lstrip("-").replace(".", "")) < MIN_NUMBER_LEN:
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
        out += [(values, {w.lower() for w in WORD.findall(part)}) for values, part in parts if part.strip()]
    return out


def words_about(used: set[str], clauses: list[tuple[set[str], set[str]]]) -> set[str]:
    """The words of the task's clauses that name a value the action uses: the part of the task
    the action carries out, so a record type the task asks for elsewhere ("to his savings",
    of another part) is not taken for what this part asked. Empty when no clause names one."""
    return set().union(*(words for values, words in clauses if values & used))


def task_conflicts(used: set[str], results: list[Any], task_words: set[str]) -> list[str]:
    """The ids in `used` whose record contradicts the task's wording (see TransitionUnit)."""
    return conflicts_in(used, [records_of(result) for result in results] if used else [], task_words)


def conflicts_in(used: set[str], record_lists: list[list[Record]], task_words: set[str]) -> list[str]:
    """task_conflicts over results already read into records (one list per result)."""
    out: set[str] = set()
    if not used:
        return []
    for records in record_lists:
        if len(records) < 2:
            continue
        words = [words_of(values) for _, values, _ in records]
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
