"""Seed s's bank (:mod:`tracefix.demo.variants`): the fixture's customers renamed, its customer,
account, check and transaction ids renumbered and its balances and check amounts redrawn, all
from the seed; seed 0 is the fixture itself (:data:`tracefix.demo.db.INITIAL_STATE`).

Each customer keeps two consecutive account numbers (an odd and the next even one), as in the
fixture, and every transfer of a task stays within what its source holds (balances move by at
most a quarter, the tasks' amounts too).
"""
from __future__ import annotations

import json
import re

from .db import INITIAL_STATE
from .variants import Content, Worlds, draw_names, name_words, rng, swap

SPREAD = (0.8, 1.25)  # how far a drawn balance or amount lies from the fixture's


def _draw(seed: int) -> Content:
    draws = rng("bank", seed)
    fixture = INITIAL_STATE
    customers = sorted(fixture["customers"])
    words = name_words([fixture["customers"][c]["name"] for c in customers], draw_names(draws, len(customers)))
    words.update({c: f"CUST-{n:03d}" for c, n in zip(customers, draws.sample(range(100, 1000), len(customers)))})
    base = 2 * draws.randrange(1000, 4990)  # even: ACC-(base+1), ACC-(base+2) are one customer's, as 1001/1002
    words.update({a: f"ACC-{base + i}" for i, a in enumerate(sorted(fixture["accounts"]), 1)})
    checks = sorted(fixture["checks"])
    words.update({c: f"CHK-{n}" for c, n in zip(checks, draws.sample(range(1000, 10000), len(checks)))})
    first_tx = draws.randrange(1, 5000)
    words.update({t["id"]: f"TX-{first_tx + i:04d}" for i, t in enumerate(fixture["transactions"])})
    state = json.loads(swap(json.dumps(fixture), words))
    for record, key in ([(a, "balance_cents") for a in state["accounts"].values()]
                        + [(c, "amount_cents") for c in state["checks"].values()]
                        + [(t, "amount_cents") for t in state["transactions"]]):
        record[key] = round(record[key] * draws.uniform(*SPREAD))
    state["next_tx"] = first_tx + len(fixture["transactions"])
    return Content(seed, state, words)


content = Worlds(INITIAL_STATE, _draw)  # content(seed): seed `seed`'s bank


def task_words(seed: int, task_id: str, text: str) -> dict[str, str]:
    """The dollar amounts a task's text states ($200, $200.00, $75.25), each redrawn for this seed
    (one draw per amount, written the ways the text writes it)."""
    if not seed:
        return {}
    draws = rng("bank", seed, task_id)
    words = {}
    for value in sorted({float(a) for a in re.findall(r"\$(\d+(?:\.\d+)?)", text)}):
        drawn = value * draws.uniform(*SPREAD)
        if value.is_integer():
            words.update({f"${value:g}": f"${round(drawn)}", f"${value:.2f}": f"${round(drawn)}.00"})
        else:
            words[f"${value:.2f}"] = f"${drawn:.2f}"
    return words


def accounts_beside(account_id: str) -> dict[str, dict]:
    """The accounts of the world `account_id` belongs to (the latest drawn one that has it; the
    fixture's when none does): where a plausible wrong account is picked from."""
    return content.holding(lambda state: account_id in state["accounts"])["accounts"]
