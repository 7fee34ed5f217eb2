"""Rewrites that add steps (bench/perturb.py `retries`, `reported_retries`,
`rerouted_retries`): the noise of production, where a call now and then times out or is
rate-limited and the agent makes it again, at once or after reporting it and being handed the
request again. The faults and the outcome stay the same; `original_steps` maps each step of
the rewritten session back to the step it stands for, so the labelled step and the
predictions compare as before (a benchmark helper, not product).
"""
from __future__ import annotations

import copy
import hashlib
from typing import Any

from perturb_base import ordered, session_rng


_TRANSIENT_ERRORS = ("TimeoutError: no answer within 30 s", "ServiceUnavailable: 503, try again later",
                     "ConnectionResetError: connection reset by peer",
                     "RateLimited: 429 Too Many Requests, retry after 1 s")


_RETRIED_SHARE = 0.3


# An added step's span id -> the span id of the recorded step it stands for (original_steps),
# None for one that stands for none.
_STANDS_FOR: dict[str, str | None] = {}


def _new_id(value: Any) -> str:
    return hashlib.sha256(f"retry:{value}".encode()).hexdigest()[:16]


def _added(step: dict, role: str, stands_for: dict | None = None) -> dict:
    """A copy of `step` with ids of its own, to be put into the session as a new step that
    stands for `stands_for` (default: `step`) when predictions are scored."""
    new = copy.deepcopy(step)
    new["span_id"] = _new_id(f"{role}:{step.get('span_id')}")
    _STANDS_FOR[new["span_id"]] = (stands_for or step).get("span_id")
    return new


def _failed_attempt(step: dict, error: str) -> dict:
    """`step`'s calls, the same arguments, failing with `error`: the attempt before a retry."""
    attempt = _added(step, "attempt")
    renamed = {}
    for call in attempt["tool_calls"]:
        renamed[call.get("id")] = _new_id(call.get("id"))
        call.update(result=None, error=error, id=renamed[call.get("id")], span_id=_new_id(call.get("span_id")))
    for call in (attempt.get("output_message") or {}).get("tool_calls") or []:
        call["id"] = renamed.get(call.get("id"), call.get("id"))
    return attempt


def _reindexed(doc: dict, steps: list[dict]) -> dict:
    for k, step in enumerate(steps):
        step["index"] = k
    doc["steps"] = steps
    return doc


def transient_retries(doc: dict, seed: int) -> dict:
    """About a third of the steps whose calls all worked were, in this telling, tried once
    before and failed with a transient error (a timeout, a 503, a reset connection, a rate
    limit): a failed attempt, the same calls with the same arguments, is put right before
    each of them, as the agent's retry loop would have logged it. Nothing else changes."""
    doc = copy.deepcopy(doc)
    rng = session_rng(doc, seed, "retries")
    steps = []
    for step in ordered(doc):
        calls = step.get("tool_calls") or []
        if calls and all(c.get("error") is None for c in calls) and rng.random() < _RETRIED_SHARE:
            steps.append(_failed_attempt(step, rng.choice(_TRANSIENT_ERRORS)))
        steps.append(step)
    return _reindexed(doc, steps)


def reported_retries(doc: dict, seed: int) -> dict:
    """The same transient failures one turn later: about a third of the first calls made
    right after a hand-over from another agent failed, the agent replied with the error as
    it got it, the hand-over was said again word for word, and then the calls worked as
    recorded. Three steps are added before each such call (the attempt, the reply, the
    hand-over again); the reply's input holds the failed call and its error, as an
    instrumented model's input would."""
    return _handed_again(doc, seed, "reported_retries", to_another=False)


def rerouted_retries(doc: dict, seed: int) -> dict:
    """As `reported_retries`, but the failed attempt and the reply come from a second
    instance of the worker (a pool of like agents, "<name>-2"): the request is then handed
    again and the recorded agent makes the calls. The session's agent list gains the
    second instances."""
    return _handed_again(doc, seed, "rerouted_retries", to_another=True)


def _handed_again(doc: dict, seed: int, name: str, to_another: bool) -> dict:
    doc = copy.deepcopy(doc)
    rng = session_rng(doc, seed, name)
    recorded = ordered(doc)
    steps = []
    for k, step in enumerate(recorded):
        calls = step.get("tool_calls") or []
        handover = recorded[k - 1] if k else None
        handed = (handover is not None and handover.get("agent") != step.get("agent")
                  and not handover.get("tool_calls") and (handover.get("output_message") or {}).get("content"))
        if calls and handed and all(c.get("error") is None for c in calls) and rng.random() < _RETRIED_SHARE:
            error = rng.choice(_TRANSIENT_ERRORS)
            attempt = _failed_attempt(step, error)
            reply = _added(step, "reply")
            reply.update(tool_calls=[], finish_reason="stop", output_message={"role": "assistant", "content": error})
            reply["input_messages"] = [*(step.get("input_messages") or []),
                                       {"role": "assistant", "content": None,
                                        "tool_calls": (attempt.get("output_message") or {}).get("tool_calls") or []},
                                       *({"role": "tool", "tool_call_id": c["id"], "content": error}
                                         for c in attempt["tool_calls"])]
            if to_another:
                attempt["agent"] = reply["agent"] = f"{step.get('agent')}-2"
                if doc.get("agents") and attempt["agent"] not in doc["agents"]:
                    doc["agents"] = [*doc["agents"], attempt["agent"]]
            steps += [attempt, reply, _added(handover, "again")]
        steps.append(step)
    return _reindexed(doc, steps)


def original_steps(before: dict, after: dict) -> list[int]:
    """For each step of `after` (`before` rewritten), the index of the step of `before` it
    stands for: a kept step is itself (matched by span id, which no rewrite changes); an added
    failed attempt and the reply to it stand for the step that made the call again, a
    hand-over said again for the hand-over."""
    position = {s.get("span_id"): k for k, s in enumerate(ordered(before))}
    out = []
    for step in ordered(after):
        span = step.get("span_id")
        while span is not None and span not in position:  # an added step, perhaps a copy of another added step
            span = _STANDS_FOR[span]
        out.append(-1 if span is None else position[span])  # -1: an added step that stands for none (chatter)
    return out
