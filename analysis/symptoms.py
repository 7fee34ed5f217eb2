"""Where a failure shows, and the dependency path back to where it started.

A failure surfaces as a symptom: a step whose tool failed (error, raised or returned as
text), a step that says it failed (a failure claim: "FAILED", "could not", or a report whose
round of work the coordinator handed out again, whatever its words), or, in a failed run,
the final answer. The
trouble usually started earlier, so each symptom is walked back through the critical
transition graph:

- a repeated error or a repeated call goes back to its first occurrence (loop and
  same-error edges);
- an error that names a value the failing step was handed goes back to the step that
  handed it over (the latest step of another agent whose message carried that value),
  unless the failing call left out a value that hand-over gave it (then the call is to blame);
- an error about an id its own call did not carry (state another step should have set) goes
  back to the agent a coordinator handed that id and who made no call carrying it, or, when
  the id was reported to the coordinator and never handed on, to the hand-over that handed
  on another id instead; a value the task itself gave is no fault of the step relaying it;
- a failure claim with an error in the claimant's own work since it was handed the task is
  explained by that error; without one, by what it was handed (the hand-over step), which
  may itself be a failure claim, explained in turn.
The origin of each symptom is a candidate root cause; the path is its evidence. Which steps
are symptoms is for the symptom detectors of evidence/ (tool_errors, failure_claims,
final_answer, unfounded_answer) to say; `explain` walks each back.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from .graph import LOOP, SAME_ERROR, TransitionGraph
from .roles import hub_agents, in_words_only, is_coordinator, single_agent
from .transition_unit import TransitionUnit
from .values import extract_artifacts, is_identifier

MAX_DEPTH = 12


@dataclass
class Symptom:
    step: int
    kind: str  # "error" | "failure_claim" | "final_answer"
    origin: int
    path: list[int] = field(default_factory=list)  # symptom first, origin last
    reason: str = ""
    # a final answer that names none of the values its tool results showed
    # (answer_carries_no_finding), which the hypotheses weigh apart from a plain wrong answer
    carries_no_finding: bool = False


def claims_failure(u: TransitionUnit) -> bool:
    """A text step that reports failure: in so many words, or by its round being handed out
    again (failures.mark_failed_rounds), whatever its words."""
    if u.action["calls"] or u.status == "error":
        return False
    return (u.claims_failure and not u.claims_success) or u.round_failed


def handover_source(units: list[TransitionUnit], k: int) -> int | None:
    """What step k's agent was handed: the latest earlier step that said something (an
    instruction, a report, a message) and was another agent's, or, in an instrumented
    session, the agent's own in words only. A single agent that writes itself a plan or an
    instruction and then acts is handed its work by that step, as a worker is by its
    coordinator's. (In a message log every step is words only: there what an agent was
    handed is what another speaker said.)"""
    agent = units[k].agent
    for j in range(k - 1, -1, -1):
        own_words = units[j].kind == "llm" and in_words_only(units[j])
        if own_words and units[j].agent == agent and _acknowledgement(units, j):
            continue  # what it was handed is the step it acknowledged
        if own_words or (units[j].agent != agent and units[j].action["text"].strip()):
            return j
    return None


def _acknowledgement(units: list[TransitionUnit], j: int) -> bool:
    """Step j answers another agent's words in words that name nothing and do nothing ("Sure,
    one moment."): it says the work was taken, not what the work is."""
    return (j > 0 and in_words_only(units[j]) and not units[j].artifacts_consumed
            and units[j - 1].agent != units[j].agent and bool(units[j - 1].action["text"].strip()))


def _givers(units: list[TransitionUnit]) -> set[str]:
    """Who hands work out (as in failures.mark_failed_rounds): the conversation's hub, or an
    agent named as a coordinator. A worker's report back is no hand-over."""
    return hub_agents([w.agent for w in units]) | {w.agent for w in units if is_coordinator(w.agent)}


def _uncarried_ids(u: TransitionUnit, numbers: bool = False) -> list[str]:
    """The ids (and with `numbers`, the amounts) an error step's message names that its own
    calls did not carry: the failure is about other state ("nothing done yet for X", "still
    holds 250.00"), not about what the call asked."""
    if not u.action["calls"] or u.kind != "llm":
        return []
    carried = extract_artifacts(" ".join(u.call_signatures))
    return sorted(v for v in extract_artifacts(u.error_text or "") - carried if numbers or is_identifier(v))


def given_by_task(units: list[TransitionUnit]) -> set[str]:
    """The values the session's first input showed (the task), for instrumented sessions."""
    return extract_artifacts(units[0].observation) if units and units[0].kind == "llm" else set()


