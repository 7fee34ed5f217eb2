"""Seed s's warehouse (:mod:`tracefix.demo.variants`): the fixture's customers renamed, its
order, item, parcel and refund numbers and its depots redrawn, shelf counts raised by up to six
and prices redrawn (each order paid what its lines cost), all from the seed; seed 0 is the
fixture itself (:data:`tracefix.demo.warehouse_world.INITIAL_STATE`). Item names, parcel states
and quantities ordered stay the fixture's, so every ticket can still be worked.
"""
from __future__ import annotations

import json
from typing import Any

from .variants import TOWNS, Content, Worlds, draw_names, name_words, rng, swap
from .warehouse_world import INITIAL_STATE

SPREAD = (0.8, 1.25)  # how far a drawn price lies from the fixture's


def _draw(seed: int) -> Content:
    draws = rng("warehouse", seed)
    fixture = INITIAL_STATE
    orders = sorted(fixture["orders"])
    words = name_words([fixture["orders"][o]["customer"] for o in orders], draw_names(draws, len(orders)))
    refs = orders + sorted(p["order_ref"] for p in fixture["parcels"].values())
    words.update({o: f"ord_{n:05x}" for o, n in zip(refs, draws.sample(range(16 ** 5), len(refs)))})
    skus = sorted(fixture["stock"])
    drawn_skus = draws.sample([f"sku:{n:02d}-{c}" for n in range(10, 100) for c in "abcdefghkmnprt"], len(skus))
    words.update(dict(zip(skus, drawn_skus)))
    next_parcel = draws.randrange(2000, 9000)
    parcels = sorted(fixture["parcels"])
    words.update({p: f"#{n}" for p, n in zip(parcels, draws.sample(range(1000, next_parcel), len(parcels)))})
    depots = sorted({p["depot"] for p in fixture["parcels"].values()})
    words.update(dict(zip(depots, draws.sample(TOWNS, len(depots)))))
    state = json.loads(swap(json.dumps(fixture), words))
    for row in state["stock"].values():
        row["on_hand"] += draws.randrange(0, 7)
        row["price_cents"] = round(row["price_cents"] * draws.uniform(*SPREAD))
    for order in state["orders"].values():
        order["paid_cents"] = sum(line["qty"] * state["stock"][line["sku"]]["price_cents"] for line in order["lines"])
    state["next_parcel"] = next_parcel
    state["next_refund"] = draws.randrange(10, 100)
    return Content(seed, state, words)


content = Worlds(INITIAL_STATE, _draw)  # content(seed): seed `seed`'s warehouse


def world_beside(value: str) -> dict[str, Any]:
    """The world an order, item or parcel id belongs to (the latest drawn one that has it; the
    fixture's when none does): where a plausible wrong id is picked from."""
    return content.holding(lambda state: value in state["orders"] or value in state["stock"] or value in state["parcels"])
