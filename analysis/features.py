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

from .evidence.unacted_claims import unacted_claims
from .graph import ARTIFACT, DEPENDENCY_TYPES, LOOP, SAME_ERROR, TransitionGraph
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