def swapped_value(units: list[TransitionUnit], k: int) -> tuple[int, str] | None:
    """(step, value) when error step k names an id its own call did not carry that was
    reported to a coordinator (said right before its turn) but that no coordinator's step
    ever handed on: the hand-over that should have carried it handed on another id instead,
    one its input never showed it (invented), else one drawn from the same report."""
    givers = _givers(units)
    if not givers and single_agent(units):
        return _swapped_own_value(units, k)
    for value in _uncarried_ids(units[k]):
        reports = [j for j in range(k - 1) if units[j].agent not in givers and units[j + 1].agent in givers
                   and value in extract_artifacts(units[j].action["text"])]
        if not reports or any(value in extract_artifacts(units[j].action["text"])
                              for j in range(reports[0], k) if units[j].agent in givers):
            continue
        handovers = [j for j in range(reports[-1] + 1, k - 1) if units[j].agent in givers
                     and not units[j].action["calls"] and units[j + 1].agent not in givers]
        invented = [j for j in handovers if any(is_identifier(v) for v in units[j].unsupported)]
        # Else the first hand-over back to the reporter that drew on the report, V left out.
        reported = extract_artifacts(units[reports[-1]].action["text"]) - {value}
        drawn = [j for j in handovers if units[j + 1].agent == units[reports[-1]].agent
                 and {v for v in extract_artifacts(units[j].action["text"]) & reported if is_identifier(v)}
                 - given_by_task(units)]
        if invented or drawn:
            return (invented or drawn)[0], value
    return None


def _reads_a_result(units: list[TransitionUnit], j: int) -> bool:
    """Whether a lone agent's words-only step j comes right after a call: its report of what
    the call returned, not an instruction to itself."""
    return j > 0 and bool(units[j - 1].action["calls"])


def _swapped_own_value(units: list[TransitionUnit], k: int) -> tuple[int, str] | None:
    """swapped_value for a single agent: its reports are its words right after a call (what
    it read from a result), its hand-overs its other words-only steps (an instruction to
    itself). When error step k is about an id a report named that no later instruction
    named, the first instruction after the report that carried an id its input never
    showed it (else one drawn from the same report) handed on that id instead."""
    said = [j for j in range(1, k) if in_words_only(units[j])]
    reporting = [j for j in said if _reads_a_result(units, j)]
    instructions = [j for j in said if not _reads_a_result(units, j)]
    for value in _uncarried_ids(units[k]):
        reports = [j for j in reporting if value in extract_artifacts(units[j].action["text"])]
        if not reports or any(value in extract_artifacts(units[j].action["text"])
                              for j in instructions if j > reports[0]):
            continue
        handovers = [j for j in instructions if reports[-1] < j < k - 1]
        invented = [j for j in handovers if any(is_identifier(v) for v in units[j].unsupported)]
        reported = extract_artifacts(units[reports[-1]].action["text"]) - {value}
        drawn = [j for j in handovers if {v for v in extract_artifacts(units[j].action["text"]) & reported
                                          if is_identifier(v)} - given_by_task(units)]
        if invented or drawn:
            return (invented or drawn)[0], value
    return None


def earlier_invention(units: list[TransitionUnit], p: int) -> int | None:
    """An earlier hand-over by the agent of hand-over p that carried an id its input never
    showed it, while p carries none: p asked for what it could (it is blamed only for
    what it handed over), and the invented id is where the work went off course (the
    worker sent to the wrong record, so p could not hand over what was needed)."""
    u = units[p]
    if u.kind != "llm" or any(is_identifier(v) for v in u.unsupported):
        return None
    return next((j for j in range(p) if units[j].agent == u.agent and units[j].kind == "llm"
                 and not units[j].action["calls"] and any(is_identifier(v) for v in units[j].unsupported)), None)


