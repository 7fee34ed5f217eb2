"""Fresh content per seed for the demo testbeds: a task id ``t03@5`` (``w07@5``) is task t03's
template played on seed 5's world, with its customers, names, ids and amounts drawn from the
seed; ``t03`` (seed 0) is the hand-written fixture. Without this, a benchmark's "unseen" seed
only re-sampled (task, fault kind, step) over the same few sessions, so a test session could
be word for word one the ranker was trained on.

A variant is the hand-written task with its words swapped (:func:`swap`: one pass, so a drawn
id that equals another fixture id is never swapped twice); the world it runs on is drawn by its
domain (:mod:`tracefix.demo.bank_content`, :mod:`tracefix.demo.warehouse_content`). What the
reward checks follows from the variant's fault-free run, whose answer is the template's answer
with the variant's values: each required output is taken at the same place in it as in the
fixture's answer (:func:`outputs_at_same_place`).
"""
from __future__ import annotations

import dataclasses
import random
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

SEPARATOR = "@"

FIRST_NAMES = ("Maya", "Ravi", "Sofia", "Jonas", "Amara", "Luca", "Hana", "Omar", "Elena", "Tariq", "Nina", "Pavel",
               "Zara", "Felix", "Leila", "Marco", "Aiko", "Diego", "Freya", "Kwame", "Ines", "Hugo", "Priya", "Sven",
               "Yara", "Theo", "Noor", "Emil", "Rosa", "Idris")
LAST_NAMES = ("Ortiz", "Nakamura", "Lindqvist", "Okoye", "Moreau", "Castillo", "Novak", "Haddad", "Brennan", "Sato",
              "Kowalski", "Mensah", "Ferreira", "Holm", "Rahman", "Dubois", "Keller", "Varga", "Quinn", "Abara",
              "Petrov", "Nilsen", "Barros", "Iyer", "Walsh", "Takeda", "Rossi", "Eklund", "Amadi", "Lund")
TOWNS = ("Carlisle", "Exeter", "Halifax", "Ipswich", "Lancaster", "Norwich", "Preston", "Swindon", "Truro", "Wigan",
         "Bolton", "Dundee", "Hereford", "Kendal", "Oldham", "Ripon")


@dataclass(frozen=True)
class Content:
    """One seed's world of a domain."""
    seed: int
    state: dict[str, Any]  # what every run on this seed starts from
    words: dict[str, str]  # a fixture name or id -> this world's


