"""The two pictures of a root-cause report, as PNG bytes: the critical transition graph
and the per-step score timeline of both detectors (`report_pictures` draws both for one
report, starring the summary's root cause: content.diagnosis.ranked_causes' first).

Both read the analysis result (docs/contracts.md §3) as stored: through
`content.values.objects`, `fields` and `whole`, so junk inside it is skipped. They draw on a bare
``matplotlib.figure.Figure`` with the Agg canvas instead of ``pyplot``: no display, no
global figure registry, so the collector can render reports from several request threads
at once.
"""
from __future__ import annotations

import io
import logging
import math

from tracefix.analysis.roles import agent_behind
from tracefix.report.content.diagnosis import cause_label, frontier_of, frontier_steps, ranked_causes
from tracefix.report.content.steps import trials as replay_trials
from tracefix.report.content.values import fields, listed, objects, whole

log = logging.getLogger("tracefix.report")

# Lanes and colours are part of the report's visual language; the legend repeats them.
PHASE_COLORS = {
    "plan": "#6c8ebf",
    "instruct": "#9673a6",
    "act": "#82b366",
    "answer": "#d6b656",
}
OTHER_PHASE_COLOR = "#a0a0a0"
# Edge types of analysis/graph.py: type -> (colour, width, curvature, legend label).
EDGE_STYLES = {
    "temporal": ("#b8b8b8", 1.0, 0.0, "next step"),
    "artifact": ("#3b7dd8", 1.3, 0.35, "shared artifact"),
    "same_error": ("#d62728", 1.5, -0.35, "same error"),
    "loop": ("#ff7f0e", 1.5, 0.5, "repeated call"),
}
OTHER_EDGE_STYLE = ("#7f7f7f", 1.0, 0.25, None)
FRONTIER_COLOR = "#d62728"
MAX_CURVED_EDGES = 150  # per edge type; each arc is a patch matplotlib lays out one by one
DETECTOR_COLORS = {"isolation_forest": "#1f77b4", "hgt": "#9467bd"}
DETECTOR_LABELS = {"isolation_forest": "IsolationForest (run-local)", "hgt": "HGT (normal-behaviour model)"}


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def report_pictures(analysis: dict | None, replay: dict | None) -> tuple[bytes | None, bytes | None]:
    """The graph and the score timeline; a picture that cannot be drawn is left out (and
    logged) rather than costing the reader the rest of the report."""
    if not analysis:
        return None, None
    causes = ranked_causes(analysis, replay)  # the order the summary and the ranked table read
    highlight = causes[0].step if causes else None
    label = cause_label(causes[0]) if causes else "top hypothesis"
    hyp_steps = [c.step for c in causes[:3]]
    trials = [{"start": t.start} for t in replay_trials({"steps": []}, replay)] if replay else None
    pictures = []
    for draw in (lambda: graph_png(analysis, highlight=highlight, highlight_label=label),
                 lambda: scores_png(analysis, trials=trials, hypothesis_steps=hyp_steps)):
        try:
            pictures.append(draw())
        except Exception:  # odd values from a partial analysis must not cost the whole report
            log.exception("could not draw a report picture for session %s", analysis.get("session_id"))
            pictures.append(None)
    return pictures[0], pictures[1]