def neglected_handover(units: list[TransitionUnit], k: int) -> tuple[int, str] | None:
    """(step, value) when error step k names an id or an amount its own call did not carry
    (the failure is about other state: "nothing done yet for X", "still holds 250.00") and X
    was last handed over to an agent (a coordinator's step naming X right before another
    agent's turn) who then made no call carrying X:
    the work on X was due there and was not done (skipped, or done on another value). If it
    was done as handed, the report the hand-over drew X from is returned when it misread
    its own tool results (it paired X with another record's values, or left records out).
    The taker's first step of that round is returned, before any relay of the failing call's
    own values: a faithful relay of the request is not where the state went missing."""
    givers = _givers(units)
    if not givers and single_agent(units):
        return _neglected_own_handover(units, k)
    for value in _uncarried_ids(units[k], numbers=True):
        giver = next((j for j in range(k - 1, -1, -1) if units[j].agent in givers and units[j + 1].agent != units[j].agent
                      and not units[j].action["calls"] and value in extract_artifacts(units[j].action["text"])), None)
        if giver is None or units[giver + 1].agent == units[k].agent:
            continue
        taker = units[giver + 1].agent
        end = next((j for j in range(giver + 1, k) if units[j].agent == units[giver].agent), k)
        acted = _calls_carry(units, value, (j for j in range(giver + 1, end) if units[j].agent == taker))
        if not acted:
            return _first_act(units, giver + 1, end), value
        # Done as handed, and still not done: what the hand-over relayed about the id was
        # wrong at its source, a report that misread its own tool results.
        source = misread_source(units, giver, value, givers)
        if source is not None:
            return source, value
    return None


def _first_act(units: list[TransitionUnit], start: int, end: int) -> int:
    """The first step from `start` (the taker's first step after a hand-over) to `end` where
    the taker did something: a call, or words naming a value. An acknowledgement before it
    ("Sure, one moment.": no call, no value) only says the work was taken, not how; `start`
    itself when the round has no such step."""
    taker = units[start].agent
    return next((j for j in range(start, end) if units[j].agent == taker and not _acknowledgement(units, j)), start)


def _calls_carry(units: list[TransitionUnit], value: str, steps: Iterable[int]) -> bool:
    """Whether a call of one of `steps` passed `value` (a words-only step's text signature is
    no call)."""
    return any(value in extract_artifacts(" ".join(units[j].call_signatures))
               for j in steps if units[j].action["calls"])


def misread_source(units: list[TransitionUnit], p: int, value: str, givers: set[str]) -> int | None:
    """The report hand-over p drew `value` from (the latest earlier step of a non-giver that
    said it), when that report misread its own tool results (paired a value with another
    record, restated a field, left records out): the relay was faithful, the report was not."""
    source = next((j for j in range(p - 1, -1, -1) if units[j].agent not in givers
                   and value in extract_artifacts(units[j].action["text"])), None)
    if source is not None and (units[source].misattributed or units[source].restated or units[source].omitted):
        return source
    return None


def _neglected_own_handover(units: list[TransitionUnit], k: int) -> tuple[int, str] | None:
    """neglected_handover for a single agent: its hand-overs are its own words-only steps
    that it acts on at once (a thought, a plan step, then the call: "reserve 2 of X", then
    reserve(...)). When error step k is about X, and the latest such step that named X was
    followed by calls none of which carried X before the agent spoke in words again, the
    first of those calls is where the work on X was due."""
    for value in _uncarried_ids(units[k], numbers=True):
        said = next((j for j in range(k - 2, -1, -1) if in_words_only(units[j]) and units[j + 1].action["calls"]
                     and value in extract_artifacts(units[j].action["text"])), None)
        if said is not None:
            end = next((j for j in range(said + 1, k) if in_words_only(units[j])), k)
            if end < k and not _calls_carry(units, value, range(said + 1, end)):
                return said + 1, value
            continue  # acted on as said, or the failing call is that act itself
        # Not acted on at all: after the result that showed the value, the first words that
        # named it other than the report of that result handed it on; the next step was due
        # to act on it, and no call ever did.
        shown = next((j for j in range(k - 1, -1, -1) if value in units[j].artifacts_produced and units[j].feedback), None)
        if shown is None or _calls_carry(units, value, range(shown + 1, k)):
            continue
        handed = next((j for j in range(shown + 1, k - 1) if in_words_only(units[j]) and not _reads_a_result(units, j)
                       and value in extract_artifacts(units[j].action["text"])), None)
        if handed is not None:
            return handed + 1, value
    return None


def _dropped(handover: TransitionUnit, u: TransitionUnit) -> set[str]:
    """Values a hand-over's words gave that the failing call left out of its arguments: the
    call did not do what it was handed, so the failure is the call's, not the hand-over's."""
    if not u.action["calls"]:
        return set()
    given = extract_artifacts(handover.action["text"])
    # The tool the hand-over says to use ("book it with ship_2") is no value to pass on.
    return given - u.artifacts_consumed - {str(c["name"]).lower() for c in u.action["calls"]}


