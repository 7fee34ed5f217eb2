"""How the `bank-agent` model's workers read an Orchestrator's instruction: where it sits in
a worker's conversation (:func:`instruction_index`), which tool calls it asks for with the
arguments it states (:func:`parse_instruction`), and the ways a text may talk about one of
those actions (:func:`action_words`, which the edit rules reuse).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .edits import worker_protocol

INTENT_PATTERNS = {
    "lookup_customer": r"lookup_customer|look up (?:the )?customer|find (?:the )?customer",
    "get_accounts": r"get_accounts|list (?:their|his|her|the) accounts|accounts of customer",
    "get_balance": r"get_balance|current balance|balance of account",
    "close_account": r"close_account|\bclose\b",
    "transfer": r"\btransfer\b|\bmove \$|\bsend \$",
    "deposit_check": r"deposit_check|\bdeposit\b",
    "get_transactions": r"get_transactions|recent transactions|transaction history",
}


def action_words(action: str) -> str:
    """A regex of the ways an edit may talk about an action: its tool name or its verb."""
    return rf"\b{re.escape(action.replace('_', ' '))}\b|{INTENT_PATTERNS.get(action, re.escape(action))}"


def instruction_index(messages: list[dict]) -> int | None:
    """Where the worker's latest instruction is in its conversation (None: it got none)."""
    is_instruction = worker_protocol(messages)
    return max((i for i, m in enumerate(messages) if m.get("role") == "user" and is_instruction(i, m)), default=None)


@dataclass
class Intent:
    tool: str
    args: dict  # None values are filled from earlier results (customer_id from a lookup)


def parse_instruction(text: str, own_tools: list[str]) -> tuple[list[Intent], str | None]:
    """The tool calls an instruction asks for, in order, with the arguments it states; or
    ([], reason) when it does not say enough to act on."""
    found = []
    for tool in own_tools:
        m = re.search(INTENT_PATTERNS[tool], text, re.I)
        if m:
            found.append((m.start(), tool))
    if not found:
        return [], "it names none of my actions"
    accounts = re.findall(r"ACC-\d{4}", text)
    amount = re.search(r"\$\s*([\d,]+(?:\.\d+)?)", text) or re.search(r"amount (?:of )?([\d,]+(?:\.\d+)?)", text)
    name = re.search(r'"([^"]+)"', text) or re.search(r"customer (?:named )?([A-Z][a-z]+ [A-Z][a-z]+)", text)
    customer = re.search(r"CUST-\d{3}", text)
    check = re.search(r"CHK-\d{4}", text)
    src = re.search(r"from (?:account )?(ACC-\d{4})", text)
    dst = re.search(r"(?:to|into) (?:account )?(ACC-\d{4})", text)
    intents = []
    for _, tool in sorted(found):
        if tool == "lookup_customer":
            args = {"name": name.group(1) if name else None}
        elif tool == "get_accounts":
            args = {"customer_id": customer.group(0) if customer else None}
        elif tool in ("get_balance", "close_account", "get_transactions"):
            args = {"account_id": accounts[0] if accounts else None}
        elif tool == "transfer":
            args = {"from_account": src.group(1) if src else (accounts[0] if accounts else None),
                    "to_account": dst.group(1) if dst else (accounts[1] if len(accounts) > 1 else None),
                    "amount": float(amount.group(1).replace(",", "")) if amount else None}
        else:  # deposit_check
            args = {"account_id": dst.group(1) if dst else (accounts[0] if accounts else None),
                    "check_number": check.group(0) if check else None}
        intents.append(Intent(tool, args))
    tools_seen = {i.tool for i in intents}
    for intent in intents:
        for arg, value in intent.args.items():
            derivable = intent.tool == "get_accounts" and "lookup_customer" in tools_seen
            if value is None and not derivable:
                return [], f"it does not say the {arg.replace('_', ' ')} for {intent.tool}"
    return intents, None