class Worlds:
    """One domain's worlds: each seed's drawn once by `draw(seed)`; seed 0 is the fixture."""

    def __init__(self, fixture: dict[str, Any], draw: Callable[[int], Content]):
        self.fixture, self._draw = fixture, draw
        self._drawn: dict[int, Content] = {}

    def __call__(self, seed: int) -> Content:
        if seed not in self._drawn:
            self._drawn[seed] = self._draw(seed) if seed else Content(0, self.fixture, {})
        return self._drawn[seed]

    def holding(self, has: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The world that `has` a value: where a plausible wrong id of the same world is picked
        from. The fixture first, then drawn worlds by seed, never by the order they were drawn
        in: a fault must not depend on which tasks a process ran before (a drawn world may
        share an item id with the fixture)."""
        if has(self.fixture):
            return self.fixture
        return next((self._drawn[seed].state for seed in sorted(self._drawn) if has(self._drawn[seed].state)),
                    self.fixture)


def split_id(task_id: str) -> tuple[str, int]:
    """("t03", 5) for "t03@5"; ("t03", 0) for the fixture's "t03"."""
    base, sep, seed = task_id.partition(SEPARATOR)
    if not sep:
        return task_id, 0
    if not seed.isdigit():
        raise KeyError(f"a task variant is TASK{SEPARATOR}SEED with a non-negative integer seed, got {task_id!r}")
    return base, int(seed)


def variant_id(base: str, seed: int) -> str:
    """The id of task `base` on seed `seed`'s world (seed 0: the fixture itself)."""
    return base if seed == 0 else f"{base}{SEPARATOR}{seed}"


def by_id(task_id: str, fixtures: Mapping[str, Any], variant: Callable[[str, int], Any], what: str) -> Any:
    """The hand-written task of an id, or `variant(base, seed)` for TASK@SEED."""
    base, seed = split_id(task_id)
    if base not in fixtures:
        raise KeyError(f"unknown {what} {task_id!r}; known: {', '.join(fixtures)} (or ID{SEPARATOR}SEED)")
    return variant(base, seed) if seed else fixtures[base]


def scored(task_id: str, get: Callable[[str], Any], fault_free_outcome: Callable[[str], tuple]) -> Any:
    """The task with what its reward checks. A variant (t03@5) is scored as its hand-written
    task is: its gold actions are the world changes of its fault-free run (for the hand-written
    tasks these equal their own gold actions: tests/demo/test_variants.py) and its required
    outputs are read at their place in that run's answer."""
    task = get(task_id)
    base, seed = split_id(task_id)
    if not seed:
        return task
    fixture, (answer, changes) = get(base), fault_free_outcome(task_id)
    outputs = outputs_at_same_place(fault_free_outcome(base)[0], answer, fixture.required_outputs)
    return dataclasses.replace(task, gold_actions=changes, required_outputs=outputs)


def rng(domain: str, seed: int, *purpose: str) -> random.Random:
    """The seeded draws of one domain's world (or one of its tasks): the same seed, the same content."""
    return random.Random("|".join([domain, str(seed), *purpose]))


def draw_names(draws: random.Random, count: int) -> list[tuple[str, str]]:
    """`count` (first, last) names, no first name twice (texts say "Alice's", so a first name is a key)."""
    firsts = draws.sample(FIRST_NAMES, count)
    return [(first, draws.choice(LAST_NAMES)) for first in firsts]


def name_words(canonical: list[str], drawn: list[tuple[str, str]]) -> dict[str, str]:
    """What a text's names become: each full name, and each first name alone."""
    words: dict[str, str] = {}
    for full, (first, last) in zip(canonical, drawn):
        words[full] = f"{first} {last}"
        words[full.split()[0]] = first
    return words


def swap(text: str, words: dict[str, str]) -> str:
    """`text` with every whole occurrence of a key replaced by its value, in one pass."""
    if not words:
        return text
    keys = sorted(words, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w])(?:" + "|".join(re.escape(k) for k in keys) + r")(?![\w])")
    return pattern.sub(lambda m: words[m.group(0)], text)


# a value (an id, an amount, a count: anything with a digit) or a word or one other character
_TOKEN = re.compile(r"(?:[#\w\-]+:)*[#\w\-]*\d[\w\-]*(?::[\w\-]+)*(?:\.\d+)?|[A-Za-z]+|\S")


class VariantMismatch(ValueError):
    """The variant's answer does not have the fixture answer's shape (a drawn value of another length)."""


def outputs_at_same_place(fixture_answer: str, variant_answer: str, outputs: tuple[str, ...]) -> tuple[str, ...]:
    """The fixture's required outputs, each read at the same place in the variant's answer: both
    answers are one template filled with each world's values, so they have the same tokens in the
    same order, only the values differ."""
    ours, theirs = list(_TOKEN.finditer(fixture_answer)), list(_TOKEN.finditer(variant_answer))
    if len(ours) != len(theirs):
        raise VariantMismatch(f"{fixture_answer!r} and {variant_answer!r} differ in shape")
    words = [m.group(0).lower() for m in ours]
    found = []
    for output in outputs:
        wanted = [m.group(0).lower() for m in _TOKEN.finditer(output)]
        at = next((i for i in range(len(words) - len(wanted) + 1) if words[i:i + len(wanted)] == wanted), None)
        if at is None:
            raise VariantMismatch(f"required output {output!r} is not in the fixture's answer {fixture_answer!r}")
        found.append(variant_answer[theirs[at].start():theirs[at + len(wanted) - 1].end()])
    return tuple(found)
