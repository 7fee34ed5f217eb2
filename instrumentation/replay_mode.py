"""Replay mode: re-run a recorded session from its cassette, with one intervention (contracts §4).

A child process started with ``TRACEFIX_REPLAY=/path/replay.json`` calls ``tracefix.init()``
(or runs ``python -m tracefix.replay_run``), which installs a :class:`ReplayController`.
The SDK wrappers and ``@tracefix.tool`` ask it what to do with every call of the replayed
session:

* step < t: the recorded LLM response / tool result (no network, no side effect), after
  checking the call's fingerprint; a mismatch is a divergence and the run goes live from
  there (tracked objects restored to the latest snapshot at or before that step);
* step t: tracked objects restored to the latest snapshot at or before t, then the
  intervention (replace_output / add_message / replace_tool_result);
* after t: live, with the registered live hooks (``add_live_hook``) adding messages.

Without an intervention t is the number of recorded steps: the whole cassette is served,
and at session end tracked objects are restored to the last recorded snapshot so the
evaluator sees the recorded final state. The report (``report_path``) is written when
the replayed session ends, or at exit if it never did.

A call is matched to its recording by its fingerprint (``tracefix.fingerprints``: the
recorder writes it on every LLM and tool span, ``tracefix.request.fingerprint`` /
``tracefix.tool.fingerprint``, and the replay worker builds cassettes with the same
functions).
"""
from __future__ import annotations

import atexit
import copy
import json
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from .attributes import from_json_text, to_jsonable

logger = logging.getLogger("tracefix")

ENV_VAR = "TRACEFIX_REPLAY"

_live_hooks: list[Callable[[int, "str | None", list], list]] = []


def add_live_hook(fn: Callable[[int, "str | None", list], list]) -> None:
    """Register ``fn(step, agent, messages) -> list[dict]``, called before each live LLM call
    after the intervention step; the messages it returns are appended to that call's input."""
    _live_hooks.append(fn)


def clear_live_hooks() -> None:
    _live_hooks.clear()


@dataclass
class Decision:
    """What to do with one intercepted call. Serve when `response` or `text` is set."""
    source: str  # "cassette" | "intervention" | "live"
    response: dict | None = None  # recorded provider response to return (LLM)
    stream: list | None = None  # the recorded response's stream events, in order, when it streamed
    text: str | None = None  # replace_output: the assistant text to return (LLM)
    extra_messages: list = field(default_factory=list)  # appended to a live LLM call's input
    result: Any = None  # tool result to return
    error: str | None = None  # recorded tool error ("Type: message") to raise
    divergence: dict | None = None

    @property
    def serves(self) -> bool:
        return self.response is not None or self.text is not None


