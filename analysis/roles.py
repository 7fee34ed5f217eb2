"""Who plans and who works, and what phase a step is in: the coordinator (by a
coordinator-like name, `is_coordinator`, or by the conversation's shape: `hub_agents` in an
instrumented session, `coordinating_speaker` in a message log), the agent behind a speaker
label (`agent_behind`, `speaker_of`), a step in words only, a session of one agent.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Sequence

from .transition_unit import TransitionUnit


# The speakers of a message log that are people, not agents (the one who asks).
HUMAN_ROLES = {"user", "human"}
# Agent names that coordinate others (the planner): their text steps are plans or instructions.
# A generic list of English role nouns, none an app's own (the bank's "Orchestrator" is found
# by the conversation's shape, `hub_agents`, as the warehouse's "Dispatcher" always was):
# bench/localization.py --perturb agents renames every agent and is the check that the
# analysis does not rest on it. The one definition of who plans: replay's trial segmentation
# and attribution ask `coordinators` too.
_COORDINATOR = re.compile(r"planner|manager|supervisor|coordinator|lead|router|boss", re.I)
# Tool names that hand work to another agent rather than act on the world.
DELEGATION_TOOL = re.compile(r"delegat|handoff|hand_off|transfer_to_|ask_|instruct|assign|dispatch|call_agent|route", re.I)
# Speakers in message logs that are tools or environments rather than agents (Computer_terminal).
TOOL_SPEAKER = re.compile(r"executor|terminal|computer|(?:^|_)tool(?:$|_)|environment", re.I)
# A plan is read from its shape, a numbered list (a line that starts "1.", or "1. ... 2. ..."
# inline), not from a protocol's words ("PLAN", "REVISED PLAN", "FINAL ANSWER", "done"): a
# coordinator's words-only step that lays one out plans (a first plan or a revised one alike),
# its last step answers, any other step of its instructs.
_PLAN_TEXT = re.compile(r"^\s*1[.):]\s|\s1[.):]\s.*?\s2[.):]\s", re.M | re.S)


# What a message log adds to an agent's name in its speaker labels: "(thought)", "(-> Coder)".
_LABEL_DECORATION = re.compile(r"\s*\(.*\)\s*$")


def agent_behind(label: str | None) -> str:
    """The agent behind a speaker label, as written: message logs decorate one agent's turns
    ("Planner (thought)", "Planner (-> Coder)" are both "Planner"); a label that is all
    decoration stays as it is."""
    return _LABEL_DECORATION.sub("", label or "").strip() or (label or "").strip()


def speaker_of(agent: str | None) -> str:
    """The agent behind a speaker label, for comparing (lower case)."""
    return _LABEL_DECORATION.sub("", agent or "").strip().lower()


def is_coordinator(agent: str | None) -> bool:
    """An agent named like one that plans and instructs others rather than acting."""
    return bool(_COORDINATOR.search(agent or ""))


def coordinators(agents: Sequence[str | None]) -> set[str]:
    """The agents of a session that plan and instruct the others: its hub (`hub_agents`) and
    any agent named like a coordinator (`is_coordinator`)."""
    named = [a or "" for a in agents]
    return hub_agents(named) | {a for a in named if is_coordinator(a)}


def hub_agents(agents: list[str]) -> set[str]:
    """The agent that coordinates the others, read from the conversation's shape rather than
    its name: in a session of several agents, the one that takes the first step and takes a
    step right before every other agent's turn (work goes out from it and comes back to it)."""
    if len(set(agents)) < 2:
        return set()
    hub = agents[0]
    handed = all(agents[i - 1] == hub for i in range(1, len(agents))
                 if agents[i] != hub and agents[i - 1] != agents[i])
    return {hub} if handed else set()


def coordinating_speaker(speakers: Sequence[str], agents: Sequence[bool], share: float = 0.8) -> str | None:
    """The speaker work goes out from: the one whose turn comes right before at least `share`
    of every other agent's turns (a change of speaker onto an agent step).

    Unlike `hub_agents` (an instrumented session: the hub takes the first step and
    precedes every other agent's turn, exactly), a message log has human turns, tool outputs
    and a coordinator that may speak second, so this one tolerates exceptions. In a
    two-party exchange both speakers precede each other's turns: the coordinator is then the
    one with clearly more turns (it thinks, instructs and reads reports), else there is none."""
    names = sorted({s for s, is_agent in zip(speakers, agents) if is_agent})
    candidates = []
    for name in names:
        handed = [j for j in range(1, len(speakers))
                  if agents[j] and speakers[j] != name and speakers[j] != speakers[j - 1]]
        if len(handed) >= 2 and sum(speakers[j - 1] == name for j in handed) >= share * len(handed):
            candidates.append(name)
    if len(candidates) < 2:
        return candidates[0] if candidates else None
    turns = Counter(speakers)
    candidates.sort(key=lambda name: (-turns[name], name))
    return candidates[0] if turns[candidates[0]] >= 1.5 * turns[candidates[1]] else None


def phase_for_llm(agent: str, text: str, calls: list[dict], is_last: bool, coordinator: bool) -> str:
    if calls:
        if all(DELEGATION_TOOL.search(c["name"] or "") for c in calls):
            return "instruct"
        return "act"
    if is_last:
        return "answer"
    if coordinator:
        return "plan" if _PLAN_TEXT.search(text) else "instruct"
    return "answer"


def phase_for_message(role: str, agent: str, text: str, is_last: bool) -> str:
    role = (role or "").lower()
    if role in {"tool", "function", "ipython"} or TOOL_SPEAKER.search(agent or ""):
        return "act"
    if is_last:
        return "answer"
    if is_coordinator(agent):
        return "plan" if _PLAN_TEXT.search(text) else "instruct"
    if speaker_of(agent) in HUMAN_ROLES:
        return "instruct"  # the one who asks hands the work out
    if _PLAN_TEXT.search(text):
        return "plan"
    # Any other speaker's message is its work: in a plain log a worker's message is what it
    # did and saw, whatever role label the log gives it ("user", "assistant", its name).
    return "act"


def is_tool_output(unit: TransitionUnit) -> bool:
    """A step that hands on a tool's output: it holds results and makes no call."""
    return bool(unit.feedback) and not unit.action["calls"]


def is_agent_turn(unit: TransitionUnit) -> bool:
    """An agent's own turn: neither a person's message nor a tool's output."""
    return speaker_of(unit.agent) not in HUMAN_ROLES and not is_tool_output(unit)


def mark_coordinating_messages(units: list[TransitionUnit]) -> None:
    """In a message log, the messages of the speaker work goes out from (coordinating_speaker,
    read from the turn-taking) hand work out: an "act" of theirs is an instruction, whatever
    the speaker is called. A named coordinator's were read so already (phase_for_message)."""
    messages = [u for u in units if u.kind == "message"]
    speakers = [speaker_of(u.agent) for u in messages]
    hub = coordinating_speaker(speakers, [is_agent_turn(u) for u in messages])
    for u, speaker in zip(messages, speakers):
        if speaker == hub and u.phase == "act":
            u.phase = "instruct"


def in_words_only(unit: TransitionUnit) -> bool:
    """A step in words only, no call (a report, an answer, an instruction, a plan)."""
    return bool(unit.action["text"].strip()) and not unit.action["calls"]


def single_agent(units: list[TransitionUnit]) -> bool:
    """An instrumented session of one agent: no one else hands it work, so its own
    words-only steps (a plan, a thought, an instruction to itself) do."""
    return bool(units) and all(u.kind == "llm" for u in units) and len({u.agent for u in units}) == 1
