"""Each replay run beside the original session from the intervention step on: a compact
transcript of both, and the difference between them.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from tracefix.report.content.diagnosis import tested_step
from tracefix.report.content.values import brief, hypotheses, objects, to_json


def transcript_lines(steps: list[dict], start: int) -> list[tuple[int, str]]:
    """A compact transcript from step ``start`` on: (step index, line). Lines carry no step
    number, so a replay that inserts one step does not make every later line differ."""
    lines: list[tuple[int, str]] = []
    for step in steps:
        index = int(step.get("index", 0))
        if index < start:
            continue
        agent = step.get("agent") or "?"
        out = step.get("output_message") or {}
        text = out.get("content") if isinstance(out, dict) else None
        if step.get("kind") == "message" and not text:
            text = ((step.get("input_messages") or [{}])[-1] or {}).get("content")
        if text:
            lines.append((index, f"{agent}: {brief(text, 220)}"))
        for call in step.get("tool_calls") or []:
            lines.append((index, f"{agent} → {call.get('name')}({brief(to_json(call.get('arguments'), indent=None), 140)})"))
            if call.get("error"):
                lines.append((index, f"    ✗ {brief(call['error'], 180)}"))
            else:
                lines.append((index, f"    = {brief(to_json(call.get('result'), indent=None), 180)}"))
        if step.get("error"):
            lines.append((index, f"    ✗ {brief(step['error'], 180)}"))
        if not text and not step.get("tool_calls") and not step.get("error"):
            lines.append((index, f"{agent}: (no output)"))
    return lines


@dataclass
class RunComparison:
    """One replay run beside the original session from the intervention step on."""
    number: int
    run: dict
    child: dict | None
    original: list[tuple[int, str]]
    replayed: list[tuple[int, str]]
    # difflib opcodes over the two line lists ("equal", "replace", "delete", "insert").
    opcodes: list[tuple[str, int, int, int, int]] = field(default_factory=list)

    @property
    def changed_lines(self) -> set[int]:
        """Indexes into ``replayed`` that differ from the original."""
        return {j for tag, _, _, j1, j2 in self.opcodes if tag != "equal" for j in range(j1, j2)}

    @property
    def dropped_lines(self) -> set[int]:
        """Indexes into ``original`` that the replay did not reproduce."""
        return {i for tag, i1, i2, _, _ in self.opcodes if tag != "equal" for i in range(i1, i2)}

    same_as: int | None = None  # the number of an earlier run with the very same transcript

    def unified_diff(self) -> list[str]:
        return list(difflib.unified_diff(
            [line for _, line in self.original], [line for _, line in self.replayed],
            fromfile="original", tofile=f"replay {self.number}", lineterm="", n=2))


def compare_runs(doc: dict, hypothesis: dict, children: dict | None) -> list[RunComparison]:
    t = tested_step(hypothesis) or 0
    original = transcript_lines(doc.get("steps") or [], t)
    out = []
    for number, run in enumerate(objects(hypothesis.get("runs")), start=1):
        child_id = run.get("child_session_id")
        child = (children or {}).get(child_id) if isinstance(child_id, str) else None
        replayed = transcript_lines((child or {}).get("steps") or [], t) if child else []
        matcher = difflib.SequenceMatcher(None, [l for _, l in original], [l for _, l in replayed], autojunk=False)
        cmp = RunComparison(number, run, child, original, replayed, matcher.get_opcodes())
        if child is not None:
            cmp.same_as = next((c.number for c in out if c.child is not None and c.replayed == replayed), None)
        out.append(cmp)
    return out


def child_session_ids(replay: dict | None) -> list[str]:
    """Every child session a replay result refers to (for fetching their documents): the
    ids that are text."""
    return [r["child_session_id"] for h in hypotheses(replay)
            for r in objects(h.get("runs")) if isinstance(r.get("child_session_id"), str) and r["child_session_id"]]
