"""The scripted `warehouse-crew` model: reads a conversation of the warehouse crew and
returns the next assistant message, as a competent LLM would, with the faulty variants
each step could host (the same kinds as the bank's model, adapted to this crew). This module
holds its turn logic; beside it, :mod:`tracefix.demo.warehouse_notes` (how a crew member
reads a note), :mod:`tracefix.demo.warehouse_replies` (a crew member's reply, written and
read back by the Dispatcher) and :mod:`tracefix.demo.warehouse_faults` (the slips).

Everything is derived from the messages (the role from the system prompt, the ticket from
the Dispatcher's first user turn, facts from the crew's replies), so a replay that feeds
back a recorded prefix gets the same continuation. Two habits make one slip cascade the way
it does with real agents: a crew member who sees a tool refuse says it is stuck, and, given
the same job again, repeats its earlier refused call; the Dispatcher, taking a second run
at a stuck job, re-sends its earlier note verbatim, then gives up.

Edits (user turns the crew's protocol did not send, read with ``reads_edits``) are acted on
as they read (:mod:`tracefix.demo.warehouse_edits`): the ids and sums they ask for are used,
right or wrong; an action they say not to do, or that was already done, is not done; "reply
now" replies now. A slip is prevented only when the edit decides what it corrupts
(:class:`~tracefix.demo.needs.Need`), and the two habits above are broken only by an
edit that decides something about the job. The Dispatcher relays nothing to the crew: an
edit works only at the step it was added to.
"""
from __future__ import annotations

import functools
import re

from . import warehouse_edits
from .edit_reader import Asks
from .edits import worker_protocol
from .warehouse_edits import adopt_arguments, adopt_in_note, decides_any
from .scripted import Decision, StepInfo, call_id, fault_free_run, text_message, tool_call_message
from .warehouse_faults import done_claim, note_faults, reply_faults, tool_faults
from .warehouse_notes import parse_note
from .warehouse_replies import believe, crew_calls, is_reply, learn, refusal, reply, resolve, stuck
from .warehouse_tasks import Job, get_ticket, ticket_for_text
from .warehouse_team import CREW, DISPATCHER, REPLY_MARK, TICKET_MARK, Crew, classify_dispatcher_output, role_of
from .variants import split_id
from .warehouse_content import content
from .warehouse_world import CREW_TOOLS, MUTATING_TOOLS, WarehouseTools, WarehouseWorld

MODEL = "warehouse-crew"
MAX_RETAKES = 1


def decide(messages: list[dict], tools: list | None = None, reads_edits: bool = False) -> Decision:
    role = role_of(messages)
    if role == DISPATCHER:
        return _dispatcher(messages, reads_edits)
    if role in CREW:
        return _crew(role, messages, reads_edits)
    return Decision(role, "chat", text_message(
        "warehouse-crew (scripted demo model): I play tracefix's warehouse crew; give me a system prompt "
        "with 'Your role: Dispatcher.' or a crew member's name."))


@functools.lru_cache(maxsize=None)
def fault_free_steps(ticket_id: str) -> tuple[StepInfo, ...]:
    """Every LLM step of the ticket's fault-free run: agent, phase, the faults it can host."""
    ticket = get_ticket(ticket_id)
    return fault_free_run(decide, lambda llm: Crew(llm, WarehouseTools(_fresh_world(ticket_id)).call).run(ticket.text))


def _fresh_world(ticket_id: str) -> WarehouseWorld:
    return WarehouseWorld(content(split_id(ticket_id)[1]).state)


@functools.lru_cache(maxsize=None)
def fault_free_outcome(ticket_id: str) -> tuple[str, tuple[tuple[str, dict], ...]]:
    """The ticket's fault-free run played in-process: its reply and the world changes it made
    ((tool, arguments) of each mutating call the tools accepted), what a variant is scored by."""
    tools, changes = WarehouseTools(_fresh_world(ticket_id)), []

    def call(name: str, arguments: dict):
        result = tools.call(name, arguments)
        if name in MUTATING_TOOLS and refusal(result) is None:
            changes.append((name, dict(arguments)))
        return result
    reply = Crew(lambda agent, messages, offered: decide(messages, offered).message, call).run(
        get_ticket(ticket_id).text)
    return reply, tuple(changes)


# --- Dispatcher -----------------------------------------------------------------------------------

def _checklist(jobs: tuple[Job, ...]) -> str:
    return "\n".join([f"- {j.line}" for j in jobs] + ["- reply to the customer"])


