"""The transition unit: one decision of a session (AgentTether section III-B), the type
every reading of a session passes around.

A unit holds the step's observation (what the agent newly saw), belief (its text), action
(text or tool calls with arguments) and feedback (tool results and errors), plus the derived
attributes the graph and the detectors read. `units.build_units` makes the units and calls
the readings (roles.py, records.py, agent_reports.py, failures.py, conflicts.py), which fill
in the fields they own; all of them import the type from here, so the imports run one way:
units -> readings -> transition_unit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from .values import compact_json


PHASES = ("plan", "instruct", "act", "answer")
STATUSES = ("ok", "error", "empty")
# What came back from the step's tools; "none" when the step called no tool.
OUTCOMES = ("none", "result", "empty_result", "error_result", "exception")


@dataclass
class TransitionUnit:
    index: int
    kind: str  # "llm" | "message"
    agent: str
    phase: str
    status: str
    outcome: str
    observation: str
    belief: str
    action: dict[str, Any]  # {"text": str, "calls": [{"name", "arguments"}]}
    feedback: list[dict[str, Any]]  # [{"tool", "result", "error"}]
    tool: str | None  # first tool called, the unit's acting tool
    tools: list[str]
    call_signatures: list[str]  # "tool(canonical args)" per call, for loop detection
    error_signature: str | None
    error_text: str | None
    # produced: values the step hands on (its tool results, its text); consumed: values its
    # own action carries (call arguments, text); context: values its input showed it.
    artifacts_produced: set[str] = field(default_factory=set)
    artifacts_consumed: set[str] = field(default_factory=set)
    # Values the action carries that neither the task nor the step's input showed it.
    unsupported: list[str] = field(default_factory=list)
    # Words a text step attaches to one record that belong to another record of its own
    # tool results ("item 1 is red" when the result says item 1 is blue, item 2 red).
    misattributed: list[str] = field(default_factory=list)
    # Records of its own tool results a text step leaves out while naming their siblings.
    omitted: list[str] = field(default_factory=list)
    # Fields a text step restated with another value than its tool result gave them: in a
    # listing of the record it looked up (misread_listings), or when a later call passed
    # that value in that field for that record (mark_restated_fields).
    restated: list[str] = field(default_factory=list)
    # Ids the action uses whose record (in earlier tool results) differs from its sibling
    # records only by words the task does not say, while a sibling's words are in the task
    # (the task asks for the blue item; the step picks the red one). The task's words are
    # those of its clauses that name a value the action uses, when one does (words_about).
    task_conflicts: list[str] = field(default_factory=list)
    # Ids the action picks whose sibling record the final answer names instead (a sibling no
    # call used, or one the answer pairs with a value the calls paired with the pick): the
    # answer and the acts disagree on which record (see mark_answer_conflicts).
    answer_conflicts: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    output_length: int = 0
    claims_success: bool = False
    claims_failure: bool = False
    # The step closed a round of work (the last word of an agent handed work) that the
    # agent who handed it over then handed out again: the round failed, whatever the
    # report's wording (see mark_failed_rounds).
    round_failed: bool = False
    # The step that made one of this step's calls again, the same arguments answered the same
    # way, when the answer brought no value the call had not carried: the request did not
    # take effect, whatever the answer's words (a refusal read from its effect, see
    # failures.mark_requests_without_effect). None: no such call.
    asked_again_at: int | None = None
    # The step that made this error step's failed calls again soon after (its agent or
    # another) and did not fail the same way (results, or another failure): a failure the
    # run got past (a timeout, a 503, a rate limit, or one cleared by what happened in
    # between), not where it went wrong (see mark_recovered_errors). None: not made again,
    # or failed again.
    recovered_by: int | None = None

    @property
    def recovered(self) -> bool:
        return self.recovered_by is not None

    @property
    def failed(self) -> bool:
        """An error step the run did not get past by making the same calls again."""
        return self.status == "error" and not self.recovered

    def as_written(self, values: Sequence[str]) -> list[str]:
        """`values` (ids read in lower case) spelled as this step wrote them, in its words, its
        calls, their results or its error, for a reader: `ACC-7` where the analysis compares `acc-7`."""
        text = "\n".join([self.action["text"], *(compact_json(c["arguments"]) for c in self.action["calls"]),
                          *(compact_json(f.get("result")) for f in self.feedback), self.error_text or ""])
        out = []
        for value in values:
            found = (re.search(r"(?<![\w-])" + re.escape(value) + r"(?![\w-])", text, re.I)
                     if any(ch.isalpha() for ch in value) else None)  # a number is written as compared
            out.append(found.group() if found else value)
        return out

    def summary(self, width: int = 120) -> str:
        """One line a person (or an analyst LLM) can read."""
        if self.action["calls"]:
            what = "; ".join(f"{c['name']}({compact_json(c['arguments'])})" for c in self.action["calls"])
        else:
            what = self.action["text"]
        text = f"[{self.index}] {self.agent} {self.phase}: {what}"
        if self.error_text:
            text += f" -> {self.error_text}"
        text = " ".join(text.split())
        return text if len(text) <= width else text[: width - 1] + "…"