def _first_occurrence(graph: TransitionGraph, k: int, path: list[int]) -> int:
    """Back along same-error and loop edges to the first time this happened (an earlier
    failure the agent got past, a timeout before the real refusal, is not this one)."""
    for _ in range(MAX_DEPTH):
        prev = [e.src for e in graph.in_edges(k, (SAME_ERROR, LOOP)) if e.src < k and not graph.units[e.src].recovered]
        if not prev:
            return k
        k = min(prev)
        path.append(k)
    return k


def explain(graph: TransitionGraph, k: int, path: list[int] | None = None, depth: int = 0) -> tuple[int, list[int], str]:
    """(origin, path, reason) for a symptom at step k."""
    units = graph.units
    path = path if path is not None else [k]
    u = units[k]
    if depth > MAX_DEPTH:
        return k, path, "walk-back depth limit"
    if u.status == "error":
        if u.kind == "message" and u.feedback and not u.action["calls"]:
            # A tool's output in a message log: the failure belongs to the call that asked for it.
            caller = next((j for j in range(k - 1, -1, -1) if units[j].action["calls"]), None)
            if caller is not None:
                path.append(caller)
                k, u = caller, units[caller]
        first = _first_occurrence(graph, k, path)
        f = units[first]
        neglected = neglected_handover(units, first)
        if neglected is not None:
            taker, value = neglected
            value = f.as_written([value])[0]
            path.append(taker)
            misread = bool(units[taker].misattributed or units[taker].restated or units[taker].omitted)
            return taker, path, (f"the failure is about {value}, which step {taker} "
                                 + ("reported from a misread of its tool results" if misread else
                                    "was handed and did not act on"))
        swapped = swapped_value(units, first)
        if swapped is not None:
            step, value = swapped
            value = f.as_written([value])[0]
            path.append(step)
            return step, path, (f"the failure is about {value}, which was reported but never handed on; step {step} "
                                "handed on another instead")
        named = extract_artifacts(f.error_text or units[path[0]].error_text or "") & f.artifacts_consumed
        p = handover_source(units, first)
        if p is not None:
            # A value the task itself gave, relayed as given, is no fault of the relay.
            named -= given_by_task(units) - set(units[p].unsupported)
        if named and p is not None and named & units[p].artifacts_consumed and not _dropped(units[p], f):
            path.append(p)
            handed = sorted(named & units[p].artifacts_consumed)
            givers = _givers(units)
            for v in handed:
                source = misread_source(units, p, v, givers)
                if source is not None:  # relayed as reported, and the report had misread it
                    path.append(source)
                    return source, path, (f"the failing value {f.as_written([v])[0]} was handed over by step {p} "
                                          f"as step {source} reported it, from a misread of its tool results")
            value = f.as_written(handed[:1])[0]
            return p, path, f"the failing value {value} was handed over by step {p}"
        return first, path, "its own action failed" if first == k else f"first occurrence of the failure at step {first}"
    if claims_failure(u):
        p = handover_source(units, k)
        own_errors = [j for j in _round_errors(units, k, p) if units[j].failed]
        if own_errors:
            path.append(own_errors[0])
            return explain(graph, own_errors[0], path, depth + 1)
        if p is None:
            return k, path, "claims failure with nothing handed to it"
        path.append(p)
        if claims_failure(units[p]) or units[p].status == "error":
            return explain(graph, p, path, depth + 1)
        first = _first_occurrence(graph, p, path)  # a hand-over said again: blame its first saying
        invented = earlier_invention(units, first)
        if invented is not None:
            path.append(invented)
            return invented, path, (f"claims failure without an error of its own: what step {p} handed over, "
                                    f"after step {invented} handed on {units[invented].as_written(units[invented].unsupported[:1])[0]}, "
                                    "which its input never showed it")
        return first, path, f"claims failure without an error of its own: what step {p} handed over" + \
            (f", first said at step {first}" if first != p else "")
    return k, path, "the run's final answer"


def _round_errors(units: list[TransitionUnit], k: int, p: int | None) -> list[int]:
    """The error steps of report k's agent in the round it reports on: after what it was
    handed (step p, handover_source) and before the report."""
    start = (p + 1) if p is not None else 0
    return [j for j in range(start, k) if units[j].agent == units[k].agent and units[j].status == "error"]


def reports_a_failure_got_past(units: list[TransitionUnit], k: int) -> bool:
    """Whether failure report k is about errors its agent got past only after reporting them
    (a timeout reported, the same request handed out again, the same calls done): every
    error of its round was recovered by a later step, so nothing of the run went wrong there."""
    own = _round_errors(units, k, handover_source(units, k))
    return bool(own) and all(units[j].recovered_by is not None and units[j].recovered_by > k for j in own)
