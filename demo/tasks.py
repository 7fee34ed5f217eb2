"""The banking demo's tasks: instruction, the sub-tasks a competent orchestrator hands out,
gold actions (replayed on a fresh database by the reward) and outputs the answer must state.

Sub-task instructions and answers are templates over *facts the orchestrator learned from
worker reports*, never over the fixture: `{acct:Alice Chen:checking}` is the id a worker
reported for Alice's checking account, `{bal:...}` its latest reported balance,
`{total:NAME}` the sum of a customer's reported balances, `{lasttx:NAME:TYPE}` the latest
transaction id reported for that account. So a misread report propagates into later
instructions and into the final answer, as it would with a real LLM.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

from .bank_content import content, task_words
from .variants import by_id, swap, variant_id


@dataclass(frozen=True)
class Subtask:
    worker: str
    instruction: str  # template, see module docstring
    summary: str  # one plan line
    action: str  # the tool this sub-task is about (names it in corrections)
    # For read-only sub-tasks: the account (template) the report is taken to describe. The
    # orchestrator files the reported value under the account it *asked about*, so a report
    # about another account (after a wrong instruction) is believed, as an LLM would.
    reads: str | None = None


@dataclass(frozen=True)
class Task:
    id: str
    instruction: str
    subtasks: tuple[Subtask, ...]
    answer: str  # template of the final answer
    gold_actions: tuple[tuple[str, dict], ...] = ()
    required_outputs: tuple[str, ...] = field(default=())


def lookup(name: str) -> Subtask:
    return Subtask("AccountAgent",
                   f'Look up the customer named "{name}" with lookup_customer, then list their accounts with '
                   "get_accounts. Report the customer id and every account with its type and balance.",
                   f"AccountAgent: look up {name} and their accounts.", "lookup_customer")


def transfer(src: str, dst: str, amount: str, what: str) -> Subtask:
    return Subtask("PaymentsAgent",
                   f"Transfer ${amount} from account {src} to account {dst} using transfer, and report the "
                   "transaction id and the new balances.",
                   f"PaymentsAgent: transfer {what}.", "transfer")


def balance(acct: str, what: str) -> Subtask:
    return Subtask("AccountAgent", f"Get the current balance of account {acct} with get_balance and report it.",
                   f"AccountAgent: check the balance of {what}.", "get_balance", reads=acct)


def deposit(check: str, acct: str, what: str) -> Subtask:
    return Subtask("PaymentsAgent",
                   f"Deposit check {check} into account {acct} using deposit_check and report the new balance.",
                   f"PaymentsAgent: deposit check {check} into {what}.", "deposit_check")


def close(acct: str, what: str) -> Subtask:
    return Subtask("AccountAgent", f"Close account {acct} with close_account and confirm that it is closed.",
                   f"AccountAgent: close {what}.", "close_account")


def history(acct: str, what: str) -> Subtask:
    return Subtask("PaymentsAgent",
                   f"List the recent transactions of account {acct} with get_transactions and report them.",
                   f"PaymentsAgent: list the recent transactions of {what}.", "get_transactions", reads=acct)


def T(name: str, kind: str) -> str:  # noqa: N802 - reads like the template it builds
    return "{acct:" + name + ":" + kind + "}"


def B(name: str, kind: str) -> str:  # noqa: N802
    return "{bal:" + name + ":" + kind + "}"


def _tr(src: str, dst: str, amount) -> tuple[str, dict]:
    return ("transfer", {"from_account": src, "to_account": dst, "amount": amount})


A, BO, C, D, E, F, G = "Alice Chen", "Bob Diaz", "Carol Evans", "Dan Fox", "Erin Gray", "Frank Hill", "Grace Ito"

TASK_LIST: list[Task] = [
    Task("t01", "Alice Chen asks how much money is in her savings account.",
         (lookup(A), balance(T(A, "savings"), "Alice's savings")),
         f"Alice Chen's savings account {T(A, 'savings')} holds ${B(A, 'savings')}.",
         (), ("ACC-1002", "5400.00")),
    Task("t02", "Move $200 from Alice Chen's checking account to her savings account.",
         (lookup(A), transfer(T(A, "checking"), T(A, "savings"), "200.00", "$200 from Alice's checking to savings")),
         f"Moved $200.00 from Alice Chen's checking {T(A, 'checking')} to her savings {T(A, 'savings')}; "
         f"checking now holds ${B(A, 'checking')}.",
         (_tr("ACC-1001", "ACC-1002", 200.0),), ("200.00", "ACC-1001", "1050.00")),
    Task("t03", "Bob Diaz wants to send $75.25 from his checking account to Carol Evans's checking account.",
         (lookup(BO), lookup(C), transfer(T(BO, "checking"), T(C, "checking"), "75.25", "$75.25 from Bob to Carol")),
         f"Sent $75.25 from Bob Diaz's checking {T(BO, 'checking')} to Carol Evans's checking {T(C, 'checking')}.",
         (_tr("ACC-1003", "ACC-1005", 75.25),), ("75.25", "ACC-1005")),
    Task("t04", "Deposit check CHK-5001 into Dan Fox's checking account and tell him the new balance.",
         (lookup(D), deposit("CHK-5001", T(D, "checking"), "Dan's checking")),
         f"Deposited check CHK-5001 into Dan Fox's checking {T(D, 'checking')}; the balance is now "
         f"${B(D, 'checking')}.",
         (("deposit_check", {"account_id": "ACC-1007", "check_number": "CHK-5001"}),), ("CHK-5001", "750.00")),
    Task("t05", "Close Erin Gray's savings account after moving its whole balance to her checking account.",
         (lookup(E), transfer(T(E, "savings"), T(E, "checking"), B(E, "savings"), "Erin's savings balance to checking"),
          close(T(E, "savings"), "Erin's savings account")),
         f"Moved Erin Gray's savings balance to checking {T(E, 'checking')} and closed savings account "
         f"{T(E, 'savings')}: it is now closed.",
         (_tr("ACC-1010", "ACC-1009", 312.2), ("close_account", {"account_id": "ACC-1010"})),
         ("ACC-1010", "closed")),
    Task("t06", "Frank Hill wants to know the most recent transaction on his checking account.",
         (lookup(F), history(T(F, "checking"), "Frank's checking")),
         f"The most recent transaction on Frank Hill's checking {T(F, 'checking')} is "
         "{lasttx:Frank Hill:checking}.",
         (), ("TX-0004", "ACC-1011")),
    Task("t07", "Grace Ito asks for the current balance of each of her accounts and her total.",
         (lookup(G), balance(T(G, "checking"), "Grace's checking"), balance(T(G, "savings"), "Grace's savings")),
         f"Grace Ito: checking {T(G, 'checking')} ${B(G, 'checking')}, savings {T(G, 'savings')} "
         f"${B(G, 'savings')}; total ${{total:{G}}}.",
         (), ("checking ACC-1013 $3025.00", "savings ACC-1014 $7800.00", "10825.00")),
    Task("t08", "Move $400 from Carol Evans's savings account to her checking account and report her checking "
                "balance.",
         (lookup(C), transfer(T(C, "savings"), T(C, "checking"), "400.00", "$400 from Carol's savings to checking")),
         f"Moved $400.00 from Carol Evans's savings to checking {T(C, 'checking')}, which now holds "
         f"${B(C, 'checking')}.",
         (_tr("ACC-1006", "ACC-1005", 400.0),), ("400.00", "2710.75")),
    Task("t09", "Deposit check CHK-5002 into Alice Chen's savings account.",
         (lookup(A), deposit("CHK-5002", T(A, "savings"), "Alice's savings")),
         f"Deposited check CHK-5002 into Alice Chen's savings {T(A, 'savings')}; balance ${B(A, 'savings')}.",
         (("deposit_check", {"account_id": "ACC-1002", "check_number": "CHK-5002"}),), ("CHK-5002", "5525.50")),
    Task("t10", "Deposit check CHK-5003 into Frank Hill's checking account, then move $500 from his checking to "
                "his savings.",
         (lookup(F), deposit("CHK-5003", T(F, "checking"), "Frank's checking"),
          transfer(T(F, "checking"), T(F, "savings"), "500.00", "$500 from Frank's checking to savings")),
         f"Deposited CHK-5003 and moved $500.00 to savings: Frank Hill's checking {T(F, 'checking')} holds "
         f"${B(F, 'checking')} and savings {T(F, 'savings')} ${B(F, 'savings')}.",
         (("deposit_check", {"account_id": "ACC-1011", "check_number": "CHK-5003"}),
          _tr("ACC-1011", "ACC-1012", 500.0)), ("2479.00", "750.00")),
    Task("t11", "Bob Diaz wants to pay Alice Chen $300 from his savings account into her checking account.",
         (lookup(BO), lookup(A), transfer(T(BO, "savings"), T(A, "checking"), "300.00", "$300 from Bob to Alice")),
         f"Paid $300.00 from Bob Diaz's savings {T(BO, 'savings')} (now ${B(BO, 'savings')}) to Alice Chen's "
         f"checking {T(A, 'checking')}.",
         (_tr("ACC-1004", "ACC-1001", 300.0),), ("300.00", "1200.00")),
    Task("t12", "Move $1000 from Dan Fox's savings account to his checking account and tell him his checking "
                "balance.",
         (lookup(D), transfer(T(D, "savings"), T(D, "checking"), "1000.00", "$1000 from Dan's savings to checking")),
         f"Moved $1000.00 to Dan Fox's checking {T(D, 'checking')}, which now holds ${B(D, 'checking')}.",
         (_tr("ACC-1008", "ACC-1007", 1000.0),), ("1000.00", "1450.00")),
    Task("t13", "What is the balance of Erin Gray's checking account?",
         (lookup(E), balance(T(E, "checking"), "Erin's checking")),
         f"Erin Gray's checking account {T(E, 'checking')} holds ${B(E, 'checking')}.",
         (), ("ACC-1009", "675.30")),
    Task("t14", "Deposit check CHK-5004 into Grace Ito's savings account.",
         (lookup(G), deposit("CHK-5004", T(G, "savings"), "Grace's savings")),
         f"Deposited check CHK-5004 into Grace Ito's savings {T(G, 'savings')}; balance ${B(G, 'savings')}.",
         (("deposit_check", {"account_id": "ACC-1014", "check_number": "CHK-5004"}),), ("CHK-5004", "7840.00")),
    Task("t15", "Frank Hill wants to close his savings account; move what is left in it to his checking first.",
         (lookup(F), transfer(T(F, "savings"), T(F, "checking"), B(F, "savings"), "Frank's savings balance to checking"),
          close(T(F, "savings"), "Frank's savings account")),
         f"Moved Frank Hill's savings balance to checking {T(F, 'checking')} and closed savings {T(F, 'savings')}: "
         "it is now closed.",
         (_tr("ACC-1012", "ACC-1011", 250.0), ("close_account", {"account_id": "ACC-1012"})),
         ("ACC-1012", "closed")),
    Task("t16", "Alice Chen asks which transaction last touched her checking account.",
         (lookup(A), history(T(A, "checking"), "Alice's checking")),
         f"The last transaction on Alice Chen's checking {T(A, 'checking')} is {{lasttx:{A}:checking}}.",
         (), ("TX-0002",)),
    Task("t17", "Send $150 from Carol Evans's checking account to Dan Fox's savings account.",
         (lookup(C), lookup(D), transfer(T(C, "checking"), T(D, "savings"), "150.00", "$150 from Carol to Dan")),
         f"Sent $150.00 from Carol Evans's checking {T(C, 'checking')} to Dan Fox's savings {T(D, 'savings')}.",
         (_tr("ACC-1005", "ACC-1008", 150.0),), ("150.00", "ACC-1008")),
    Task("t18", "Grace Ito wants to send $1000 from her savings account to Erin Gray's checking account.",
         (lookup(G), lookup(E), transfer(T(G, "savings"), T(E, "checking"), "1000.00", "$1000 from Grace to Erin")),
         f"Sent $1000.00 from Grace Ito's savings {T(G, 'savings')} to Erin Gray's checking {T(E, 'checking')}, "
         f"which now holds ${B(E, 'checking')}.",
         (_tr("ACC-1014", "ACC-1009", 1000.0),), ("1000.00", "1675.30")),
    Task("t19", "Close Bob Diaz's checking account after moving its balance into his savings account.",
         (lookup(BO), transfer(T(BO, "checking"), T(BO, "savings"), B(BO, "checking"), "Bob's checking balance to savings"),
          close(T(BO, "checking"), "Bob's checking account")),
         f"Bob Diaz's checking {T(BO, 'checking')} is now closed; savings {T(BO, 'savings')} holds "
         f"${B(BO, 'savings')}.",
         (_tr("ACC-1003", "ACC-1004", 820.5), ("close_account", {"account_id": "ACC-1003"})),
         ("ACC-1003", "closed", "2320.50")),
    Task("t20", "Dan Fox sends $50 from his checking account to Carol Evans's savings account and wants to see the "
                "latest transaction on his checking account afterwards.",
         (lookup(D), lookup(C), transfer(T(D, "checking"), T(C, "savings"), "50.00", "$50 from Dan to Carol"),
          history(T(D, "checking"), "Dan's checking")),
         f"Sent $50.00 from Dan Fox's checking {T(D, 'checking')} to Carol Evans's savings {T(C, 'savings')}; "
         f"the latest transaction on his checking is {{lasttx:{D}:checking}}.",
         (_tr("ACC-1007", "ACC-1006", 50.0),), ("50.00", "TX-0005")),
    Task("t21", "Alice Chen moves $1000 from her savings to her checking account, then pays Bob Diaz $500 from her "
                "checking account into his checking account.",
         (lookup(A), lookup(BO),
          transfer(T(A, "savings"), T(A, "checking"), "1000.00", "$1000 from Alice's savings to checking"),
          transfer(T(A, "checking"), T(BO, "checking"), "500.00", "$500 from Alice to Bob")),
         f"Moved $1000.00 into Alice Chen's checking {T(A, 'checking')} and paid Bob Diaz $500.00; her checking "
         f"holds ${B(A, 'checking')}.",
         (_tr("ACC-1002", "ACC-1001", 1000.0), _tr("ACC-1001", "ACC-1003", 500.0)), ("500.00", "1750.00")),
    Task("t22", "Grace Ito sends $25.50 from her checking account to Frank Hill's checking account.",
         (lookup(G), lookup(F), transfer(T(G, "checking"), T(F, "checking"), "25.50", "$25.50 from Grace to Frank")),
         f"Sent $25.50 from Grace Ito's checking {T(G, 'checking')} (now ${B(G, 'checking')}) to Frank Hill's "
         f"checking {T(F, 'checking')}.",
         (_tr("ACC-1013", "ACC-1011", 25.5),), ("25.50", "2999.50")),
]

TASKS: dict[str, Task] = {t.id: t for t in TASK_LIST}
_BY_INSTRUCTION = {t.instruction: t for t in TASK_LIST}


def get_task(task_id: str) -> Task:
    """The task of this id: a hand-written one (t03), or its template on a seed's world (t03@5,
    :mod:`tracefix.demo.variants`), whose gold actions and required outputs the app's reward
    derives (:func:`tracefix.demo.bank.scored_task`): here they are left empty."""
    return by_id(task_id, TASKS, _variant, "demo task")


@functools.lru_cache(maxsize=None)
def _variant(base: str, seed: int) -> Task:
    fixture = TASKS[base]
    words = {**content(seed).words, **task_words(seed, base, " ".join(
        [fixture.instruction, fixture.answer] + [s.instruction + " " + s.summary for s in fixture.subtasks]))}

    def swapped(text: str) -> str:
        return swap(text, words)
    subtasks = tuple(dataclasses.replace(s, instruction=swapped(s.instruction), summary=swapped(s.summary),
                                         reads=None if s.reads is None else swapped(s.reads))
                     for s in fixture.subtasks)
    task = Task(variant_id(base, seed), swapped(fixture.instruction), subtasks, swapped(fixture.answer))
    # the scripted model recognizes a variant's instruction once the variant was asked for
    _BY_INSTRUCTION.setdefault(task.instruction, task)
    return task


def task_for_instruction(text: str) -> Task | None:
    """The task whose instruction `text` is (what the scripted model 'understands')."""
    return _BY_INSTRUCTION.get(text.strip())
