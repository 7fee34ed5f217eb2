"""A step's report read against the records its own tool calls returned: values attached
to the wrong record (`misattributed_values`, `mispaired_numbers`), records left out
(`omitted_records`, `dropped_findings`), fields restated with another value than the
result gave (`misread_listings`, `mark_restated_fields`).
"""
from __future__ import annotations

import itertools
import re
from collections import deque
from typing import Any, Sequence

from .records import (MAX_FIELD_RECORDS, MAX_PHRASE, is_key_value, is_scalar, keyed_records, prose_items, prose_record,
                      record_ids, records_of, result_dicts, same_template)
from .transition_unit import TransitionUnit
from .values import (DATETIME, ID_TOKEN, NUMBER, WORD, canonical_number, extract_artifacts, plain_numbers, values_text,
                     words_of)


# A report's clauses: a value is read as said of the record its own clause names.
CLAUSE = re.compile(r"\n|;|(?<=[.!?])\s+")
_FIELD_LOOKBACK = 40


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
            ids = {v for v in args.values() if is_key_value(v)}
            if not ids:
                continue
            for step, agent, record in seen:
                if isinstance(record, str):  # a line of a prose result, read for this call's fields
                    record = prose_record(record, list(args))
                    if len({v for v in record.values() if is_key_value(v) and not DATETIME.fullmatch(v)}) != 1:
                        continue  # it names two records: whose field it writes cannot be told
                named = ids & {v for v in record.values() if isinstance(v, str)}
                if not named or any(is_key_value(v) and isinstance(record.get(k), str) and is_key_value(record[k])
                                    and record[k] != v for k, v in args.items()):
                    continue  # (a call naming another id in one of the record's id fields is about another record)
                for key, value in args.items():
                    if (key not in record or isinstance(value, (dict, list, bool)) or value is None
                            or isinstance(record[key], (dict, list, bool))
                            or any(_same_scalar(v, value) for v in record.values() if not isinstance(v, (dict, list)))
                            or (isinstance(value, str) and (is_key_value(value) or len(value) > MAX_PHRASE))
                            or _says(task, value)):
                        continue
                    report = next((units[j] for j in range(step + 1, u.index)
                                   if units[j].agent == agent and not units[j].action["calls"]
                                   and any(_said_of(clause, x, value, [v for k, v in record.items() if k != key])
                                           for x in named for clause in CLAUSE.split(units[j].action["text"]))),
                                  None)
                    if report is not None:
                        entry = f"{key} {value} for {sorted(named)[0]} (its result said {record[key]}; a later call used {value})"
                        if entry not in report.restated:
                            report.restated.append(entry)
        for f in u.feedback:
            if f.get("result") is not None and not f.get("error"):
                seen.extend((u.index, u.agent, record) for record in keyed_records(f["result"]))
                seen.extend((u.index, u.agent, item) for item in prose_items(f["result"]))


def omitted_records(text: str, results: list[Any]) -> list[str]:
    """Ids of records that a summary of `results` leaves out although it names a sibling
    record (same fields) of the same result: an incomplete or misread listing."""
    named = extract_artifacts(text)
    out: set[str] = set()
    for result in results:
        records = records_of(result)
        ids = record_ids(records)
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
        subject = {v for v in extract_artifacts(values_text(arguments)) if ID_TOKEN.fullmatch(v)}
        found = {v for v in extract_artifacts(values_text(result) if not isinstance(result, str) else result)
                 if ID_TOKEN.fullmatch(v)} - subject
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
    for o in itertools.islice(result_dicts(result), MAX_FIELD_RECORDS):
        subject = next((s for s in subjects for v in o.values() if is_scalar(v) and _same_scalar(v, s)), None)
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
            fields = {k: v for k, v in record.items() if is_scalar(v) and not _same_scalar(v, subject)}
            for clause in CLAUSE.split(text):
                at = _phrase_at(clause, subject)
                if at is None:
                    continue
                said = {k for k, v in fields.items() if _says(clause, v)}
                unsaid = [k for k, v in fields.items() if k not in said and isinstance(v, str)
                          and not is_key_value(v) and len(v) <= MAX_PHRASE]
                if len(said) < 2 or len(unsaid) != 1:
                    continue
                items = (item.strip(" .!?()[]\"'") for item in _ITEM_SPLIT.split(clause[at.end():]))
                strays = [item for item in items if any(c.isalpha() for c in item)
                          and len(item.split()) <= _MAX_ITEM_WORDS and not any(_says(item, v) for v in fields.values())]
                if len(strays) == 1:
                    out.append(f"{unsaid[0]} {strays[0]} for {subject} (its result said {fields[unsaid[0]]})")
    return sorted(set(out))


