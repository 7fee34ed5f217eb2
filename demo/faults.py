"""Fault injection and intervention following for the scripted team models (`bank-agent`,
`warehouse-crew`: any model whose decisions list the faults each step can host).

Faults
    A fault plan (`[{"task": "t03", "step": 4, "kind": "wrong_argument"}]`, task "*" allowed)
    and/or a rate (per task, with probability R, one fault of a kind the task can host, at a
    step chosen by hash). "A fault at step k" means the model's output AT step k is the
    faulty one. Where step k cannot host that kind (wrong agent or phase), the fault moves to
    the next step that can, in the task's fault-free run, which its domain's model computes
    once by playing the whole team in-process (`Domain.fault_free_steps`,
    :mod:`tracefix.demo.domains`): before the fault a faulty run equals the fault-free one,
    so that is exactly where the fault lands. At most one fault per session; each injection
    appends a ground-truth line `{"session", "task", "step", "agent", "kind", "detail",
    "target", "replay"}`.

Replays
    A replay of a recorded session sends no request for the steps before its intervention
    step t (they come from the cassette). So a session whose first request is after the
    scheduled step already contains its fault in the recorded prefix and gets none; one that
    starts at or before it gets the fault when it reaches it (or the next step that can host
    it, if an earlier intervention changed the course).

Edits
    The model reads the edits in front of it (user turns the team's protocol did not send,
    :mod:`tracefix.demo.edits`) with probability follow_prob, drawn per request from (seed,
    session, step), so the runs of one intervention differ. Reading an edit means acting on
    what it asks (:mod:`tracefix.demo.edit_reader`): values are adopted, arguments left out,
    calls not made, answers given now, right or wrong. The fault scheduled at this step is
    prevented only when the edit decides what the slip corrupts (its
    :class:`~tracefix.demo.needs.Need`: the argument's value or source, the call of the
    skipped or pending action, not answering yet, reporting from the results); the model then
    does what the edit says there, so the task succeeds only when that is right. A prevented
    fault is not injected later in that session. An edit lives in one request: one placed
    before the fault reaches the faulty step only through what the agents do with it (an
    orchestrator relays it to the worker in its instruction); one placed after the fault
    cannot undo it.
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .domains import domain_of_task
from .scripted import KINDS, Decision


class FaultPlanError(ValueError):
    pass


def unit_draw(*parts: Any) -> float:
    """A reproducible number in [0, 1) from its inputs: every random choice of the model is
    one of these, so concurrent sessions never share a random sequence."""
    digest = hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


@dataclass(frozen=True)
class ScheduledFault:
    task: str
    step: int  # where it lands in the fault-free run
    kind: str
    agent: str | None
    target: tuple[str, ...]


def load_plan(source: str | Path | list | None) -> list[dict]:
    """Validate a fault plan (a path to JSON, or the list itself)."""
    if source is None:
        return []
    if isinstance(source, (str, Path)):
        try:
            entries = json.loads(Path(source).read_text())
        except (OSError, ValueError) as exc:
            raise FaultPlanError(f"cannot read fault plan {source}: {exc}") from exc
    else:
        entries = source
    if not isinstance(entries, list):
        raise FaultPlanError("a fault plan is a JSON list of {task, step, kind} objects")
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not {"task", "step", "kind"} <= set(e):
            raise FaultPlanError(f"fault plan entry {i} needs task, step and kind: {e!r}")
        if e["kind"] not in KINDS:
            raise FaultPlanError(f"fault plan entry {i}: unknown kind {e['kind']!r}; kinds: {', '.join(KINDS)}")
        if e["task"] != "*" and domain_of_task(e["task"]) is None:
            raise FaultPlanError(f"fault plan entry {i}: unknown task {e['task']!r}")
        if not isinstance(e["step"], int) or isinstance(e["step"], bool) or e["step"] < 0:
            raise FaultPlanError(f"fault plan entry {i}: step must be a non-negative integer")
    return entries


@dataclass
class FaultConfig:
    seed: int = 0
    plan: list[dict] = field(default_factory=list)
    rate: float = 0.0
    kinds: tuple[str, ...] = KINDS
    follow_prob: float = 0.8
    ground_truth: str | Path | None = None

    def __post_init__(self):
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown:
            raise FaultPlanError(f"unknown fault kinds {unknown}; kinds: {', '.join(KINDS)}")
        if not 0.0 <= self.rate <= 1.0 or not 0.0 <= self.follow_prob <= 1.0:
            raise FaultPlanError("fault rate and follow probability must lie in [0, 1]")


def schedule(config: FaultConfig, task_id: str) -> ScheduledFault | None:
    """The fault this task's sessions get under `config`, if any (pure function). The task's
    domain (bank, warehouse) gives its fault-free steps."""
    domain = domain_of_task(task_id)
    if domain is None:
        return None
    steps = domain.fault_free_steps(task_id)
    for entry in config.plan:
        if entry["task"] not in ("*", task_id):
            continue
        for info in steps[entry["step"]:]:
            if entry["kind"] in info.hosts:
                return ScheduledFault(task_id, info.step, entry["kind"], info.agent, info.hosts[entry["kind"]])
    if config.rate > 0 and unit_draw(config.seed, task_id, "rate") < config.rate:
        kinds = [k for k in config.kinds if any(k in i.hosts for i in steps)]
        if kinds:
            kind = kinds[int(unit_draw(config.seed, task_id, "kind") * len(kinds))]
            eligible = [i for i in steps if kind in i.hosts]
            info = eligible[int(unit_draw(config.seed, task_id, "step") * len(eligible))]
            return ScheduledFault(task_id, info.step, kind, info.agent, info.hosts[kind])
    return None


@dataclass
class _SessionState:
    first_step: int
    injected: bool = False
    suppressed: bool = False


class FaultInjector:
    """Decides, per request, whether the model's output is the faulty variant."""

    def __init__(self, config: FaultConfig):
        self.config = config
        self._sessions: dict[str, _SessionState] = {}
        self._lock = threading.Lock()
        self.injected: list[dict] = []

    def follow_draw(self, session: str, step: int | None) -> bool:
        """Whether the model reads the edits in front of it at this request."""
        return unit_draw(self.config.seed, session, step, "follow") < self.config.follow_prob

    def apply(self, decision: Decision, messages: list[dict], *, task: str | None, session: str,
              step: int | None, replay: bool) -> dict | None:
        """The faulty message to send instead of decision.message, or None."""
        if task is None or step is None:
            return None
        fault = schedule(self.config, task)
        if fault is None:
            return None
        with self._lock:
            state = self._sessions.setdefault(session, _SessionState(first_step=step))
            if state.injected or state.suppressed or state.first_step > fault.step:
                return None
            if step < fault.step or fault.kind not in decision.hosts:
                return None
            make_variant, need = decision.hosts[fault.kind]
            if need.met_by(decision.edit):
                state.suppressed = True  # the edit decided what this slip corrupts
                return None
            variant = make_variant()
            state.injected = True
            record = {"session": session, "task": task, "step": step, "agent": decision.agent,
                      "kind": fault.kind, "detail": variant.detail, "target": list(need.target), "replay": replay}
            self.injected.append(record)
            if self.config.ground_truth:
                with open(self.config.ground_truth, "a") as fh:
                    fh.write(json.dumps(record) + "\n")
        return variant.message