def graph_png(analysis: dict, *, highlight: int | None = None, highlight_label: str = "top hypothesis") -> bytes | None:
    """The critical transition graph: one lane per agent, steps left to right, typed
    dependency edges drawn as arcs, the anomalous frontier ringed in red and one step
    (``highlight``: the top hypothesis, or the verified root cause) starred. None when the
    analysis has no graph."""
    import networkx as nx
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    graph = fields(analysis.get("graph"))
    g = nx.MultiDiGraph()
    for node in objects(graph.get("nodes")):
        if (step := whole(node.get("step"))) is not None:  # what the drawing reads of a node, as text
            g.add_node(step, **{k: str(node[k]) for k in ("agent", "phase", "status") if node.get(k) is not None})
    if not g.nodes:
        return None
    for edge in objects(graph.get("edges")):
        src, dst = whole(edge.get("src")), whole(edge.get("dst"))
        if src in g and dst in g:
            g.add_edge(src, dst, type=str(edge.get("type") or "other"))

    # A lane per agent in order of first appearance reads like a swimlane diagram, which is
    # what a person expects of a multi-agent trace; a force layout scatters the time axis.
    # One agent's decorated speaker labels ("Planner (thought)", "Planner (-> Coder)") share its lane.
    lane_of = {s: agent_behind(g.nodes[s].get("agent")) or "?" for s in g.nodes}
    lanes: dict[str, int] = {}
    for step in sorted(g.nodes):
        lanes.setdefault(lane_of[step], len(lanes))
    pos = {s: (float(s), -float(lanes[lane_of[s]])) for s in g.nodes}

    n = len(g.nodes)
    fig = _figure(min(max(7.0, 0.32 * n + 2.5), 22.0), 1.1 + 0.85 * len(lanes))
    ax = fig.add_subplot()
    frontier = frontier_steps(analysis) & set(g.nodes)
    node_size = 220 if n <= 40 else 120 if n <= 120 else 50

    types_seen = []
    for etype in sorted({d["type"] for _, _, d in g.edges(data=True)}, key=lambda t: (t != "temporal", t)):
        color, width, rad, label = EDGE_STYLES.get(etype, OTHER_EDGE_STYLE)
        edgelist = [(u, v) for u, v, d in g.edges(data=True) if d["type"] == etype]
        # Time runs left to right, so next-step edges need no arrowheads and can be one fast
        # LineCollection; so can dependency arcs once there are too many to tell apart.
        curved = etype != "temporal" and len(edgelist) <= MAX_CURVED_EDGES
        kwargs = {"arrows": True, "arrowsize": 8, "node_size": node_size,
                  "connectionstyle": f"arc3,rad={rad}"} if curved else {"arrows": False}
        nx.draw_networkx_edges(g, pos, edgelist=edgelist, ax=ax, edge_color=color, width=width, **kwargs)
        types_seen.append((label or etype.replace("_", " "), color))

    if frontier:
        nx.draw_networkx_nodes(g, pos, nodelist=sorted(frontier), ax=ax, node_size=node_size * 2.6,
                               node_color="none", edgecolors=FRONTIER_COLOR, linewidths=2.2)
    colors = [PHASE_COLORS.get(g.nodes[s].get("phase"), OTHER_PHASE_COLOR) for s in g.nodes]
    edgecolors = ["#d62728" if g.nodes[s].get("status") == "error" else "#333333" for s in g.nodes]
    widths = [2.0 if g.nodes[s].get("status") == "error" else 0.6 for s in g.nodes]
    nx.draw_networkx_nodes(g, pos, nodelist=list(g.nodes), ax=ax, node_size=node_size,
                           node_color=colors, edgecolors=edgecolors, linewidths=widths)
    if n <= 80:
        nx.draw_networkx_labels(g, pos, labels={s: str(s) for s in g.nodes}, ax=ax, font_size=7)
    if highlight is not None and highlight in pos:
        x, y = pos[highlight]
        ax.plot([x], [y + 0.32], marker="*", markersize=13, color="#d62728", zorder=5)

    ax.set_yticks([-i for i in lanes.values()], list(lanes))
    # networkx's drawing helpers switch tick labels off; the lanes need them back.
    ax.tick_params(axis="y", left=False, labelleft=True, length=0, labelsize=8)
    ax.tick_params(axis="x", bottom=True, labelbottom=True, labelsize=7)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step", fontsize=8)
    ax.set_ylim(-len(lanes) + 0.4, 0.75)
    ax.set_xlim(min(g.nodes) - 0.8, max(g.nodes) + 0.8)
    for spine in ("top", "right", "left"):
        ax.spines[spine].set_visible(False)

    phases = sorted({g.nodes[s].get("phase") for s in g.nodes if g.nodes[s].get("phase")})
    handles = [Line2D([], [], marker="o", linestyle="", markerfacecolor=PHASE_COLORS.get(p, OTHER_PHASE_COLOR),
                      markeredgecolor="#333333", label=p) for p in phases]
    handles += [Line2D([], [], color=c, label=label) for label, c in types_seen]
    if any(g.nodes[s].get("status") == "error" for s in g.nodes):
        handles.append(Line2D([], [], marker="o", linestyle="", markerfacecolor="white", markeredgecolor="#d62728",
                              markeredgewidth=2, label="step with an error"))
    if frontier:
        handles.append(Line2D([], [], marker="o", linestyle="", markerfacecolor="none",
                              markeredgecolor=FRONTIER_COLOR, markeredgewidth=2, markersize=10,
                              label="anomalous frontier"))
    if highlight is not None and highlight in pos:
        handles.append(Line2D([], [], marker="*", linestyle="", color="#d62728", markersize=10,
                              label=highlight_label))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
    return _png(fig)


