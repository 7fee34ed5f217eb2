"""The scripted `bank-agent` model: reads a conversation of the banking team and returns
the next assistant message, the way a competent LLM would. This module holds its turn logic
(who speaks, what comes next); the text it reads and writes, the edits it acts on and the
slips it can make live beside it:

- :mod:`tracefix.demo.bank_instructions` — how a worker reads its instruction;
- :mod:`tracefix.demo.bank_reports` — a worker's REPORT, written and read back (the
  Orchestrator's :class:`~tracefix.demo.bank_reports.Facts`);
- :mod:`tracefix.demo.bank_edits` — what the model does with an edit it read;
- :mod:`tracefix.demo.bank_faults` — the faulty variants each step can host.

Everything is derived from the messages (the role from the system prompt, the task from
the orchestrator's first user message, progress and facts from the reports), never from
hidden state, so a replay that feeds back a recorded prefix gets the same continuation.

`decide()` returns the correct message together with the faulty variants this step could
host (see :mod:`tracefix.demo.faults`) and, for each, the :class:`~tracefix.demo.needs.Need`
an edit must meet to prevent it; the fault injector picks one or none.

Edits (:mod:`tracefix.demo.edits`) are user turns the team's own protocol did not send. When
the model reads them (``reads_edits``, drawn per request by the server) it acts on what they
ask (:mod:`tracefix.demo.edit_reader`): values are adopted into the call or instruction, a
call it is told not to make (or that was already done) is not made, an argument it is told to
leave out is left out, "answer now" answers now, right or wrong; a slip is avoided only when
the edit decides what the slip corrupts; what the reader cannot read is ignored. An edit
lives only in the request it was added to; it reaches later steps only through what the
agent does with it (an orchestrator relays what it says about a worker's action as a note
in its instruction). Two behaviours make a single fault cascade realistically instead of
being silently repaired:

* a worker that sees one of its own tool calls fail retries it once, identically, then
  reports failure; later, asked again, it copies its earlier failed call (in-context
  repetition), unless an edit in front of it decides what the call got wrong;
* the orchestrator, retrying a failed sub-task after a REVISED PLAN, re-sends its earlier
  instruction verbatim unless an edit in front of it decides what the instruction lacked;
  after two re-plans it gives up with a final answer saying so.
"""
from __future__ import annotations

import functools
import re

from . import bank_edits
from .bank_content import content
from .bank_edits import adopt_arguments, adopt_ids, relays, repairs, resends
from .bank_faults import instruction_faults, report_faults, tool_faults
from .bank_instructions import instruction_index, parse_instruction
from .bank_reports import Facts, Unresolved, failed, is_report, report
from .db import BankDB
from .edit_reader import Asks
from .edits import NOTE_MARK, split_note
from .scripted import Decision, StepInfo, call_id, fault_free_run, text_message, tool_call_message, tool_calls
from .tasks import Subtask, Task, get_task, task_for_instruction
from .team import ORCHESTRATOR, WORKERS, Team, classify_orchestrator_output, role_of
from .tools import MUTATING_TOOLS, WORKER_TOOLS, BankTools, required_arguments
from .variants import split_id

MAX_REPLANS = 2


def decide(messages: list[dict], tools: list | None = None, reads_edits: bool = False) -> Decision:
    """The next message of the agent this conversation belongs to. With `reads_edits` the
    model acts on the edits in front of it; without, it passes over them."""
    role = role_of(messages)
    if role == ORCHESTRATOR:
        return _orchestrator(messages, reads_edits)
    if role in WORKERS:
        return _worker(role, messages, reads_edits)
    return Decision(role, "chat", text_message(
        "bank-agent (scripted demo model): I play the agents of tracefix's banking demo. "
        "Give me a system prompt naming the Orchestrator or a worker."))


@functools.lru_cache(maxsize=None)
def fault_free_steps(task_id: str) -> tuple[StepInfo, ...]:
    """Every LLM step of the task's fault-free run: agent, phase and which faults it can host."""
    task = get_task(task_id)
    return fault_free_run(decide, lambda llm: Team(llm, BankTools(_fresh_db(task_id)).call).run(task.instruction))


def _fresh_db(task_id: str) -> BankDB:
    return BankDB(content(split_id(task_id)[1]).state)


@functools.lru_cache(maxsize=None)
def fault_free_outcome(task_id: str) -> tuple[str, tuple[tuple[str, dict], ...]]:
    """The task's fault-free run played in-process: its final answer and the database changes
    it made ((tool, arguments) of each successful mutating call), what a variant is scored by."""
    tools, changes = BankTools(_fresh_db(task_id)), []

    def call(name: str, arguments: dict):
        result = tools.call(name, arguments)
        if name in MUTATING_TOOLS:
            changes.append((name, dict(arguments)))
        return result
    answer = Team(lambda agent, messages, offered: decide(messages, offered).message, call).run(
        get_task(task_id).instruction)
    return answer, tuple(changes)