def _dispatcher(messages: list[dict], reads_edits: bool) -> Decision:
    first = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    ticket = ticket_for_text(first[len(TICKET_MARK):]) if first.startswith(TICKET_MARK) else None
    if ticket is None:
        return Decision(DISPATCHER, "final", text_message(f"{REPLY_MARK} Sorry, I cannot tell what this ticket asks."))
    facts: dict[str, str] = {}
    progress, retakes, spoke, last = 0, 0, False, None
    sent: dict[int, str] = {}
    pending: list[str] = []
    for m in messages:
        if m.get("role") == "system":
            continue
        if m.get("role") == "user" and not is_reply(m) and not str(m.get("content") or "").startswith(TICKET_MARK):
            pending.append(str(m.get("content") or ""))  # an edit: neither the ticket nor a crew reply
            continue
        if m.get("role") == "assistant":
            spoke, pending = True, []
            kind, _, text = classify_dispatcher_output(m.get("content") or "")
            if kind == "plan" and re.search(r"\btake \d", text):
                retakes += 1
            elif kind == "job":
                sent[progress] = m.get("content") or ""
        elif is_reply(m) and stuck(str(m["content"])) is None:
            learned = learn(str(m["content"]))
            facts.update(learned)
            if progress < len(ticket.jobs):
                believe(facts, ticket.jobs[progress], learned)
            progress += 1
        last = m
    job = ticket.jobs[progress] if progress < len(ticket.jobs) else None
    edit = warehouse_edits.read(pending, job.tool if job else None) if reads_edits else None

    if not spoke:
        return Decision(DISPATCHER, "plan", text_message(f"Checklist:\n{_checklist(ticket.jobs)}"), edit=edit)
    reason = stuck(str(last.get("content") or "")) if last is not None and is_reply(last) else None
    if reason is not None:
        if retakes >= MAX_RETAKES:
            return Decision(DISPATCHER, "final", text_message(
                f"{REPLY_MARK} Sorry, this ticket is blocked on our side ({reason}). A colleague will follow up."),
                edit=edit)
        return Decision(DISPATCHER, "replan", text_message(
            f"Checklist, take {retakes + 2} (last job stuck: {reason}):\n{_checklist(ticket.jobs[progress:])}"),
            edit=edit)
    if progress >= len(ticket.jobs):
        return Decision(DISPATCHER, "final", text_message(f"{REPLY_MARK} {resolve(ticket.reply, facts)}"), edit=edit)

    assert job is not None
    if edit is not None and (edit.stop is True or job.tool in edit.forbid):
        # told everything is done, or that this job is: the Dispatcher replies now
        return Decision(DISPATCHER, "final", text_message(f"{REPLY_MARK} All sorted on our side, nothing more to do."),
                        edit=edit)
    note = resolve(job.note, facts)
    if progress in sent and not decides_any(edit, job.tool):
        note = sent[progress]  # a second run at a stuck job: the same note again
    note = adopt_in_note(note, edit)
    if edit is not None and edit.handover in CREW and edit.handover != job.crew:
        note = re.sub(rf"@{re.escape(job.crew)}\b", f"@{edit.handover}", note)  # sent to whom the edit says
    decision = Decision(DISPATCHER, "instruct", text_message(note), edit=edit)
    decision.hosts.update(note_faults(job, note, progress, len(ticket.jobs)))
    return decision


# --- crew members ------------------------------------------------------------------------------

def _crew(agent: str, messages: list[dict], reads_edits: bool) -> Decision:
    is_note = worker_protocol(messages)
    start = max((i for i, m in enumerate(messages) if m.get("role") == "user" and is_note(i, m)), default=None)
    if start is None:
        return Decision(agent, "report", text_message(f"{agent} here. Stuck: nobody sent me a job."))
    note = str(messages[start].get("content") or "")
    added = [str(m.get("content") or "") for m in messages[start + 1:] if m.get("role") == "user"]
    intent, why = parse_note(note, CREW_TOOLS[agent])
    if intent is None and reads_edits and added:
        intent, _ = parse_note(note + " " + " ".join(added), CREW_TOOLS[agent])
    edit = warehouse_edits.read(added, intent.tool if intent else None) if reads_edits else None
    if intent is None:
        return Decision(agent, "report", text_message(f"{agent} here. Stuck: {why}."), edit=edit)
    if edit is not None and edit.handover is not None and edit.handover != agent:
        return Decision(agent, "report", text_message(f"{agent} here. Stuck: I was told this is {edit.handover}'s job."),
                        edit=edit)
    segment = crew_calls([m for m in messages[start + 1:] if m.get("role") != "user"])
    if segment:
        done = segment[-1]
        if done.error:
            return Decision(agent, "report", text_message(f"{agent} here. Stuck: {done.error}"), edit=edit)
        decision = Decision(agent, "report", text_message(reply(agent, segment)), edit=edit)
        decision.hosts.update(reply_faults(agent, segment))
        return decision
    args = dict(intent.args)
    if edit is not None and (intent.tool in edit.forbid or edit.stop is True):
        # told the job is done or not to do it: says it is done, without the call
        return Decision(agent, "report", done_claim(agent, intent.tool, args), edit=edit)
    earlier = [c for c in crew_calls(messages[:start]) if c.name == intent.tool]
    if earlier and earlier[-1].error and not decides_any(edit, intent.tool):
        args = dict(earlier[-1].args)  # the same job again: the same call again
    return _tool_decision(agent, messages, intent.tool, adopt_arguments(intent.tool, args, edit), edit)


def _tool_decision(agent: str, messages: list[dict], tool: str, args: dict, edit: Asks | None) -> Decision:
    cid = call_id(messages, tool)
    decision = Decision(agent, "tool", tool_call_message(tool, args, cid), tool=tool, edit=edit)
    decision.hosts.update(tool_faults(agent, tool, args, cid))
    return decision