def misattributed_values(text: str, results: list[Any], others: list[Any] = ()) -> list[str]:
    """Words that a line of `text` attaches to a record of `results` (named by an id unique
    to that record) but that belong to a sibling record and not to it. A value of several
    words ("on hold at the gate") counts as said when the line says it as a phrase. Siblings
    are the record's own result's records of the same shape, and the records of `others`
    results of the same shape (the same lookup made for other values, before or after: a
    report that reads one lookup's answer into another); a line about one of theirs is not read."""
    own = records_of(results)
    records = own + (records_of(list(others)) if others else [])
    if len(records) < 2 or not own:
        return []
    ids = [extract_artifacts(" ".join(str(v) for v in values)) for _, values, _ in records]
    owners: dict[str, list[int]] = {}
    for i, found in enumerate(ids):
        for a in found:
            owners.setdefault(a, []).append(i)
    words = [words_of(values) for _, values, _ in records]
    phrases = [_phrases_of(values) for _, values, _ in records]
    out: list[str] = []
    for line in re.split(r"\n|\s-\s|;", text):
        named = {i for a in extract_artifacts(line) for i in owners.get(a, []) if len(owners[a]) == 1}
        if len(named) != 1:
            continue
        (i,) = named
        if i >= len(own):
            continue
        said = {w.lower() for w in WORD.findall(line)}
        flat = " ".join(line.lower().split())
        for j in range(len(records)):
            # A sibling: the same kind of record, in this result or in a like one of the same lookup.
            if j != i and (records[j][0] == records[i][0] or (j >= len(own) and same_template(records[j][0], records[i][0]))):
                out += sorted((words[j] - words[i]) & said)
                out += sorted(p for p in phrases[j] - phrases[i] if _phrase_at(flat, p))
    return sorted(set(out))


# A value of several words and nothing else ("held at depot", "on hold"), no longer than this.
_PHRASE = re.compile(r"[A-Za-z][A-Za-z'-]*(?:\s+[A-Za-z][A-Za-z'-]*)+")


def _phrases_of(values: list) -> set[str]:
    return {" ".join(v.lower().split()) for v in values
            if isinstance(v, str) and len(v) <= MAX_PHRASE and _PHRASE.fullmatch(v.strip())}


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
    records = records_of(results)
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
        for a in {v for v in extract_artifacts(" ".join(str(v) for v in values)) if ID_TOKEN.fullmatch(v)}:
            owners.setdefault(a, []).append(i)
        numbers[i] = {canonical_number(str(v)) for v in values
                      if not isinstance(v, bool) and NUMBER.fullmatch(str(v).strip())}
    out: set[str] = set()
    ordinal = 0
    for segment in _SEGMENT_BREAK.split(text):
        named = {i for a in extract_artifacts(segment) for i in owners.get(a, ()) if len(owners[a]) == 1}
        if len(named) != 1:
            continue
        ordinal += 1
        (i,) = named
        said = {canonical_number(m.group()) for m in _WHOLE_NUMBER.finditer(plain_numbers(segment))} - {str(ordinal)}
        siblings = set().union(*(numbers[j] for j in listed if j != i and records[j][0] == records[i][0]))
        out |= (said & siblings) - numbers[i]
    return sorted(out)