# --- Orchestrator ---------------------------------------------------------------------------

def _task_of(messages: list[dict]) -> Task | None:
    for m in messages:
        if m.get("role") == "user" and str(m.get("content", "")).startswith("Task:"):
            return task_for_instruction(str(m["content"])[len("Task:"):])
    return None


def _plan_lines(subtasks: tuple[Subtask, ...]) -> str:
    lines = [f"{i}. {s.summary}" for i, s in enumerate(subtasks, 1)]
    lines.append(f"{len(subtasks) + 1}. Answer the customer.")
    return "\n".join(lines)


def _is_protocol_turn(m: dict) -> bool:
    """A user turn the team sends the orchestrator itself: the task or a worker's report."""
    content = str(m.get("content") or "")
    return content.startswith("Task:") or content.startswith("REPORT")


def _orchestrator(messages: list[dict], reads_edits: bool) -> Decision:
    task = _task_of(messages)
    if task is None:
        return Decision(ORCHESTRATOR, "final", text_message(
            "FINAL ANSWER: I could not identify a banking task in this conversation."))
    facts = Facts()
    progress, replans, spoke = 0, 0, False
    sent: dict[int, str] = {}  # sub-task index -> the last instruction sent for it
    last = None
    pending_edits: list[str] = []  # edits since the orchestrator last spoke
    for m in messages:
        if m.get("role") == "system":
            continue
        if m.get("role") == "user" and not _is_protocol_turn(m):
            pending_edits.append(str(m.get("content") or ""))
            continue
        if m.get("role") == "assistant":
            spoke = True
            pending_edits = []
            kind, _, text = classify_orchestrator_output(m.get("content") or "")
            if kind == "plan" and re.match(r"REVISED", text, re.I):
                replans += 1
            elif kind == "instruct":
                sent[progress] = m.get("content") or ""
        elif is_report(m):
            said = str(m["content"])
            if not failed(said):
                facts.learn(said)
                if progress < len(task.subtasks):
                    facts.believe(task.subtasks[progress], said)
                progress += 1
        last = m
    sub = task.subtasks[progress] if progress < len(task.subtasks) else None
    edit = bank_edits.read(pending_edits, sub.action if sub else None) if reads_edits else None

    if not spoke:
        return Decision(ORCHESTRATOR, "plan", text_message(f"PLAN:\n{_plan_lines(task.subtasks)}"), edit=edit)
    if last is not None and is_report(last) and failed(str(last["content"])):
        reason = str(last["content"]).split("FAILED.", 1)[-1].strip().split("\n")[0]
        if replans >= MAX_REPLANS:
            return Decision(ORCHESTRATOR, "final", text_message(
                f"FINAL ANSWER: I could not complete the request after {replans + 1} attempts: {reason}"), edit=edit)
        return Decision(ORCHESTRATOR, "replan", text_message(
            f"REVISED PLAN (attempt {replans + 2}): the last step failed ({reason}). Retry from there:\n"
            f"{_plan_lines(task.subtasks[progress:])}"), edit=edit)
    if progress >= len(task.subtasks):
        try:
            answer = facts.resolve(task.answer)
        except Unresolved as exc:
            answer = f"I could not complete the request: I never learned {exc}."
        return Decision(ORCHESTRATOR, "final", text_message(f"FINAL ANSWER: {answer}"), edit=edit)

    assert sub is not None
    if edit is not None and (edit.stop is True or sub.action in edit.forbid):
        # the edit says the work is done, or that this action is: the model believes it
        return Decision(ORCHESTRATOR, "final", text_message(
            "FINAL ANSWER: All requested actions for the customer have been completed."), edit=edit)
    try:
        fresh = f"{sub.worker}: {facts.resolve(sub.instruction)}"
    except Unresolved as exc:
        return Decision(ORCHESTRATOR, "final", text_message(
            f"FINAL ANSWER: I could not complete the request: I never learned {exc}."), edit=edit)
    instruction = fresh
    if progress in sent:
        # Retrying: the model repeats itself (see module docstring) unless an edit in front
        # of it decides what the earlier instruction got wrong.
        earlier = split_note(sent[progress])[0]
        if not resends(edit, sub.action):
            instruction = earlier
    instruction = adopt_ids(instruction, edit)
    if edit is not None and edit.handover in WORKERS and edit.handover != sub.worker:
        instruction = edit.handover + instruction[instruction.index(":"):]  # sent to whom the edit says
    if edit is not None and relays(edit, sub.action):
        # what the edit says about the worker's action reaches the worker with the instruction
        instruction += NOTE_MARK + " ".join(edit.text.split())
    decision = Decision(ORCHESTRATOR, "instruct", text_message(instruction), edit=edit)
    decision.hosts.update(instruction_faults(sub, instruction, re.findall(r"[A-Z]+-\d+", fresh), progress,
                                             len(task.subtasks)))
    return decision


