"""The banking tools: plain functions over a :class:`BankDB`, and their JSON schemas.

Every argument defaults to None and is checked here, so a missing or malformed argument
becomes a clear :class:`BankError` (a tool error in the trace) rather than a TypeError
raised before the tool even ran.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from .db import (BankDB, CheckNotDepositable, InsufficientFunds, InvalidArgument,
                 MissingArgument, NonZeroBalance, UnknownCustomer, dollars)

ACCOUNT_RE = re.compile(r"^ACC-\d{4}$")
CUSTOMER_RE = re.compile(r"^CUST-\d{3}$")
CHECK_RE = re.compile(r"^CHK-\d{4}$")

# Which worker may call which tool (the Orchestrator has no tools).
WORKER_TOOLS: dict[str, list[str]] = {
    "AccountAgent": ["lookup_customer", "get_accounts", "get_balance", "close_account"],
    "PaymentsAgent": ["transfer", "deposit_check", "get_transactions"],
}
# Tools that change the database: skipping one or aiming it at the wrong account is silent.
MUTATING_TOOLS = {"transfer", "deposit_check", "close_account"}
READ_TOOLS = {"lookup_customer", "get_accounts", "get_balance", "get_transactions"}


def _required(tool: str, name: str, value: Any) -> Any:
    if value is None or value == "":
        raise MissingArgument(f"{tool}: missing required argument '{name}'")
    return value


def _id(tool: str, name: str, value: Any, pattern: re.Pattern, example: str) -> str:
    _required(tool, name, value)
    if not isinstance(value, str) or not pattern.match(value):
        raise InvalidArgument(f"{tool}: argument '{name}' must look like {example}, got {value!r}")
    return value


def _cents(tool: str, value: Any) -> int:
    _required(tool, "amount", value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(str(value).replace("$", "").replace(",", ""))
        except ValueError:
            raise InvalidArgument(f"{tool}: argument 'amount' must be a number, got {value!r}") from None
    cents = round(float(value) * 100)
    if cents <= 0:
        raise InvalidArgument(f"{tool}: argument 'amount' must be positive, got {value!r}")
    return cents


class BankTools:
    """The tools bound to one database. Methods are named exactly like the tools."""

    def __init__(self, db: BankDB):
        self.db = db

    def call(self, name: str, arguments: dict) -> Any:
        fn: Callable | None = TOOL_FUNCTIONS.get(name)
        if fn is None:
            raise InvalidArgument(f"unknown tool {name!r}")
        return fn(self, **arguments)

    def lookup_customer(self, name: str | None = None) -> dict:
        _required("lookup_customer", "name", name)
        wanted = str(name).strip().lower()
        for cid, cust in sorted(self.db.state["customers"].items()):
            if cust["name"].lower() == wanted:
                return {"customer_id": cid, "name": cust["name"]}
        raise UnknownCustomer(f"lookup_customer: no customer named {name!r}")

    def get_accounts(self, customer_id: str | None = None) -> dict:
        cid = _id("get_accounts", "customer_id", customer_id, CUSTOMER_RE, "CUST-001")
        if cid not in self.db.state["customers"]:
            raise UnknownCustomer(f"get_accounts: unknown customer {cid!r}")
        accounts = [
            {"account_id": aid, "type": a["type"], "balance": dollars(a["balance_cents"]), "status": a["status"]}
            for aid, a in sorted(self.db.state["accounts"].items()) if a["customer_id"] == cid
        ]
        return {"customer_id": cid, "accounts": accounts}

    def get_balance(self, account_id: str | None = None) -> dict:
        aid = _id("get_balance", "account_id", account_id, ACCOUNT_RE, "ACC-1001")
        acct = self.db.account(aid)
        return {"account_id": aid, "balance": dollars(acct["balance_cents"]), "status": acct["status"]}

    def close_account(self, account_id: str | None = None) -> dict:
        aid = _id("close_account", "account_id", account_id, ACCOUNT_RE, "ACC-1001")
        acct = self.db.open_account(aid)
        if acct["balance_cents"] != 0:
            raise NonZeroBalance(f"close_account: account {aid} still holds {dollars(acct['balance_cents'])}; "
                                 "move the balance out first")
        acct["status"] = "closed"
        return {"account_id": aid, "status": "closed"}

    def transfer(self, from_account: str | None = None, to_account: str | None = None,
                 amount: float | None = None) -> dict:
        src = _id("transfer", "from_account", from_account, ACCOUNT_RE, "ACC-1001")
        dst = _id("transfer", "to_account", to_account, ACCOUNT_RE, "ACC-1002")
        cents = _cents("transfer", amount)
        if src == dst:
            raise InvalidArgument("transfer: from_account and to_account are the same account")
        a, b = self.db.open_account(src), self.db.open_account(dst)
        if a["balance_cents"] < cents:
            raise InsufficientFunds(f"transfer: {src} holds {dollars(a['balance_cents'])}, "
                                    f"cannot send {dollars(cents)}")
        a["balance_cents"] -= cents
        b["balance_cents"] += cents
        tx = self.db.new_transaction(kind="transfer", **{"from": src, "to": dst}, amount_cents=cents)
        return {"transaction_id": tx, "from_account": src, "to_account": dst, "amount": dollars(cents),
                "from_balance": dollars(a["balance_cents"]), "to_balance": dollars(b["balance_cents"])}

    def deposit_check(self, account_id: str | None = None, check_number: str | None = None) -> dict:
        aid = _id("deposit_check", "account_id", account_id, ACCOUNT_RE, "ACC-1001")
        chk_id = _id("deposit_check", "check_number", check_number, CHECK_RE, "CHK-5001")
        check = self.db.state["checks"].get(chk_id)
        if check is None:
            raise CheckNotDepositable(f"deposit_check: unknown check {chk_id!r}")
        if check["status"] != "pending":
            raise CheckNotDepositable(f"deposit_check: check {chk_id} was already {check['status']}")
        acct = self.db.open_account(aid)
        if acct["customer_id"] != check["payee_customer_id"]:
            raise CheckNotDepositable(f"deposit_check: check {chk_id} is not payable to the owner of {aid}")
        acct["balance_cents"] += check["amount_cents"]
        check["status"] = "deposited"
        tx = self.db.new_transaction(kind="deposit", account_id=aid, amount_cents=check["amount_cents"],
                                     check=chk_id)
        return {"transaction_id": tx, "account_id": aid, "amount": dollars(check["amount_cents"]),
                "balance": dollars(acct["balance_cents"])}

    def get_transactions(self, account_id: str | None = None) -> dict:
        aid = _id("get_transactions", "account_id", account_id, ACCOUNT_RE, "ACC-1001")
        self.db.account(aid)
        rows = [
            {"transaction_id": t["id"], "kind": t["kind"], "amount": dollars(t["amount_cents"])}
            for t in self.db.state["transactions"]
            if aid in (t.get("account_id"), t.get("from"), t.get("to"))
        ]
        return {"account_id": aid, "transactions": rows[-5:]}


TOOL_FUNCTIONS: dict[str, Callable] = {
    name: getattr(BankTools, name) for names in WORKER_TOOLS.values() for name in names
}

_DESCRIPTIONS = {
    "lookup_customer": ("Find a customer by full name.", {"name": "the customer's full name"}),
    "get_accounts": ("List a customer's accounts with type, balance and status.",
                     {"customer_id": "customer id, e.g. CUST-001"}),
    "get_balance": ("Current balance of one account.", {"account_id": "account id, e.g. ACC-1001"}),
    "close_account": ("Close an account whose balance is zero.", {"account_id": "account id"}),
    "transfer": ("Move money between two open accounts.",
                 {"from_account": "account to debit", "to_account": "account to credit",
                  "amount": "amount in dollars"}),
    "deposit_check": ("Deposit a pending check into an account of its payee.",
                      {"account_id": "account to credit", "check_number": "check id, e.g. CHK-5001"}),
    "get_transactions": ("The last five transactions touching an account.", {"account_id": "account id"}),
}


def tool_spec(name: str) -> dict:
    """The OpenAI `tools` entry for one tool."""
    description, params = _DESCRIPTIONS[name]
    props = {p: {"type": "number" if p == "amount" else "string", "description": d} for p, d in params.items()}
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": props, "required": list(params)}}}


def required_arguments(name: str) -> list[str]:
    return list(_DESCRIPTIONS[name][1])
