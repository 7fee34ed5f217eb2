"""The session timeline's geometry: one lane per agent, one box per step, drawn as SVG by
the session template (attributes only: no style attribute, which the CSP forbids).

x is the step number, not wall time: a 1,000-step session stays readable and each box is a
link to its step. Consecutive steps of different agents are joined by a line (a handoff).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from operator import methodcaller
from typing import Mapping

from markupsafe import Markup

from tracefix.analysis.roles import agent_behind
from tracefix.report.content.steps import FAILURE_READ_FROM_RESULT

STEP_W, GAP, LANE_H, BOX_H, LABEL_W, TOP = 14, 3, 30, 20, 150, 6
_error_of = methodcaller("get", "error")  # a tool call's error
NO_AGENT = "(no agent)"


@dataclass
class Box:
    index: int
    x: int
    y: int
    css: str
    title: str


@dataclass
class Timeline:
    width: int
    height: int
    lanes: list[tuple[str, int]] = field(default_factory=list)  # (agent, y of its centre line)
    boxes: list[Box] = field(default_factory=list)
    handoffs: list[tuple[int, int, int, int]] = field(default_factory=list)  # x1, y1, x2, y2
    ticks: list[tuple[int, int]] = field(default_factory=list)  # (x, step number)
    box_w: int = STEP_W
    box_h: int = BOX_H

    def boxes_svg(self, step_href: str) -> Markup:
        """The boxes as SVG, each a link to its step (`step_href` followed by its index): built
        here in one join (html.escape: a Markup per value cost a third of it), since 10,000 boxes
        through the template's loop cost ~0.3 s."""
        href = escape(step_href)
        return Markup("".join(
            f'<a href="{href}{b.index}#step-detail"><rect class="{escape(b.css)}" x="{b.x}" y="{b.y}" '
            f'width="{self.box_w}" height="{self.box_h}" rx="2" data-step="{b.index}"><title>{escape(b.title)}'
            '</title></rect></a>' for b in self.boxes))

    def handoffs_svg(self) -> Markup:
        """The handoff lines as SVG, one a line (numbers only: nothing to escape), built in one
        join for the same reason: a 10,000-step session has thousands of handoffs, and the
        template escaped each of their 4 coordinates (a third of the page's time)."""
        return Markup("".join(f'  <line class="handoff" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}"></line>\n'
                              for x1, y1, x2, y2 in self.handoffs))


def lane_of(step: dict) -> str:
    """The lane a step is drawn in: its agent's. One agent's decorated speaker labels in a
    message log ("Planner (thought)", "Planner (-> Coder)") share the agent's lane."""
    return agent_behind(step.get("agent")) or NO_AGENT


def layout(steps: list[dict], selected: int | None = None, got_past: Mapping[int, int] | None = None) -> Timeline:
    """`steps`: outline steps (`Store.session_outline`) in step order; `got_past`: error
    steps the analysis read as got past, with the step that made their calls again (also
    steps whose failure it read from a result returned as text, which the store has as no
    error)."""
    got_past = got_past or {}
    lanes = {}  # each agent's lane, worked out once per agent rather than once per step
    for step in steps:
        if (agent := step.get("agent")) not in lanes:
            lanes[agent] = lane_of(step)
    agents = list(dict.fromkeys(lanes.values()))
    lane_y = {name: TOP + i * LANE_H for i, name in enumerate(agents)}
    tl = Timeline(width=LABEL_W + max(1, len(steps)) * (STEP_W + GAP) + 10,
                  height=TOP + max(1, len(agents)) * LANE_H + 16,
                  lanes=[(name, y + BOX_H // 2) for name, y in lane_y.items()])
    previous = None
    for n, step in enumerate(steps):
        name = step.get("agent") or NO_AGENT
        x, y = LABEL_W + n * (STEP_W + GAP), lane_y[lanes[step.get("agent")]]
        css = ["step", f"kind-{step.get('kind') or 'other'}"]
        tools = step.get("tool_calls") or []
        failed = bool(step.get("error")) or any(map(_error_of, tools))
        # also a step whose tool answered its failure as text: the store holds no error there
        retried_by = got_past.get(step["index"])
        if failed or retried_by is not None:
            css.append("error" if retried_by is None else "error got-past")
        if tools:
            css.append("tools")
        if step["index"] == selected:
            css.append("selected")
        duration = step.get("duration_ms")
        title = (f"step {step['index']} · {name} · {step.get('kind') or ''}"
                 + (" · " + ", ".join(str(tc.get("name")) for tc in tools[:5]) if tools else "")
                 + (f" · {duration:.0f} ms" if isinstance(duration, (int, float)) else "")
                 + (" · error" if failed else " · " + FAILURE_READ_FROM_RESULT if retried_by is not None else "")
                 + (f", got past at step {retried_by}" if retried_by is not None else ""))
        tl.boxes.append(Box(step["index"], x, y, " ".join(css), title))
        if previous is not None and previous[1] != y:
            tl.handoffs.append((previous[0] + STEP_W, previous[1] + BOX_H // 2, x, y + BOX_H // 2))
        previous = (x, y)
        if n % 10 == 0:
            tl.ticks.append((x, step["index"]))
    return tl