# --- Workers --------------------------------------------------------------------------------

def _worker(agent: str, messages: list[dict], reads_edits: bool) -> Decision:
    own = WORKER_TOOLS[agent]
    start = instruction_index(messages)
    if start is None:
        return Decision(agent, "report", text_message(f"REPORT from {agent}: FAILED. I received no instruction."))
    instruction, note = split_note(str(messages[start].get("content") or ""))
    added = [str(m.get("content") or "") for m in messages[start + 1:] if m.get("role") == "user"]
    edit_texts = [note, *added] if reads_edits else []
    before = tool_calls(messages[:start])
    segment = tool_calls([m for m in messages[start + 1:] if m.get("role") != "user"])
    intents, reason = parse_instruction(instruction, own)
    if reason and any(t.strip() for t in edit_texts):
        # an instruction it cannot act on, and an edit saying what to do: act on the edit
        intents, _ = parse_instruction(instruction + " " + " ".join(edit_texts), own)
    done = {c.name: c.result for c in segment if not c.error}
    pending = next((i.tool for i in intents if i.tool not in done), None)
    edit = bank_edits.read(edit_texts, pending) if reads_edits else None
    if not intents:
        return Decision(agent, "report", text_message(
            f"REPORT from {agent}: FAILED. I could not act on this instruction: {reason}."), edit=edit)
    if edit is not None and edit.handover is not None and edit.handover != agent:
        return Decision(agent, "report", text_message(
            f"REPORT from {agent}: FAILED. I was told this is for {edit.handover}, not for me."), edit=edit)
    correct = {i.tool: dict(i.args) for i in intents}

    if segment and segment[-1].error:
        last = segment[-1]
        if sum(1 for c in segment if c.name == last.name and c.error) >= 2:
            return Decision(agent, "report", text_message(
                f"REPORT from {agent}: FAILED. {last.name} failed twice: {last.error}"), edit=edit)
        right = _fill(correct.get(last.name), done)
        if right is None or not repairs(edit, last.args, right):
            # retry as is, with whatever values the edit asks for
            return _tool_decision(agent, messages, last.name, adopt_arguments(last.name, dict(last.args), edit), edit)

    for intent in intents:
        if intent.tool in done:
            continue
        if edit is not None and (intent.tool in edit.forbid or edit.stop is True):
            # told the action is done or not to do it: the worker reports it done without the call
            return Decision(agent, "report", text_message(report(agent, segment, [f"- {intent.tool}: done"])),
                            edit=edit)
        other = next((t for t in (edit.call if edit else []) if t in own and t not in done and t != intent.tool
                      and t not in correct), None)
        if other is not None:
            # asked for another of its tools first: called with the ids the instruction gives
            args = adopt_arguments(other, _from_instruction(other, instruction), edit)
            return _tool_decision(agent, messages, other, args, edit)
        args = _fill(dict(intent.args), done)
        if args is None:
            return Decision(agent, "report", text_message(
                f"REPORT from {agent}: FAILED. lookup_customer returned no customer id, so I cannot "
                "call get_accounts."), edit=edit)
        # In-context repetition: an earlier failed call to this tool, never since succeeded.
        history = [c for c in before + segment if c.name == intent.tool]
        if history and history[-1].error and not repairs(edit, history[-1].args, args):
            args = dict(history[-1].args)
        return _tool_decision(agent, messages, intent.tool, adopt_arguments(intent.tool, args, edit), edit)

    decision = Decision(agent, "report", text_message(report(agent, segment)), edit=edit)
    decision.hosts.update(report_faults(agent, segment))
    return decision


def _from_instruction(tool: str, instruction: str) -> dict:
    """Arguments for a tool the instruction does not ask for: the ids of each argument's
    shape that the instruction names (the last one for a destination)."""
    args: dict = {}
    for argument in required_arguments(tool):
        shape = r"\$\s*([\d.]+)" if argument == "amount" else bank_edits.SHAPES.get(argument, "$^")
        found = re.findall(shape, instruction)
        if found:
            args[argument] = found[0] if argument == "from_account" else found[-1]
    return args


def _fill(args: dict | None, done: dict) -> dict | None:
    """Arguments with what earlier results supply (get_accounts' customer id from the lookup)."""
    if args is None:
        return None
    if args.get("customer_id", "") is None:
        found = done.get("lookup_customer")
        args["customer_id"] = found.get("customer_id") if isinstance(found, dict) else None
        if not isinstance(args["customer_id"], str):
            return None
    return args


def _tool_decision(agent: str, messages: list[dict], tool: str, args: dict, edit: Asks | None = None) -> Decision:
    cid = call_id(messages, tool)
    decision = Decision(agent, "tool", tool_call_message(tool, args, cid), tool=tool, edit=edit)
    decision.hosts.update(tool_faults(agent, messages, tool, args, cid))
    return decision
