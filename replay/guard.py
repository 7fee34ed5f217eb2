"""Guarded re-execution (AgentTether III-D, ``--guard``): keep a correction alive after step t.

Runs in the replay child through the instrumentation's live hook (contracts §4), which is
called before each live LLM call with the messages about to be sent. That moment is the
boundary after a tool returned (the last message is a tool result) or after a text
response (the last message is the agent's own text or a user turn).

Check: loop repetition (the same tool called with the same arguments twice in a row), and
a required corrective action not yet taken (the intervention's ``expect``: the tool, with
the argument, not called yet by the acting agent).
Decide: only with such a signal; a cooldown in steps between firings; a cap per run; the
same reminder at most twice; once the corrective action is done only loops are checked.
Inject: one short user message, addressed to the acting agent like the intervention.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field


def _tool_calls(messages: list[dict]) -> list[tuple[str, str]]:
    calls = []
    for m in messages:
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            args = fn.get("arguments")
            try:
                args = json.dumps(json.loads(args), sort_keys=True) if isinstance(args, str) else json.dumps(args, sort_keys=True)
            except ValueError:
                pass
            calls.append((fn.get("name") or c.get("name"), args))
    return calls


@dataclass
class Guard:
    agent: str | None
    tool: str | None = None
    argument: str | None = None
    hint: str = ""
    start_step: int = 0
    cooldown_steps: int = 2
    cap: int = 3
    fired: list[dict] = field(default_factory=list)
    _last_fire_step: int | None = None

    @classmethod
    def from_intervention(cls, intervention: dict, **limits) -> "Guard":
        expect = intervention.get("expect") or {}
        hint = intervention.get("text") or ""
        if hint.startswith("CORRECTION for"):
            hint = hint.split(":", 1)[-1].strip()
        hint = hint[:300]
        if expect.get("tool") and f"`{expect['tool']}`" not in hint:
            # The reminder must name the action it wants, or it is just noise.
            with_argument = f" with the `{expect['argument']}` argument" if expect.get("argument") else ""
            hint = f"{hint} Expected next: call `{expect['tool']}`{with_argument}.".strip()
        return cls(agent=expect.get("agent") or intervention.get("agent"), tool=expect.get("tool"),
                   argument=expect.get("argument"), hint=hint, start_step=intervention["step"], **limits)

    def to_json(self) -> dict:
        return {"agent": self.agent, "tool": self.tool, "argument": self.argument, "hint": self.hint,
                "start_step": self.start_step, "cooldown_steps": self.cooldown_steps, "cap": self.cap}

    def corrective_action_done(self, messages: list[dict]) -> bool:
        if not self.tool:
            return True  # nothing checkable was asked: only loops are guarded
        for m in messages:
            for c in m.get("tool_calls") or []:
                fn = c.get("function") or {}
                if fn.get("name") != self.tool:
                    continue
                if self.argument is None:
                    return True
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    continue
                if isinstance(args, dict) and args.get(self.argument) is not None:
                    return True
        return False

    def check(self, step: int, agent: str | None, messages: list[dict]) -> tuple[str, str] | None:
        """(signal, reminder text) when a reminder is warranted, else None."""
        calls = _tool_calls(messages)
        if len(calls) >= 2 and calls[-1] == calls[-2] and (messages and messages[-1].get("role") == "tool"):
            return "loop", (f"CORRECTION for {agent or self.agent} (reminder): you called `{calls[-1][0]}` twice with "
                            f"the same arguments; repeating it will not change the result. {self.hint}").strip()
        if self.agent and agent != self.agent:
            return None
        if step <= self.start_step or self.corrective_action_done(messages):
            return None
        return "expected_action_missing", f"CORRECTION for {self.agent} (reminder): {self.hint}".strip()

    def decide(self, step: int, text: str) -> bool:
        if len(self.fired) >= self.cap:
            return False
        if self._last_fire_step is not None and step - self._last_fire_step < self.cooldown_steps:
            return False
        return sum(1 for f in self.fired if f["text"] == text) < 2

    def __call__(self, step: int, agent: str | None, messages: list[dict]) -> list[dict]:
        """The live hook: messages to append to this call's input (usually none)."""
        found = self.check(step, agent, messages)
        if found is None:
            return []
        signal, text = found
        if not self.decide(step, text):
            return []
        self._last_fire_step = step
        self.fired.append({"step": step, "signal": signal, "text": text})
        return [{"role": "user", "content": text}]
