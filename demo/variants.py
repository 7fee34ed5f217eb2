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

import random
import re

SEPARATOR = "@"

FIRST_NAMES = ("Maya", "Ravi", "Sofia", "Jonas", "Amara", "Luca", "Hana", "Omar", "Elena", "Tariq", "Nina", "Pavel",
               "Zara", "Felix", "Leila", "Marco", "Aiko", "Diego", "Freya", "Kwame", "Ines", "Hugo", "Priya", "Sven",
               "Yara", "Theo", "Noor", "Emil", "Rosa", "Idris")
LAST_NAMES = ("Ortiz", "Nakamura", "Lindqvist", "Okoye", "Moreau", "Castillo", "Novak", "Haddad", "Brennan", "Sato",
              "Kowalski", "Mensah", "Ferreira", "Holm", "Rahman", "Dubois", "Keller", "Varga", "Quinn", "Abara",
              "Petrov", "Nilsen", "Barros", "Iyer", "Walsh", "Takeda", "Rossi", "Eklund", "Amadi", "Lund")
TOWNS = ("Carlisle", "Exeter", "Halifax", "Ipswich", "Lancaster", "Norwich", "Preston", "Swindon", "Truro", "Wigan",
         "Bolton", "Dundee", "Hereford", "Kendal", "Oldham", "Ripon")


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
