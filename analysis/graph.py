"""The critical transition graph (AgentTether section III-C1) and its heterogeneous view.

Nodes are transition units. Temporal edges join consecutive units; dependency edges join
units that share state: an artifact one produced and a later one consumed (linked to the
latest producer before the consumer), the same error signature (each occurrence to the
previous one) and the same tool called with the same arguments (a loop: each repetition
to the previous one). Every unit thus adds O(artifacts) edges, so the graph stays linear
in the session length.

`hetero_view` lifts the graph into a torch_geometric HeteroData for the HGT: step nodes
plus typed context nodes (agent, tool, error signature, artifact), made undirected so every
node type receives messages. torch is imported only there.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from .transition_unit import OUTCOMES, PHASES, STATUSES, TransitionUnit

TEMPORAL, ARTIFACT, SAME_ERROR, LOOP = "temporal", "artifact", "same_error", "loop"
EDGE_TYPES = (TEMPORAL, ARTIFACT, SAME_ERROR, LOOP)
DEPENDENCY_TYPES = (ARTIFACT, SAME_ERROR, LOOP)


@dataclass(frozen=True)
class Edge:
    src: int
    dst: int
    type: str
    label: str | None = None  # the shared artifact, error signature or call


@dataclass
class TransitionGraph:
    units: list[TransitionUnit]
    edges: list[Edge]
    _in: dict[int, list[Edge]] = field(default_factory=dict, repr=False)
    _out: dict[int, list[Edge]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for e in self.edges:
            self._in.setdefault(e.dst, []).append(e)
            self._out.setdefault(e.src, []).append(e)

    def __len__(self) -> int:
        return len(self.units)

    def in_edges(self, step: int, types: Iterable[str] = EDGE_TYPES) -> list[Edge]:
        return [e for e in self._in.get(step, ()) if e.type in types]

    def out_edges(self, step: int, types: Iterable[str] = EDGE_TYPES) -> list[Edge]:
        return [e for e in self._out.get(step, ()) if e.type in types]

    def dependency_sources(self, step: int) -> list[int]:
        """Earlier steps this one depends on (artifact producers, earlier same error, earlier same call)."""
        return sorted({e.src for e in self.in_edges(step, DEPENDENCY_TYPES)})

    def to_dict(self) -> dict[str, Any]:
        """The `graph` part of the analysis result (docs/contracts.md section 3)."""
        nodes = [{"step": u.index, "agent": u.agent, "phase": u.phase, "status": u.status,
                  "tool": u.tool, "error": u.error_signature} for u in self.units]
        edges = [{"src": e.src, "dst": e.dst, "type": e.type, **({"label": e.label} if e.label else {})}
                 for e in self.edges]
        return {"nodes": nodes, "edges": edges}


def build_graph(units: list[TransitionUnit]) -> TransitionGraph:
    edges: list[Edge] = []
    seen: set[tuple[int, int, str]] = set()

    def add(src: int, dst: int, kind: str, label: str | None) -> None:
        if src == dst or (src, dst, kind) in seen:
            return
        seen.add((src, dst, kind))
        edges.append(Edge(src, dst, kind, label))

    latest_producer: dict[str, int] = {}
    latest_error: dict[str, int] = {}
    latest_call: dict[str, int] = {}
    for u in units:
        if u.index > 0:
            add(u.index - 1, u.index, TEMPORAL, None)
        for artifact in sorted(u.artifacts_consumed):
            src = latest_producer.get(artifact)
            if src is not None:
                add(src, u.index, ARTIFACT, artifact)
        if u.error_signature:
            if u.error_signature in latest_error:
                add(latest_error[u.error_signature], u.index, SAME_ERROR, u.error_signature)
            latest_error[u.error_signature] = u.index
        for sig in u.call_signatures:
            if sig in latest_call:
                add(latest_call[sig], u.index, LOOP, sig[:120])
            latest_call[sig] = u.index
        for artifact in u.artifacts_produced:
            latest_producer[artifact] = u.index
    return TransitionGraph(units, edges)


# --- heterogeneous view for the HGT -------------------------------------------------------

CATEGORICAL = ("tool", "status", "agent", "phase", "outcome")  # what the HGT learns to recover
UNK, MASK = 0, 1  # reserved ids in every vocabulary
CONTEXT_TYPES = ("agent", "tool", "error", "artifact")
ARTIFACT_KINDS = ("id", "number", "url", "file", "text")
STEP_NUMERIC = 8


@dataclass
class Vocab:
    """Category -> id per categorical attribute; 0 = unknown, 1 = masked."""
    values: dict[str, list[str]]

    @classmethod
    def fit(cls, unit_lists: Iterable[list[TransitionUnit]], max_errors: int = 200) -> "Vocab":
        tools: dict[str, int] = {}
        agents: dict[str, int] = {}
        errors: dict[str, int] = {}
        for units in unit_lists:
            for u in units:
                agents[u.agent] = agents.get(u.agent, 0) + 1
                for t in u.tools:
                    tools[t] = tools.get(t, 0) + 1
                if u.error_signature:
                    errors[u.error_signature] = errors.get(u.error_signature, 0) + 1
        top_errors = sorted(errors, key=lambda k: (-errors[k], k))[:max_errors]
        return cls({
            "tool": ["<none>", *sorted(tools)], "status": list(STATUSES), "agent": sorted(agents),
            "phase": list(PHASES), "outcome": list(OUTCOMES), "error": sorted(top_errors),
        })

    def size(self, attr: str) -> int:
        return len(self.values[attr]) + 2

    def encode(self, attr: str, value: str | None) -> int:
        table = self.__dict__.setdefault("_index", {})
        if attr not in table:
            table[attr] = {v: i + 2 for i, v in enumerate(self.values[attr])}
        return table[attr].get(value if value is not None else "<none>", UNK)

    def to_dict(self) -> dict[str, list[str]]:
        return dict(self.values)


def _artifact_kind(value: str) -> int:
    from .values import ARTIFACT_PATTERNS  # same patterns that found it

    for i, (kind, pattern) in enumerate(ARTIFACT_PATTERNS):
        if pattern.fullmatch(value):
            return ARTIFACT_KINDS.index(kind)
    return ARTIFACT_KINDS.index("text")


def step_numeric(graph: TransitionGraph) -> list[list[float]]:
    """Structural numbers the HGT sees on every step node (none reveals a masked attribute)."""
    import math

    n = len(graph)
    rows = []
    for u in graph.units:
        rows.append([
            u.index / max(n - 1, 1), float(u.index == 0), float(u.index == n - 1),
            math.log1p(len(u.action["calls"])), math.log1p(len(u.artifacts_consumed)) / 3,
            math.log1p(len(u.artifacts_produced)) / 3, math.log1p(u.output_length) / 8,
            math.log1p(len(graph.in_edges(u.index, DEPENDENCY_TYPES))) / 3,
        ])
    return rows


def hetero_view(graph: TransitionGraph, vocab: Vocab, masked: Iterable[int] = ()) -> Any:
    """HeteroData with step and context nodes. Steps in `masked` have their categorical
    attributes replaced by MASK, their edges to agent/tool/error nodes removed (those would
    give the answer away) and their dependency edges removed (the HGT must reconstruct them).

    Step nodes carry `cat` (n x 5 long ids, unmasked truth) for the loss and `x` (one-hot of
    the visible categories + numeric structure) for the model.
    """
    return hetero_views(graph, vocab, [masked])[0]


def hetero_views(graph: TransitionGraph, vocab: Vocab, masks: Iterable[Iterable[int]]) -> list[Any]:
    """`hetero_view` for each mask of one session. What no mask changes (the category ids,
    the structural numbers, the artifact nodes and their edges, the temporal edges) is
    computed once: scoring masks every session in several rounds."""
    import torch
    from torch_geometric.data import HeteroData
    from torch_geometric.transforms import ToUndirected

    units = graph.units
    n = len(units)
    truth = torch.tensor([[vocab.encode("tool", u.tool), vocab.encode("status", u.status),
                           vocab.encode("agent", u.agent), vocab.encode("phase", u.phase),
                           vocab.encode("outcome", u.outcome)] for u in units], dtype=torch.long).view(n, 5)
    numeric = torch.tensor(step_numeric(graph), dtype=torch.float).view(n, STEP_NUMERIC)
    agents = vocab.values["agent"]
    tools = vocab.values["tool"]
    errors = vocab.values["error"]

    # Artifact nodes: one per value that two steps share (masking keeps these edges).
    artifact_ids: dict[str, int] = {}
    e_prod, e_cons = [], []
    producers: dict[str, int] = {}
    consumers: dict[str, int] = {}
    for u in units:
        for a in u.artifacts_produced:
            producers[a] = producers.get(a, 0) + 1
        for a in u.artifacts_consumed:
            consumers[a] = consumers.get(a, 0) + 1
    shared = {a for a in producers if consumers.get(a, 0) + producers[a] >= 2}
    for u in units:
        for a in sorted(u.artifacts_produced & shared):
            e_prod.append((u.index, artifact_ids.setdefault(a, len(artifact_ids))))
        for a in sorted(u.artifacts_consumed & shared):
            e_cons.append((u.index, artifact_ids.setdefault(a, len(artifact_ids))))
    art = torch.zeros(max(len(artifact_ids), 1), len(ARTIFACT_KINDS) + 1)
    for value, i in artifact_ids.items():
        art[i, _artifact_kind(value)] = 1.0
        art[i, -1] = min(producers.get(value, 0) + consumers.get(value, 0), 20) / 20
    temporal = [(e.src, e.dst) for e in graph.edges if e.type == TEMPORAL]
    dependency = [e for e in graph.edges if e.type in DEPENDENCY_TYPES]

    def onehot_ids(names: dict[str, int], table: list[str]) -> Any:
        # +1 slot for unknown values; a placeholder node keeps every type present.
        x = torch.zeros(max(len(names), 1), len(table) + 1)
        if not names:
            return x
        for name, i in names.items():
            x[i, table.index(name) + 1 if name in table else 0] = 1.0
        return x

    def edge_index(pairs: list[tuple[int, int]]) -> Any:
        if not pairs:
            return torch.zeros(2, 0, dtype=torch.long)
        return torch.tensor(pairs, dtype=torch.long).t().contiguous()

    views = []
    for masked in masks:
        masked = set(masked)
        visible = truth.clone()
        mask_vec = torch.zeros(n, dtype=torch.bool)
        if masked:
            idx = torch.tensor(sorted(masked), dtype=torch.long)
            visible[idx] = MASK
            mask_vec[idx] = True
        parts = [torch.nn.functional.one_hot(visible[:, i], vocab.size(a)).float() for i, a in enumerate(CATEGORICAL)]
        data = HeteroData()
        data["step"].x = torch.cat([*parts, numeric], dim=1)
        data["step"].cat = truth
        data["step"].masked = mask_vec

        # Context nodes: one per distinct value the unmasked steps show.
        agent_ids: dict[str, int] = {}
        tool_ids: dict[str, int] = {}
        error_ids: dict[str, int] = {}
        e_agent, e_tool, e_error = [], [], []
        for u in units:
            if u.index in masked:
                continue
            e_agent.append((u.index, agent_ids.setdefault(u.agent, len(agent_ids))))
            for t in dict.fromkeys(u.tools):
                e_tool.append((u.index, tool_ids.setdefault(t, len(tool_ids))))
            if u.error_signature:
                e_error.append((u.index, error_ids.setdefault(u.error_signature, len(error_ids))))
        data["agent"].x = onehot_ids(agent_ids, agents)
        data["tool"].x = onehot_ids(tool_ids, tools)
        data["error"].x = onehot_ids(error_ids, errors)
        data["artifact"].x = art

        data["step", "next", "step"].edge_index = edge_index(temporal)
        for t in DEPENDENCY_TYPES:
            data["step", t, "step"].edge_index = edge_index(
                [(e.src, e.dst) for e in dependency if e.type == t and e.src not in masked and e.dst not in masked])
        data["step", "by", "agent"].edge_index = edge_index(e_agent)
        data["step", "uses", "tool"].edge_index = edge_index(e_tool)
        data["step", "raised", "error"].edge_index = edge_index(e_error)
        data["step", "produces", "artifact"].edge_index = edge_index(e_prod)
        data["step", "consumes", "artifact"].edge_index = edge_index(e_cons)
        # Reverse of every edge type as its own relation ("rev_next", "rev_by", ...): steps hear
        # from later steps and from their context nodes, and every node type receives messages.
        views.append(ToUndirected(merge=False)(data))
    return views
