"""The banking demo's account database: a JSON state object with snapshot/restore.

Money is kept in integer cents so that equal histories give byte-equal states and the
reward can compare database hashes (tau-bench style) without float noise.
"""
from __future__ import annotations

import copy
import hashlib
import json
from typing import Any


class BankError(Exception):
    """A tool refused its input; the message says what was wrong and is shown to the agent."""


class MissingArgument(BankError):
    pass


class InvalidArgument(BankError):
    pass


class UnknownCustomer(BankError):
    pass


class UnknownAccount(BankError):
    pass


class AccountClosed(BankError):
    pass


class InsufficientFunds(BankError):
    pass


class CheckNotDepositable(BankError):
    pass


class NonZeroBalance(BankError):
    pass


def _acct(customer_id: str, kind: str, cents: int) -> dict:
    return {"customer_id": customer_id, "type": kind, "balance_cents": cents, "status": "open"}


# The fixture every run starts from. Every customer has at least two accounts so that a
# misread or a wrong account id always lands on a plausible, existing account.
INITIAL_STATE: dict[str, Any] = {
    "customers": {
        "CUST-001": {"name": "Alice Chen"},
        "CUST-002": {"name": "Bob Diaz"},
        "CUST-003": {"name": "Carol Evans"},
        "CUST-004": {"name": "Dan Fox"},
        "CUST-005": {"name": "Erin Gray"},
        "CUST-006": {"name": "Frank Hill"},
        "CUST-007": {"name": "Grace Ito"},
    },
    "accounts": {
        "ACC-1001": _acct("CUST-001", "checking", 125000),
        "ACC-1002": _acct("CUST-001", "savings", 540000),
        "ACC-1003": _acct("CUST-002", "checking", 82050),
        "ACC-1004": _acct("CUST-002", "savings", 150000),
        "ACC-1005": _acct("CUST-003", "checking", 231075),
        "ACC-1006": _acct("CUST-003", "savings", 90000),
        "ACC-1007": _acct("CUST-004", "checking", 45000),
        "ACC-1008": _acct("CUST-004", "savings", 1210000),
        "ACC-1009": _acct("CUST-005", "checking", 67530),
        "ACC-1010": _acct("CUST-005", "savings", 31220),
        "ACC-1011": _acct("CUST-006", "checking", 198000),
        "ACC-1012": _acct("CUST-006", "savings", 25000),
        "ACC-1013": _acct("CUST-007", "checking", 302500),
        "ACC-1014": _acct("CUST-007", "savings", 780000),
    },
    "checks": {
        "CHK-5001": {"payee_customer_id": "CUST-004", "amount_cents": 30000, "status": "pending"},
        "CHK-5002": {"payee_customer_id": "CUST-001", "amount_cents": 12550, "status": "pending"},
        "CHK-5003": {"payee_customer_id": "CUST-006", "amount_cents": 99900, "status": "pending"},
        "CHK-5004": {"payee_customer_id": "CUST-007", "amount_cents": 4000, "status": "pending"},
    },
    "transactions": [
        {"id": "TX-0001", "kind": "deposit", "account_id": "ACC-1001", "amount_cents": 200000},
        {"id": "TX-0002", "kind": "transfer", "from": "ACC-1001", "to": "ACC-1003", "amount_cents": 7500},
        {"id": "TX-0003", "kind": "deposit", "account_id": "ACC-1013", "amount_cents": 50000},
        {"id": "TX-0004", "kind": "deposit", "account_id": "ACC-1011", "amount_cents": 25000},
    ],
    "next_tx": 5,
}


def dollars(cents: int) -> str:
    """How amounts appear to agents and in answers: 1250.00 (no thousands separator)."""
    return f"{cents / 100:.2f}"


class BankDB:
    """The account database. `snapshot()`/`restore()` exchange deep copies, so a snapshot
    never changes when the bank keeps working, and a restored bank never aliases its input."""

    def __init__(self, state: dict | None = None):
        self.state: dict[str, Any] = copy.deepcopy(INITIAL_STATE if state is None else state)

    def snapshot(self) -> dict:
        return copy.deepcopy(self.state)

    def restore(self, state: dict) -> None:
        self.state = copy.deepcopy(state)

    def hash(self) -> str:
        blob = json.dumps(self.state, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    # --- lookups used by the tools (raise the errors the agents see) -------------------
    def account(self, account_id: str) -> dict:
        acct = self.state["accounts"].get(account_id)
        if acct is None:
            raise UnknownAccount(f"unknown account {account_id!r}")
        return acct

    def open_account(self, account_id: str) -> dict:
        acct = self.account(account_id)
        if acct["status"] != "open":
            raise AccountClosed(f"account {account_id} is closed")
        return acct

    def new_transaction(self, **fields: Any) -> str:
        tx_id = f"TX-{self.state['next_tx']:04d}"
        self.state["next_tx"] += 1
        self.state["transactions"].append({"id": tx_id, **fields})
        return tx_id
