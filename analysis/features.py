"""The per-step feature vector the IsolationForest reads, after AgentTether's phi(TU) (the
HGT reads the graph itself: graph.hetero_view).

Three families: structural (degrees by edge type in the critical transition graph),
attribute (error status, status/feedback inconsistency, repeated call, unsupported values,
token z-scores within the run, output length) and macro (error ratio, length and
position inside the contiguous block of steps sharing a goal or tool family, position in
the run). FEATURE_NAMES is the one list the report shows as "which features".

A step's latency is not among them (AgentTether's phi has it): how long a step took says
how loaded the machine or the network was as much as anything about the step, and with it
the same session, recorded twice, ranked its steps differently (bench/perturb.py `timing`).
A slow step that matters ends in a timeout, which is an error.
"""
from __future__ import annotations

import math
import re
from typing import Any, Sequence

from .graph import ARTIFACT, DEPENDENCY_TYPES, LOOP, SAME_ERROR, TransitionGraph
from .roles import hub_agents, in_words_only, is_coordinator, single_agent
from .transition_unit import TransitionUnit

FEATURE_NAMES: tuple[str, ...] = (
    # structural
    "deg_in_artifact", "deg_out_artifact", "deg_same_error", "deg_loop",
    "deg_in_dependency", "deg_out_dependency", "dependency_reach_back",
    # attribute
    "error", "tool_exception", "tool_error_result", "empty_result",
    "status_feedback_inconsistent", "repeated_call", "unsupported_values",
    "unacted_claim", "n_tool_calls", "input_tokens_z", "output_tokens_z",
    "output_length_log", "output_length_z", "agent_switch",
    # macro
    "macro_error_ratio", "macro_length", "macro_position", "run_position",
    "first_error", "steps_to_next_error",
)

def zscores(values: Sequence[float]) -> list[float]:
    """Within-session z-scores, clamped to ±6 (all zeros for fewer than two values or no spread)."""
    n = len(values)
    if n < 2:
        return [0.0] * n
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / n
    std = math.sqrt(var)
    if std < 1e-9:
        return [0.0] * n
    return [max(min((v - mean) / std, 6.0), -6.0) for v in values]


def _tool_family(name: str | None) -> str | None:
    """search_web / search_files -> "search"; write_file -> "write"."""
    if not name:
        return None
    return re.split(r"[_\-.]", name)[0].lower() or name


def _macro_key(u: TransitionUnit) -> tuple[str, str | None]:
    """Steps in one macro share an agent working on one goal: same agent, same tool family
    (text steps of an agent continue its current block)."""
    return (u.agent, _tool_family(u.tool))


def macro_blocks(units: list[TransitionUnit]) -> list[tuple[int, int]]:
    """Contiguous [start, end) blocks of steps sharing agent and tool family."""
    blocks: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(units) + 1):
        if i == len(units) or _macro_key(units[i]) != _macro_key(units[start]) and \
                not (units[i].agent == units[start].agent and units[i].tool is None):
            blocks.append((start, i))
            start = i
    return blocks


def unacted_claims(units: list[TransitionUnit]) -> list[float]:
    """1.0 for a text step of a worker (an agent that calls tools in this run, or any agent
    that neither coordinates nor is named like a coordinator) that called no tool since it
    was last handed work, and that either reports success in so many words or hands the
    round back as done: its last word to the agent who handed it the work, not a failure
    report (no failure words, the round not handed out again, not the words of a failed
    report said again). A claim without an action, whatever its wording. Message logs carry
    no calls: 0."""
    hubs = hub_agents([u.agent for u in units if u.kind == "llm"])
    tool_users = {u.agent for u in units if u.action["calls"]}
    tool_users |= {u.agent for u in units if u.kind == "llm" and not is_coordinator(u.agent) and u.agent not in hubs}
    out = [0.0] * len(units)
    acted: dict[str, bool] = {}
    failed_reports: set[tuple[str, str]] = set()
    for i, u in enumerate(units):
        before = units[i - 1] if i > 0 else None
        after_own_words = before is not None and before.agent == u.agent and in_words_only(before)
        if before is not None and (before.agent != u.agent or (after_own_words and not before.claims_success)):
            # Handed work anew: by another agent, or by its own plan or instruction (a single
            # agent hands itself each part of the work in words before it acts on it).
            acted[u.agent] = False
        # Right after its own claim, an agent sums up what it claimed (a single agent's
        # answer after its reports): no claim of its own.
        summing_up = after_own_words and before.claims_success
        said = (u.agent, " ".join(u.action["text"].split()))
        if u.claims_failure or u.round_failed:
            failed_reports.add(said)
        if u.action["calls"]:
            acted[u.agent] = True
        elif u.agent not in tool_users or acted.get(u.agent, False) or u.claims_failure or summing_up:
            continue
        elif u.claims_success:
            out[i] = 1.0
        elif (u.kind == "llm" and u.action["text"].strip() and not u.round_failed and said not in failed_reports
              and i + 1 < len(units) and units[i + 1].agent != u.agent and i > 0 and units[i - 1].agent != u.agent):
            out[i] = 1.0  # answered the hand-over at once, in words only, and the round was taken as done
    return out