def scores_png(analysis: dict, *, trials: list[dict] | None = None,
               hypothesis_steps: list[int] | None = None) -> bytes | None:
    """Per-step scores of each detector on a shared step axis, one panel per detector
    (their scales differ), frontier steps shaded, trial starts dashed, hypotheses marked.
    None when the analysis has no scores."""
    # each step's number and its detectors' scores that are finite numbers
    scores = [{**{k: float(v) for k, v in s.items() if _score(v)}, "step": step}
              for s in objects(analysis.get("scores")) if (step := whole(s.get("step"))) is not None]
    if not scores:
        return None
    named = [d for d in listed(analysis.get("detectors")) if isinstance(d, str)]
    detectors = [d for d in named if any(s.get(d) is not None for s in scores)]
    if not detectors:
        detectors = [d for d in DETECTOR_COLORS if any(s.get(d) is not None for s in scores)]
    if not detectors:
        return None
    from matplotlib.ticker import MaxNLocator

    steps = [s["step"] for s in scores]
    fig = _figure(min(max(7.0, 0.22 * len(steps) + 3.0), 20.0), 1.2 + 1.6 * len(detectors))
    axes = fig.subplots(len(detectors), 1, sharex=True, squeeze=False)[:, 0]
    for ax, detector in zip(axes, detectors):
        points = [(s["step"], s[detector]) for s in scores if s.get(detector) is not None]
        xs, ys = zip(*points)
        color = DETECTOR_COLORS.get(detector, "#333333")
        ax.plot(xs, ys, color=color, linewidth=1.4, marker="o", markersize=3.5)
        for step in frontier_of(analysis, detector):
            ax.axvspan(step - 0.45, step + 0.45, color=FRONTIER_COLOR, alpha=0.15, linewidth=0)
        for trial in (trials or [])[1:]:
            ax.axvline(trial.get("start", 0) - 0.5, color="#555555", linestyle="--", linewidth=0.8)
        ax.set_ylabel("score", fontsize=8)
        ax.set_title(DETECTOR_LABELS.get(detector, detector), fontsize=9, loc="left")
        ax.tick_params(labelsize=7)
        ax.grid(axis="y", alpha=0.3)
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
    for rank, step in enumerate(hypothesis_steps or [], start=1):
        for ax in axes:
            ax.axvline(step, color="#d62728", linewidth=0.9, alpha=0.7)
        axes[0].annotate(f"H{rank}", xy=(step, 1.0), xycoords=("data", "axes fraction"),
                         xytext=(2, 2), textcoords="offset points", fontsize=7, color="#d62728")
    axes[-1].set_xlabel("step (shaded: anomalous frontier; dashed: a new trial starts; red line: hypothesis)",
                        fontsize=8)
    axes[-1].set_xlim(min(steps) - 0.7, max(steps) + 0.7)
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    return _png(fig)


def _score(value) -> bool:
    """Whether a stored score can be drawn: a finite number."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
