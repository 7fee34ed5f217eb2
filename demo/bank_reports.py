"""A banking worker's REPORT, both ways: what a worker writes about its tool calls
(:func:`report`, :func:`result_lines`) and what the Orchestrator learns back from it
(:class:`Facts`), which fills the task's instruction and answer templates
(:mod:`tracefix.demo.tasks`). A misread report therefore carries into later instructions and
the final answer, as it would with a real LLM.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from .scripted import Call
from .tasks import Subtask


def is_report(m: dict) -> bool:
    return m.get("role") == "user" and str(m.get("content") or "").startswith("REPORT")


def failed(report: str) -> bool:
    return "FAILED" in report.split("\n", 1)[0]


# --- writing a report ----------------------------------------------------------------------------

def report(agent: str, calls: list[Call], extra: list[str] | tuple[str, ...] = ()) -> str:
    lines = [f"REPORT from {agent}: done."]
    for c in calls:
        if c.error:
            continue
        try:
            lines += result_lines(c)
        except (KeyError, TypeError, IndexError, AttributeError):
            # a result of another shape (e.g. replaced in a replay): pass it on verbatim
            lines.append(f"- {c.name} returned {json.dumps(c.result, sort_keys=True)}")
    lines += list(extra)
    return "\n".join(lines)


def result_lines(c: Call) -> list[str]:
    """What a worker reports about one successful call (raises on a result of another shape)."""
    r = c.result
    if c.name == "lookup_customer":
        return [f'- customer "{r["name"]}": {r["customer_id"]}']
    if c.name == "get_accounts":
        return [f"- account {a['account_id']} of {r['customer_id']}: {a['type']}, balance {a['balance']}, "
                f"{a['status']}" for a in r["accounts"]]
    if c.name == "get_balance":
        return [f"- account {r['account_id']}: balance {r['balance']}, {r['status']}"]
    if c.name == "transfer":
        return [f"- transfer {r['transaction_id']}: {r['amount']} from {r['from_account']} to {r['to_account']}",
                f"- account {r['from_account']}: balance {r['from_balance']}",
                f"- account {r['to_account']}: balance {r['to_balance']}"]
    if c.name == "deposit_check":
        return [f"- deposit {r['transaction_id']}: {r['amount']} into {r['account_id']}",
                f"- account {r['account_id']}: balance {r['balance']}"]
    if c.name == "close_account":
        return [f"- account {r['account_id']}: closed"]
    if c.name == "get_transactions":
        txs = r["transactions"]
        listed = "; ".join(f"{t['transaction_id']} {t['kind']} {t['amount']}" for t in txs) or "none"
        return [f"- transactions of {r['account_id']}: {listed}",
                f"- latest transaction of {r['account_id']}: {txs[-1]['transaction_id'] if txs else 'none'}"]
    return [f"- {c.name} returned {json.dumps(r, sort_keys=True)}"]


# --- reading reports back ------------------------------------------------------------------------

class Unresolved(Exception):
    pass


@dataclass
class Facts:
    customers: dict[str, str] = field(default_factory=dict)  # name -> id
    accounts: dict[str, dict] = field(default_factory=dict)  # id -> owner/type/balance/status
    last_tx: dict[str, str] = field(default_factory=dict)

    def learn(self, report: str) -> None:
        for name, cid in re.findall(r'customer "([^"]+)": (CUST-\d{3})', report):
            self.customers[name] = cid
        for aid, owner, kind, bal, status in re.findall(
                r"account (ACC-\d{4}) of (CUST-\d{3}): (\w+), balance ([\d.]+), (\w+)", report):
            self.accounts[aid] = {"owner": owner, "type": kind, "balance": bal, "status": status}
        for aid, bal in re.findall(r"account (ACC-\d{4}): balance ([\d.]+)", report):
            self.accounts.setdefault(aid, {})["balance"] = bal
        for aid in re.findall(r"account (ACC-\d{4}): closed", report):
            self.accounts.setdefault(aid, {})["status"] = "closed"
        for aid, tx in re.findall(r"latest transaction of (ACC-\d{4}): (\S+)", report):
            self.last_tx[aid] = tx

    def believe(self, sub: Subtask, report: str) -> None:
        """File a read-only sub-task's reported value under the account it asked about."""
        if sub.reads is None:
            return
        try:
            intended = self.resolve(sub.reads)
        except Unresolved:
            return
        balance = re.search(r"balance ([\d.]+)", report)
        latest = re.search(r"latest transaction of ACC-\d{4}: (\S+)", report)
        if sub.action == "get_balance" and balance:
            self.accounts.setdefault(intended, {})["balance"] = balance.group(1)
        if sub.action == "get_transactions" and latest:
            self.last_tx[intended] = latest.group(1)

    def account(self, name: str, kind: str) -> str:
        cid = self.customers.get(name)
        for aid, a in sorted(self.accounts.items()):
            if cid and a.get("owner") == cid and a.get("type") == kind:
                return aid
        raise Unresolved(f"{name}'s {kind} account")

    def resolve(self, template: str) -> str:
        def one(m: re.Match) -> str:
            what, _, rest = m.group(1).partition(":")
            parts = rest.split(":")
            if what == "acct":
                return self.account(parts[0], parts[1])
            if what == "bal":
                bal = self.accounts[self.account(parts[0], parts[1])].get("balance")
                if bal is None:
                    raise Unresolved(f"the balance of {parts[0]}'s {parts[1]} account")
                return bal
            if what == "lasttx":
                return self.last_tx.get(self.account(parts[0], parts[1]), "none")
            if what == "total":
                cid = self.customers.get(parts[0])
                owned = [float(a.get("balance", 0)) for a in self.accounts.values()
                         if cid and a.get("owner") == cid and a.get("status") == "open"]
                if not owned:
                    raise Unresolved(f"{parts[0]}'s accounts")
                return f"{sum(owned):.2f}"
            raise Unresolved(m.group(0))
        return re.sub(r"\{([a-z]+:[^}]+)\}", one, template)