def repeated_handovers(units: list[TransitionUnit]) -> dict[int, int]:
    """{step: earlier step} for a coordinator's hand-over (or a lone agent's words to itself
    before it acts) that says word for word what it handed the same agent before, when that
    earlier round went well (a call returned a result, no step failed, the report claims no
    failure and was not handed out again): the work was done, so saying it again is not a
    retry but the next request gone wrong (the same item asked twice, the one still to do
    never asked)."""
    givers = hub_agents([u.agent for u in units]) | {u.agent for u in units if is_coordinator(u.agent)}
    alone = single_agent(units)
    n = len(units)
    done: dict[tuple[str, str, str], int] = {}  # (giver, taker, words) -> the hand-over whose round went well
    out: dict[int, int] = {}
    for k in range(n - 1):
        u = units[k]
        if alone:
            # An agent alone hands itself work in the words-only step it acts on at once;
            # the round runs through its calls to the report in words that follows them.
            if not in_words_only(u) or not units[k + 1].action["calls"]:
                continue
            end = next((j + 1 for j in range(k + 2, n) if in_words_only(units[j])), n)
        elif u.kind != "llm" or u.agent not in givers or u.action["calls"] or units[k + 1].agent == u.agent:
            continue
        else:
            end = next((j for j in range(k + 1, n) if units[j].agent == u.agent), n)
        words = " ".join(u.action["text"].split())
        if len(words) < 20:
            continue
        key = (u.agent, units[k + 1].agent, words)
        if key in done:
            out[k] = done[key]
            continue
        round_ = units[k + 1:end]
        if (any(w.outcome == "result" for w in round_) and not any(w.failed for w in round_)
                and not any(w.claims_failure or w.round_failed for w in round_)):
            done[key] = k
    return out


def step_features(graph: TransitionGraph) -> list[list[float]]:
    """One row of len(FEATURE_NAMES) floats per step, in step order."""
    units = graph.units
    n = len(units)
    if n == 0:
        return []
    in_tok_z = zscores([math.log1p(u.input_tokens) for u in units])
    out_tok_z = zscores([math.log1p(u.output_tokens) for u in units])
    len_log = [math.log1p(u.output_length) for u in units]
    len_z = zscores(len_log)
    # Values not grounded in what the step saw: invented, misattributed, restated with another
    # value, picked against the task's wording or the final answer's, or records left out of
    # a summary.
    unsupported = [len(u.unsupported) + len(u.misattributed) + len(u.restated) + len(u.task_conflicts)
                   + len(u.answer_conflicts) + len(u.omitted) for u in units]
    unacted = unacted_claims(units)
    macro_of: list[tuple[int, int]] = [(0, 0)] * n
    for start, end in macro_blocks(units):
        for i in range(start, end):
            macro_of[i] = (start, end)
    error_steps = [u.index for u in units if u.status == "error"]
    first_error = error_steps[0] if error_steps else None
    seen_calls: dict[str, int] = {}

    rows: list[list[float]] = []
    for u in units:
        k = u.index
        ins = graph.in_edges(k, DEPENDENCY_TYPES)
        outs = graph.out_edges(k, DEPENDENCY_TYPES)
        repeated = 0
        for sig in u.call_signatures:
            repeated += seen_calls.get(sig, 0)
            seen_calls[sig] = seen_calls.get(sig, 0) + 1
        nxt = units[k + 1] if k + 1 < n else None
        has_error = u.status == "error"
        inconsistent = (has_error and (u.claims_success or (nxt is not None and nxt.agent == u.agent and nxt.claims_success and not nxt.claims_failure))) \
            or (not has_error and u.feedback and nxt is not None and nxt.claims_failure and not nxt.claims_success)
        start, end = macro_of[k]
        block = units[start:end]
        later_errors = [e for e in error_steps if e > k]
        rows.append([
            len([e for e in ins if e.type == ARTIFACT]),
            len([e for e in outs if e.type == ARTIFACT]),
            len([e for e in ins + outs if e.type == SAME_ERROR]),
            len([e for e in ins + outs if e.type == LOOP]),
            len(ins), len(outs),
            (k - min(e.src for e in ins)) / max(n, 1) if ins else 0.0,
            float(has_error), float(u.outcome == "exception"), float(u.outcome == "error_result"),
            float(u.outcome == "empty_result"), float(bool(inconsistent)), float(repeated),
            float(unsupported[k]), unacted[k], float(len(u.action["calls"])),
            in_tok_z[k], out_tok_z[k], len_log[k], len_z[k],
            float(k > 0 and units[k - 1].agent != u.agent),
            sum(1 for b in block if b.status == "error") / len(block), float(len(block)),
            (k - start) / max(len(block) - 1, 1), k / max(n - 1, 1),
            float(first_error == k), (later_errors[0] - k) / n if later_errors else 1.0,
        ])
    return rows


def feature_matrix(graph: TransitionGraph) -> Any:
    """step_features as a float numpy array (n x len(FEATURE_NAMES))."""
    import numpy as np

    rows = step_features(graph)
    return np.asarray(rows, dtype=float).reshape(len(rows), len(FEATURE_NAMES))
