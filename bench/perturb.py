"""Presentation rewrites of recorded session documents, for the localization robustness suite.

Each rewrite changes how a session *looks* (agent names, tool names, id spelling, how a
tool reports failure, how a worker words its report, how results are laid out) and never
what happened: same steps, same calls, same order, so the labelled step stays the truth.
A rewrite is applied to a whole document consistently (messages, tool calls and their
arguments and results, input prompts, agent names, task), after recording and before
analysis, as if a different app had logged the same run.

Two rewrites, `retries` and `reported_retries`, add steps instead: the noise of production,
where a call now and then times out or is rate-limited and the agent makes it again, at
once or after reporting it and being handed the request again. The faults and the outcome
stay the same; `original_steps` maps each step of the rewritten session back to the step it
stands for, so the labelled step and the predictions compare as before.

    from perturb import REWRITES, perturb
    doc2 = perturb(doc, ["agents", "ids"], seed=1)

The rewrites live by what they change: names and wording (perturb_words.py), results'
layout and timing (perturb_results.py), added retries (perturb_retries.py, with
`original_steps`), chatter before an action and refusals worded politely (perturb_turns.py);
what they share is in perturb_base.py. This module names them.

Used by bench/localization.py --perturb (a benchmark helper, not product).
"""
from __future__ import annotations

from typing import Callable

from perturb_results import camel_keys, envelope_results, jitter_timing, prose_results, reorder_keys, result_timestamps
from perturb_retries import reported_retries, rerouted_retries, transient_retries
from perturb_turns import chatter, reworded_refusals
from perturb_words import (colon_ids, group_numbers, joined_clauses, markdown_ids, narrate_calls, paraphrase_reports,
                           plain_errors, rename_agents, rename_tools, single_agent, squash_ids, timestamps,
                           upper_case_ids)


REWRITES: dict[str, Callable[[dict, int], dict]] = {
    "agents": rename_agents,          # (a)
    "retries": transient_retries,
    "reported_retries": reported_retries,
    "rerouted_retries": rerouted_retries,
    "single_agent": single_agent,
    "plain_errors": plain_errors,     # (b)
    "ids": squash_ids,                # (c)
    "colon_ids": colon_ids,
    "paraphrase": paraphrase_reports,  # (d)
    "tools": rename_tools,
    "prose_results": prose_results,
    "key_order": reorder_keys,
    "grouped_numbers": group_numbers,
    "upper_ids": upper_case_ids,
    "envelope": envelope_results,
    "camel_keys": camel_keys,
    "narrated_calls": narrate_calls,
    "timestamps": timestamps,
    "served_at": result_timestamps,
    "markdown_ids": markdown_ids,
    "timing": jitter_timing,
    "joined_clauses": joined_clauses,
    "chatter": chatter,
    "reworded_refusals": reworded_refusals,
}


# The four rewrites together, every presentation rewrite together (prose last: it
# reads JSON; colon ids are another spelling of (c), so (c) stands for both), all of that as
# one agent, and all of it with both kinds of retries first (their failures are raised, and
# plain_errors turns them into text like any other failure).
_EVERY = ["agents", "plain_errors", "ids", "paraphrase", "tools", "narrated_calls", "key_order",
          "grouped_numbers", "upper_ids", "envelope", "camel_keys", "timestamps", "served_at",
          "markdown_ids", "timing", "joined_clauses", "prose_results"]


COMBINED = {"all4": ["agents", "plain_errors", "ids", "paraphrase"],
            "all": _EVERY,
            "all_one_agent": [*_EVERY, "single_agent"],
            "all_with_retries": ["retries", "reported_retries", *_EVERY]}


def perturb(doc: dict, names: list[str], seed: int = 0) -> dict:
    for name in names:
        doc = REWRITES[name](doc, seed)
    return doc


def expand(spec: str) -> dict[str, list[str]]:
    """'all' -> every single rewrite and the combinations; 'a,b' -> those, by name."""
    if spec == "all":
        return {**{name: [name] for name in REWRITES}, **COMBINED}
    out = {}
    for name in spec.split(","):
        if name in COMBINED:
            out[name] = COMBINED[name]
        elif name in REWRITES:
            out[name] = [name]
        else:
            raise SystemExit(f"unknown rewrite {name!r}: one of {', '.join([*REWRITES, *COMBINED])}")
    return out