class ReplayController:
    def __init__(self, config: dict):
        cassette = config.get("cassette")
        if not isinstance(cassette, dict) or not isinstance(cassette.get("steps"), list):
            raise ValueError("tracefix replay: the config needs a 'cassette' object with a 'steps' list")
        self.config = config
        self.cassette = cassette
        self.steps: dict[int, dict] = {int(s["index"]): s for s in cassette["steps"]}
        self.snapshots: list[dict] = list(cassette.get("snapshots") or [])
        self.intervention: dict | None = config.get("intervention") or None
        self.session_id: str | None = config.get("session_id")
        self.parent_session_id: str | None = config.get("parent_session_id") or cassette.get("session_id")
        self.report_path: str | None = config.get("report_path")
        # written by the runner from the operator's --allow-module / --allow-entrypoint lists (tracefix.entrypoints)
        self.allowed_modules: list[str] = list(config.get("allowed_modules") or [])
        self.allowed_entrypoints: list[str] = list(config.get("allowed_entrypoints") or [])
        self.t: int = int(self.intervention["step"]) if self.intervention else (max(self.steps, default=-1) + 1)
        self.counts = {"llm_cassette": 0, "llm_live": 0, "llm_intervention": 0,
                       "tool_cassette": 0, "tool_live": 0, "tool_intervention": 0}
        self.divergence: dict | None = None
        self.live = False  # after t or after a divergence every call is live
        self.t_reached = False
        self._claimed = False
        self._owned_id: str | None = None
        self._tool_override: dict | None = None
        self._used_tool_entries: set[int] = set()
        # a regression run's cassette (tracefix.replay.regress) has no steps, and its recorded tool
        # calls here: a live call with the fingerprint of one not yet served gets its recording
        self.recorded_tools: list[dict] = list(cassette.get("recorded_tools") or [])
        self._report_written = False
        self._lock = threading.RLock()
        self._session_error: str | None = None

    # --- setup ---------------------------------------------------------------------------
    @classmethod
    def from_path(cls, path: str) -> "ReplayController":
        try:
            with open(path, encoding="utf-8") as f:
                config = json.load(f)
        except (OSError, ValueError) as exc:
            raise ValueError(f"tracefix replay: cannot read {ENV_VAR}={path}: {exc}") from exc
        return cls(config)

    def claim_session(self) -> dict | None:
        """The first session opened in the process is the replayed one: its id and links."""
        with self._lock:
            if self._claimed:
                return None
            self._claimed = True
            self._owned_id = self.session_id or os.urandom(16).hex()
            return {"session_id": self._owned_id, "parent_session_id": self.parent_session_id,
                    "intervention": self.intervention}

    def owns(self, state: Any) -> bool:
        return self._owned_id is not None and state.session_id == self._owned_id

    # --- state ---------------------------------------------------------------------------
    def restore(self, state: Any, upto: int | None) -> None:
        """Restore each tracked object to its latest snapshot at step <= `upto` (any step if None)."""
        for key, obj in state.tracked_objects().items():
            chosen = None
            for snap in self.snapshots:
                if snap.get("key") != key or "state" not in snap:
                    continue
                if upto is not None and int(snap.get("step", 0)) > upto:
                    continue
                if chosen is None or int(snap.get("step", 0)) >= int(chosen.get("step", 0)):
                    chosen = snap
            if chosen is not None:
                obj.restore(copy.deepcopy(chosen["state"]))

    def _diverge(self, state: Any, step: int, expected: str | None, got: str, kind: str) -> dict:
        divergence = {"step": step, "expected": expected, "got": got, "kind": kind}
        if self.divergence is None:
            self.divergence = divergence
            logger.warning("tracefix replay: divergence at step %s (%s): expected %s, got %s; going live",
                           step, kind, expected, got)
            if not self.t_reached:
                self.restore(state, step)
        self.live = True
        return divergence

    # --- calls ---------------------------------------------------------------------------
    def on_llm_call(self, state: Any, step: int, fingerprint: str, agent: str | None,
                    messages: list) -> Decision:
        with self._lock:
            if step == self.t and not self.t_reached:
                return self._at_intervention_step(state, step, fingerprint, agent, messages)
            if self.live or step > self.t:
                return self._live(step, agent, messages)
            return self._from_cassette(state, step, fingerprint)

    def _from_cassette(self, state: Any, step: int, fingerprint: str) -> Decision:
        """The recorded response of `step`; a missing or mismatching recording is a
        divergence, and the run goes live from here."""
        entry = self.steps.get(step)
        expected = entry.get("fingerprint") if entry else None
        if entry is None or entry.get("response") is None or (expected and expected != fingerprint):
            divergence = self._diverge(state, step, expected, fingerprint, "llm")
            self.counts["llm_live"] += 1
            return Decision("live", divergence=divergence)
        self.counts["llm_cassette"] += 1
        stream = entry.get("stream")
        return Decision("cassette", response=entry["response"], stream=stream if isinstance(stream, list) else None)

    def _live(self, step: int, agent: str | None, messages: list) -> Decision:
        self.counts["llm_live"] += 1
        extra: list = []
        if step > self.t:
            for hook in _live_hooks:
                try:
                    extra.extend(hook(step, agent, list(messages) + extra) or [])
                except Exception:
                    logger.warning("tracefix replay: live hook %r failed", hook, exc_info=True)
        return Decision("live", extra_messages=extra)

    def _at_intervention_step(self, state: Any, step: int, fingerprint: str, agent: str | None,
                              messages: list) -> Decision:
        self.t_reached = True
        if not self.live:  # after a divergence the state is already real
            self.restore(state, step)
        self.live = True
        iv = self.intervention
        if iv is None:  # past the end of the cassette: nothing to apply, run live
            self.counts["llm_live"] += 1
            return Decision("live")
        kind = iv.get("kind")
        if kind == "replace_output":
            self.counts["llm_intervention"] += 1
            return Decision("intervention", text=str(iv.get("text", "")))
        if kind == "add_message":
            self.counts["llm_live"] += 1
            return Decision("intervention", extra_messages=[{"role": iv.get("role") or "user",
                                                             "content": str(iv.get("text", ""))}])
        if kind == "replace_tool_result":
            self._tool_override = iv
            return self._from_cassette(state, step, fingerprint)
        raise ValueError(f"tracefix replay: unknown intervention kind {kind!r}")

    def on_tool_call(self, step: int | None, call_id: str | None, name: str, fingerprint: str) -> Decision:
        with self._lock:
            override = self._tool_override
            if override is not None and call_id is not None and call_id == override.get("tool_call_id"):
                self._tool_override = None
                self.counts["tool_intervention"] += 1
                return Decision("intervention", result=from_json_text(override.get("text", "")))
            if self.live or step is None or step >= self.t:
                recorded = self._recorded_tool(fingerprint)
                if recorded is not None:
                    self.counts["tool_cassette"] += 1
                    return Decision("cassette", result=recorded.get("result"), error=recorded.get("error"))
                self.counts["tool_live"] += 1
                return Decision("live")
            entry = self._find_tool_entry(step, call_id, fingerprint)
            expected = entry.get("fingerprint") if entry else None
            if entry is None or (expected and expected != fingerprint):
                from .context import current_session

                divergence = self._diverge(current_session(), step, expected, fingerprint, "tool")
                self.counts["tool_live"] += 1
                return Decision("live", divergence=divergence)
            self.counts["tool_cassette"] += 1
            return Decision("cassette", result=entry.get("result"), error=entry.get("error"))

    def _recorded_tool(self, fingerprint: str) -> dict | None:
        """The first recorded call with this fingerprint not served yet (a regression run's)."""
        for entry in self.recorded_tools:
            if id(entry) not in self._used_tool_entries and entry.get("fingerprint") == fingerprint:
                self._used_tool_entries.add(id(entry))
                return entry
        return None

    def _find_tool_entry(self, step: int, call_id: str | None, fingerprint: str) -> dict | None:
        calls = (self.steps.get(step) or {}).get("tool_calls") or []
        for entry in calls:
            if call_id is not None and entry.get("id") == call_id:
                self._used_tool_entries.add(id(entry))
                return entry
        for entry in calls:  # an unlinked call: the first unused recorded call with the same fingerprint
            if id(entry) not in self._used_tool_entries and entry.get("fingerprint") == fingerprint:
                self._used_tool_entries.add(id(entry))
                return entry
        return None

    # --- end -----------------------------------------------------------------------------
    def before_session_end(self, state: Any) -> None:
        with self._lock:
            if not self.live:  # everything came from the cassette: show the recorded final state
                self.restore(state, None)

    def on_session_end(self, state: Any, evaluation: dict | None, error: str | None) -> None:
        self.write_report(output=state.output, evaluation=evaluation, error=error)

    def report(self, output: Any = None, evaluation: dict | None = None, error: str | None = None) -> dict:
        return {
            "session_id": self._owned_id or self.session_id,
            "parent_session_id": self.parent_session_id,
            "intervention_id": (self.intervention or {}).get("id"),
            "output": to_jsonable(output),
            "outcome": None if evaluation is None else ("success" if evaluation.get("success") else "failure"),
            "score": None if evaluation is None else evaluation.get("score"),
            "evaluation": evaluation,
            "counts": dict(self.counts),
            "divergence": self.divergence,
            "error": error,
        }

    def write_report(self, output: Any = None, evaluation: dict | None = None, error: str | None = None) -> None:
        with self._lock:
            if self._report_written:
                return
            self._report_written = True
        if not self.report_path:
            return
        data = self.report(output, evaluation, error)
        tmp = f"{self.report_path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1, default=repr)
        os.replace(tmp, self.report_path)

    def write_report_at_exit(self) -> None:
        if not self._report_written:
            self.write_report(error=self._session_error or "the replayed session never ended "
                              "(the entrypoint did not open a tracefix session, or the process exited early)")


def install_from_env() -> ReplayController | None:
    """Create the controller from TRACEFIX_REPLAY (called by tracefix.init())."""
    from . import runtime

    path = os.environ.get(ENV_VAR)
    if not path:
        return None
    if runtime.replay is not None:
        return runtime.replay
    controller = ReplayController.from_path(path)
    runtime.replay = controller
    atexit.register(controller.write_report_at_exit)
    return controller


def run_entrypoint(entrypoint: str, inputs: dict, allowed_modules, allowed_entrypoints=()) -> Any:
    """Import "pkg.mod:function" when it is allowed (`tracefix.entrypoints`: its module, and
    marked by the app, or listed itself) and call it with `inputs`, inside a session unless
    the function opens its own (``@tracefix.session``)."""
    from .api import session
    from .entrypoints import resolve

    target = resolve(entrypoint, allowed_modules, allowed_entrypoints)
    if getattr(target, "__tracefix_entrypoint__", None):
        return target(**inputs)
    with session(entrypoint=entrypoint, inputs=inputs) as state:
        result = target(**inputs)
        state.set_output(result)
        return result
