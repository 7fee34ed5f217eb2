"""The warehouse demo's tickets: what the customer wrote, the jobs a competent Dispatcher
hands out, the gold actions (replayed on a fresh world by the reward) and what the reply
must state.

Job notes and replies are templates over *facts the Dispatcher learned from the crew's
reports*, never over the fixture: ``<qty1:ord_7f3a2>`` is the quantity a crew member
reported for the order's first line, ``<paid:ord_9a06f>`` the sum the till reported,
``<parcel:ord_1c9e0>`` the tracking number the courier reported. A misread report therefore
travels into later notes and into the reply, as it would with a real LLM.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from .variants import by_id, swap, variant_id
from .warehouse_content import content


@dataclass(frozen=True)
class Job:
    crew: str  # who does it
    note: str  # the Dispatcher's note, a template (see the module docstring)
    line: str  # its checklist line
    tool: str  # the one tool the job is about
    # For look-ups: (fact kinds, the id asked about). The Dispatcher files what the report
    # says under the id it *asked about*, so a report about another id is believed.
    reads: tuple[tuple[str, ...], str] | None = None


@dataclass(frozen=True)
class Ticket:
    id: str
    text: str
    jobs: tuple[Job, ...]
    reply: str  # template
    gold_actions: tuple[tuple[str, dict], ...] = ()
    required_outputs: tuple[str, ...] = ()


def pull_up(order: str) -> Job:
    return Job("Stocker", f"@Stocker please pull up {order} with order_details and tell me what is on it.",
               f"Stocker: see what {order} holds", "order_details")


def put_aside(order: str, line: int) -> Job:
    return Job("Stocker", f"@Stocker for {order}, reserve <qty{line}:{order}> x <sku{line}:{order}>.",
               f"Stocker: set aside line {line} of {order}", "reserve")


def ship(order: str, service: str) -> Job:
    return Job("Courier", f"@Courier please book {service} shipping for {order} (book_pickup).",
               f"Courier: {service} pickup for {order}", "book_pickup")


def track(parcel: str) -> Job:
    return Job("Courier", f"@Courier where is parcel {parcel} right now? Use parcel_status.",
               f"Courier: locate {parcel}", "parcel_status", reads=(("state", "depot"), parcel))


def count(sku: str) -> Job:
    return Job("Stocker", f"@Stocker how many {sku} are on the shelf? Use stock_level.",
               f"Stocker: count {sku}", "stock_level", reads=(("onhand",), sku))


def paid(order: str) -> Job:
    return Job("Cashier", f"@Cashier what was paid on {order}? Check payment_info.",
               f"Cashier: what {order} paid", "payment_info", reads=(("paid",), order))


def pay_back(order: str, amount: str) -> Job:
    return Job("Cashier", f"@Cashier please refund {amount} on {order}.",
               f"Cashier: refund {order}", "refund")


def _reserve(order: str, sku: str, qty: int) -> tuple[str, dict]:
    return "reserve", {"sku": sku, "qty": qty, "order_ref": order}


def _ship(order: str, service: str) -> tuple[str, dict]:
    return "book_pickup", {"order_ref": order, "service": service}


TICKET_LIST: list[Ticket] = [
    Ticket("w01", "Tomas Berg wants order ord_1c9e0 sent out by standard courier.",
           (pull_up("ord_1c9e0"), put_aside("ord_1c9e0", 1), ship("ord_1c9e0", "standard")),
           "Hi Tomas, ord_1c9e0 is packed and leaves as parcel <parcel:ord_1c9e0>, standard service, "
           "about <eta:ord_1c9e0> day(s).",
           (_reserve("ord_1c9e0", "sku:40-a", 1), _ship("ord_1c9e0", "standard")), ("#4480",)),
    Ticket("w02", "Mira Okafor needs ord_7f3a2 shipped express.",
           (pull_up("ord_7f3a2"), put_aside("ord_7f3a2", 1), put_aside("ord_7f3a2", 2), ship("ord_7f3a2", "express")),
           "Hi Mira, ord_7f3a2 goes out express as parcel <parcel:ord_7f3a2>.",
           (_reserve("ord_7f3a2", "sku:88-b", 2), _reserve("ord_7f3a2", "sku:12-k", 1), _ship("ord_7f3a2", "express")),
           ("#4480", "express")),
    Ticket("w03", "Lena Park (ord_b41d7) asks if the monitor arm sku:73-m is in stock, and where her earlier parcel "
                  "#4472 is.",
           (count("sku:73-m"), track("#4472")),
           "Hi Lena, we hold <onhand:sku:73-m> of sku:73-m; parcel #4472 is <state:#4472> (<depot:#4472>).",
           (), ("5", "out for delivery")),
    Ticket("w04", "Ines Duarte cancelled ord_9a06f before it shipped: refund everything she paid.",
           (paid("ord_9a06f"), pay_back("ord_9a06f", "<paid:ord_9a06f>")),
           "Hi Ines, we refunded <paid:ord_9a06f> for ord_9a06f (reference <refund:ord_9a06f>).",
           (("refund", {"order_ref": "ord_9a06f", "amount": 33.80}),), ("33.80", "rf_31")),
    Ticket("w05", "Kofi Mensah got a broken desk lamp in ord_e3d15: refund that one item.",
           (pull_up("ord_e3d15"), pay_back("ord_e3d15", "<price2:ord_e3d15>")),
           "Hi Kofi, <price2:ord_e3d15> for the desk lamp on ord_e3d15 is on its way back (<refund:ord_e3d15>).",
           (("refund", {"order_ref": "ord_e3d15", "amount": 23.90}),), ("23.90", "rf_31")),
    Ticket("w06", "Lena Park wants ord_b41d7 shipped, standard is fine.",
           (pull_up("ord_b41d7"), put_aside("ord_b41d7", 1), put_aside("ord_b41d7", 2), ship("ord_b41d7", "standard")),
           "Hi Lena, ord_b41d7 is on its way as parcel <parcel:ord_b41d7> (about <eta:ord_b41d7> day(s)).",
           (_reserve("ord_b41d7", "sku:73-m", 1), _reserve("ord_b41d7", "sku:05-t", 3), _ship("ord_b41d7", "standard")),
           ("#4480", "3 day")),
    Ticket("w07", "Yusuf Adeyemi asks for ord_52e8c to go express; also tell him how many caster sets are left.",
           (pull_up("ord_52e8c"), put_aside("ord_52e8c", 1), ship("ord_52e8c", "express")),
           "Hi Yusuf, ord_52e8c ships express as <parcel:ord_52e8c>; <left:sku:61-c> caster sets remain.",
           (_reserve("ord_52e8c", "sku:61-c", 2), _ship("ord_52e8c", "express")), ("#4480", "5 caster")),
    Ticket("w08", "A buyer asks how many tape guns (sku:05-t) and cable reels (sku:12-k) we can supply.",
           (count("sku:05-t"), count("sku:12-k")),
           "We can supply <onhand:sku:05-t> tape guns and <onhand:sku:12-k> cable reels.",
           (), ("21 tape", "3 cable")),
    Ticket("w09", "Ines Duarte changed her mind: ship ord_9a06f by standard courier after all.",
           (pull_up("ord_9a06f"), put_aside("ord_9a06f", 1), ship("ord_9a06f", "standard")),
           "Hi Ines, ord_9a06f left as parcel <parcel:ord_9a06f>.",
           (_reserve("ord_9a06f", "sku:05-t", 4), _ship("ord_9a06f", "standard")), ("#4480",)),
    Ticket("w10", "Two customers chase parcels #4471 and #4473: where are they?",
           (track("#4471"), track("#4473")),
           "Parcel #4471: <state:#4471> (<depot:#4471>). Parcel #4473: <state:#4473> (<depot:#4473>).",
           (), ("held at depot (Leeds)", "delivered (Derby)")),
    Ticket("w11", "Kofi Mensah needs ord_e3d15 express, and wants to know what he paid.",
           (paid("ord_e3d15"), pull_up("ord_e3d15"), put_aside("ord_e3d15", 1), put_aside("ord_e3d15", 2),
            ship("ord_e3d15", "express")),
           "Hi Kofi, you paid <paid:ord_e3d15>; ord_e3d15 ships express as parcel <parcel:ord_e3d15>.",
           (_reserve("ord_e3d15", "sku:73-m", 2), _reserve("ord_e3d15", "sku:88-b", 1), _ship("ord_e3d15", "express")),
           ("153.40", "#4480")),
    Ticket("w12", "Mira Okafor returns the cable reel from ord_7f3a2: refund its price and tell her what she "
                  "paid in total.",
           (paid("ord_7f3a2"), pull_up("ord_7f3a2"), pay_back("ord_7f3a2", "<price2:ord_7f3a2>")),
           "Hi Mira, of the <paid:ord_7f3a2> you paid, <price2:ord_7f3a2> for the cable reel is refunded "
           "(<refund:ord_7f3a2>).",
           (("refund", {"order_ref": "ord_7f3a2", "amount": 11.50}),), ("59.30", "11.50", "rf_31")),
]

TICKETS: dict[str, Ticket] = {t.id: t for t in TICKET_LIST}
_BY_TEXT = {t.text: t for t in TICKET_LIST}


def get_ticket(ticket_id: str) -> Ticket:
    """The ticket of this id: a hand-written one (w03), or its template on a seed's world (w03@5,
    :mod:`tracefix.demo.variants`), whose gold actions and required outputs the app's reward
    derives (:func:`tracefix.demo.warehouse.scored_ticket`): here they are left empty."""
    return by_id(ticket_id, TICKETS, _variant, "warehouse ticket")


@functools.lru_cache(maxsize=None)
def _variant(base: str, seed: int) -> Ticket:
    fixture, words = TICKETS[base], content(seed).words

    def swapped(text: str) -> str:
        return swap(text, words)
    jobs = tuple(dataclasses.replace(j, note=swapped(j.note), line=swapped(j.line),
                                     reads=None if j.reads is None else (j.reads[0], swapped(j.reads[1])))
                 for j in fixture.jobs)
    ticket = Ticket(variant_id(base, seed), swapped(fixture.text), jobs, swapped(fixture.reply))
    # the scripted model recognizes a variant's text once the variant was asked for
    _BY_TEXT.setdefault(ticket.text, ticket)
    return ticket


def ticket_for_text(text: str) -> Ticket | None:
    """The ticket whose customer text this is (what the scripted model 'understands')."""
    return _BY_TEXT.get(text.strip())
