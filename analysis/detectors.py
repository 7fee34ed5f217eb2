"""The two anomaly detectors of AgentTether section III-C2, shaped like scikit-learn estimators.

- IsolationForestDetector: run-local, no training corpus. Fit on one run's feature matrix
  (features.py), score the same run. Higher = more anomalous.
- HGTDetector: a normal-behaviour model. A heterogeneous graph transformer (HGTConv) over the
  critical transition graph's heterogeneous view, trained self-supervised on successful
  sessions to recover masked categorical attributes (tool, status, agent, phase, outcome) and
  masked dependency edges from their neighbourhood. A step's surprise is the mean of its
  masked-attribute loss and its edge-reconstruction loss, with every step masked once over
  a few deterministic rounds.

torch and torch_geometric are imported when an HGT is built, never at module import.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from .graph import CATEGORICAL, DEPENDENCY_TYPES, TransitionGraph, Vocab, hetero_views

MODEL_FORMAT = 1  # bump when the saved file's layout changes; part of the version string


class IsolationForestDetector:
    """scikit-learn IsolationForest over per-step features of one run."""

    name = "isolation_forest"

    def __init__(self, n_estimators: int = 100, max_samples: int = 256, random_state: int = 0):
        self.n_estimators = n_estimators
        self.max_samples = max_samples
        self.random_state = random_state
        self.forest_ = None

    def fit(self, X: Any) -> "IsolationForestDetector":
        from sklearn.ensemble import IsolationForest

        self.forest_ = IsolationForest(n_estimators=self.n_estimators,
                                       max_samples=min(self.max_samples, max(len(X), 1)),
                                       random_state=self.random_state).fit(X)
        return self

    def score(self, X: Any) -> Any:
        """Anomaly score per row: the negated IsolationForest score, in (0, 1], higher = stranger."""
        if self.forest_ is None:
            raise RuntimeError("IsolationForestDetector.score called before fit")
        return -self.forest_.score_samples(X)

    def fit_score(self, X: Any) -> Any:
        import numpy as np

        if len(X) < 2:  # a forest needs two samples to split; one step is not an outlier of itself
            return np.zeros(len(X))
        return self.fit(X).score(X)


@dataclass
class HGTConfig:
    hidden: int = 64
    heads: int = 4
    layers: int = 2
    rounds: int = 4  # masking rounds: step k is masked in round k % rounds
    window: int = 4  # edge reconstruction looks at steps within this distance (plus true neighbours)
    epochs: int = 30
    lr: float = 3e-3
    batch_size: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")


@contextlib.contextmanager
def _torch_threads() -> Iterator[None]:
    """Run torch with few intra-op threads: our graphs are small, and on a shared CPU extra
    threads only spin against each other (measured: 1 thread trains ~20x faster than the
    default under load). TRACEFIX_TORCH_THREADS overrides; the host's setting is restored."""
    import torch

    wanted = int(os.environ.get("TRACEFIX_TORCH_THREADS", "1"))
    before = torch.get_num_threads()
    if wanted > 0 and wanted != before:
        torch.set_num_threads(wanted)
    try:
        yield
    finally:
        if wanted > 0 and wanted != before:
            torch.set_num_threads(before)


def _select_device(device: str | None) -> Any:
    import torch

    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _build_model(config: HGTConfig, vocab: Vocab, metadata: Any) -> Any:
    import torch
    from torch_geometric.nn import HGTConv, Linear

    class NormalBehaviourHGT(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            h = config.hidden
            self.inputs = torch.nn.ModuleDict({nt: Linear(-1, h) for nt in metadata[0]})
            self.convs = torch.nn.ModuleList([HGTConv(h, h, metadata, config.heads) for _ in range(config.layers)])
            self.attr_heads = torch.nn.ModuleDict({a: torch.nn.Linear(h, vocab.size(a)) for a in CATEGORICAL})
            # Pair (masked step, candidate step) -> which dependency types join them.
            self.edge_head = torch.nn.Sequential(torch.nn.Linear(3 * h + 2, h), torch.nn.ReLU(),
                                                 torch.nn.Linear(h, len(DEPENDENCY_TYPES)))

        def forward(self, x_dict: dict, edge_index_dict: dict) -> Any:
            h = {nt: self.inputs[nt](x).relu() for nt, x in x_dict.items()}
            for conv in self.convs:
                h = conv(h, {et: ei for et, ei in edge_index_dict.items() if et in self._edge_types})
            return h["step"]

        _edge_types = set(metadata[1])

        def attr_logits(self, z: Any) -> dict:
            return {a: head(z) for a, head in self.attr_heads.items()}

        def edge_logits(self, z: Any, pairs: Any, geometry: Any) -> Any:
            a, b = z[pairs[0]], z[pairs[1]]
            return self.edge_head(torch.cat([a, b, a * b, geometry], dim=1))

    return NormalBehaviourHGT()


def _edge_candidates(graph: TransitionGraph, masked: Iterable[int], window: int) -> tuple[list, list, list]:
    """For each masked step: candidate partners within `window` plus its true dependency
    neighbours; label = which dependency types join the pair (either direction)."""
    n = len(graph)
    joined: dict[tuple[int, int], set[str]] = {}
    for e in graph.edges:
        if e.type in DEPENDENCY_TYPES:
            key = (min(e.src, e.dst), max(e.src, e.dst))
            joined.setdefault(key, set()).add(e.type)
    pairs, labels, geometry = [], [], []
    for k in masked:
        partners = set(range(max(0, k - window), min(n, k + window + 1))) - {k}
        partners |= set(graph.dependency_sources(k))
        partners |= {e.dst for e in graph.out_edges(k, DEPENDENCY_TYPES)}
        for j in sorted(partners):
            types = joined.get((min(k, j), max(k, j)), set())
            pairs.append((k, j))
            labels.append([float(t in types) for t in DEPENDENCY_TYPES])
            d = (j - k) / window
            geometry.append([max(min(d, 2.0), -2.0), float(abs(j - k) == 1)])
    return pairs, labels, geometry


def _examples(graph: TransitionGraph, vocab: Vocab, masks: list[list[int]], window: int) -> list[Any]:
    """One model input per masking round of one session; candidate pairs ride along as an
    extra edge type so torch_geometric batching offsets them with the step nodes."""
    import torch

    out = []
    for masked, data in zip(masks, hetero_views(graph, vocab, masks)):
        pairs, labels, geometry = _edge_candidates(graph, masked, window)
        store = data["step", "candidate", "step"]
        store.edge_index = torch.tensor(pairs, dtype=torch.long).t().contiguous() if pairs else torch.zeros(2, 0, dtype=torch.long)
        store.y = torch.tensor(labels, dtype=torch.float).view(-1, len(DEPENDENCY_TYPES))
        store.geometry = torch.tensor(geometry, dtype=torch.float).view(-1, 2)
        out.append(data)
    return out


def _losses(model: Any, batch: Any, with_logits: bool = False) -> tuple[Any, ...]:
    """Per-node attribute loss and per-node edge loss for the masked steps of a batch.
    Returns (attr_loss[n_step], edge_loss[n_step]) (+ the attribute logits); unmasked
    steps get 0."""
    import torch
    import torch.nn.functional as F

    z = model(batch.x_dict, batch.edge_index_dict)
    n = z.size(0)
    truth = batch["step"].cat
    logits = model.attr_logits(z)
    attr = torch.stack([F.cross_entropy(logits[a], truth[:, i], reduction="none")
                        for i, a in enumerate(CATEGORICAL)], dim=1).mean(dim=1)
    attr = attr * batch["step"].masked.float()
    cand = batch["step", "candidate", "step"]
    edge = torch.zeros(n, device=z.device)
    if cand.edge_index.size(1):
        per_pair = F.binary_cross_entropy_with_logits(
            model.edge_logits(z, cand.edge_index, cand.geometry), cand.y, reduction="none").mean(dim=1)
        src = cand.edge_index[0]
        edge = edge.index_add(0, src, per_pair)
        counts = torch.zeros(n, device=z.device).index_add(0, src, torch.ones_like(per_pair))
        edge = edge / counts.clamp(min=1)
    return (attr, edge, logits) if with_logits else (attr, edge)


class HGTDetector:
    """Normal-behaviour HGT. fit(graphs of successful sessions) -> score(graph) per step."""

    name = "hgt"

    def __init__(self, config: HGTConfig | None = None, device: str | None = None, **params: Any):
        self.config = config or HGTConfig(**params)
        self.device_name = device
        self.vocab: Vocab | None = None
        self.model_ = None
        self.version: str | None = None
        self.trained_on = 0
        self.history: list[dict] = []

    # -- building -----------------------------------------------------------------------
    def _init_model(self, sample: Any) -> None:
        import torch

        torch.manual_seed(self.config.seed)
        self.model_ = _build_model(self.config, self.vocab, sample.metadata())
        self.model_.to(self.device)
        with torch.no_grad():  # a dry forward materializes the lazy Linear(-1, ...) inputs
            self.model_(sample.to(self.device).x_dict, sample.edge_index_dict)

    @property
    def device(self) -> Any:
        return _select_device(self.device_name)

    def _rounds(self, graph: TransitionGraph) -> list[list[int]]:
        r = self.config.rounds
        return [m for m in ([k for k in range(len(graph)) if k % r == i] for i in range(r)) if m]

    # -- training -----------------------------------------------------------------------
    def fit(self, graphs: list[TransitionGraph], progress: Callable[[dict], None] | None = None) -> "HGTDetector":
        with _torch_threads():
            return self._fit(graphs, progress)

    def _fit(self, graphs: list[TransitionGraph], progress: Callable[[dict], None] | None) -> "HGTDetector":
        import random

        import torch
        from torch_geometric.data import Batch

        graphs = [g for g in graphs if len(g)]
        if not graphs:
            raise ValueError("HGTDetector.fit needs at least one session with steps")
        self.vocab = Vocab.fit(g.units for g in graphs)
        examples = [x for g in graphs for x in _examples(g, self.vocab, self._rounds(g), self.config.window)]
        self._init_model(examples[0].clone())
        opt = torch.optim.AdamW(self.model_.parameters(), lr=self.config.lr, weight_decay=1e-2)
        rng = random.Random(self.config.seed)
        self.model_.train()
        for epoch in range(self.config.epochs):
            started = time.perf_counter()
            order = list(range(len(examples)))
            rng.shuffle(order)
            total, count = 0.0, 0
            for i in range(0, len(order), self.config.batch_size):
                batch = Batch.from_data_list([examples[j] for j in order[i:i + self.config.batch_size]]).to(self.device)
                attr, edge = _losses(self.model_, batch)
                masked = batch["step"].masked
                loss = (attr[masked].mean() + edge[masked].mean()) / 2
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * int(masked.sum())
                count += int(masked.sum())
            record = {"epoch": epoch + 1, "epochs": self.config.epochs, "loss": total / max(count, 1),
                      "seconds": time.perf_counter() - started}
            self.history.append(record)
            if progress:
                progress(record)
        self.model_.eval()
        self.trained_on = len(graphs)
        self.version = self._version()
        return self

    # -- scoring ------------------------------------------------------------------------
    def score(self, graph: TransitionGraph) -> Any:
        """Surprise per step: mean of masked-attribute and edge-reconstruction losses."""
        with _torch_threads():
            return self._score(graph)

    def _score(self, graph: TransitionGraph) -> Any:
        import numpy as np
        import torch
        from torch_geometric.data import Batch

        if self.model_ is None:
            raise RuntimeError("HGTDetector.score called before fit or load")
        n = len(graph)
        self._expected = None
        if n == 0:
            return np.zeros(0)
        rounds = self._rounds(graph)
        batch = Batch.from_data_list(_examples(graph, self.vocab, rounds, self.config.window)).to(self.device)
        self.model_.eval()
        with torch.no_grad():
            attr, edge, logits = _losses(self.model_, batch, with_logits=True)
        masked = batch["step"].masked
        # Each step is masked in exactly one round; keep what the model expected there, so
        # explain() needs no further forward pass.
        order = torch.arange(masked.size(0), device=masked.device)[masked] % n
        rows = torch.empty(n, dtype=torch.long, device=masked.device)
        rows[order] = torch.arange(masked.size(0), device=masked.device)[masked]
        truth = batch["step"].cat[rows]
        self._expected = (graph, {a: (logits[a][rows].softmax(-1).cpu(), truth[:, i].cpu())
                                      for i, a in enumerate(CATEGORICAL)})
        surprise = ((attr + edge) / 2).cpu().numpy().reshape(len(rounds), n)
        return surprise.sum(axis=0)  # unmasked entries are 0

    def explain(self, graph: TransitionGraph, step: int) -> dict[str, Any]:
        """What the model expected at `step` for each masked attribute, vs what happened
        (from the last score() of this graph, else one forward pass with `step` masked)."""
        import torch

        cached = getattr(self, "_expected", None)
        if cached is not None and cached[0] is graph:
            per_attr = {a: (probs[step], truth[step]) for a, (probs, truth) in cached[1].items()}
        else:
            data = _examples(graph, self.vocab, [[step]], self.config.window)[0].to(self.device)
            with torch.no_grad(), _torch_threads():
                z = self.model_(data.x_dict, data.edge_index_dict)
                logits = self.model_.attr_logits(z)
            per_attr = {a: (logits[a][step].softmax(-1).cpu(), data["step"].cat[step, i].cpu())
                        for i, a in enumerate(CATEGORICAL)}
        out = {}
        for a, (probs, actual) in per_attr.items():
            names = ["<unknown>", "<masked>", *self.vocab.values[a]]
            best, actual = int(probs.argmax()), int(actual)
            out[a] = {"expected": names[best], "actual": names[actual], "p_actual": round(float(probs[actual]), 4)}
        return out

    # -- persistence --------------------------------------------------------------------
    def _state_bytes(self) -> bytes:
        import torch

        buf = io.BytesIO()
        torch.save({k: v.detach().cpu() for k, v in self.model_.state_dict().items()}, buf)
        return buf.getvalue()

    def _version(self) -> str:
        digest = hashlib.sha256(self._state_bytes()).hexdigest()[:10]
        return f"hgt-{MODEL_FORMAT}-{digest}"

    def save(self, path: str | Path) -> Path:
        """Write the model file; a directory gets `<version>.pt` inside it. Returns the file."""
        import torch

        if self.model_ is None:
            raise RuntimeError("nothing to save: fit the HGTDetector first")
        path = Path(path)
        if path.suffix != ".pt":
            path.mkdir(parents=True, exist_ok=True)
            path = path / f"{self.version}.pt"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".pt.tmp")
        torch.save({"format": MODEL_FORMAT, "version": self.version, "config": asdict(self.config),
                    "vocab": self.vocab.to_dict(), "trained_on": self.trained_on, "history": self.history,
                    "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "state_dict": {k: v.detach().cpu() for k, v in self.model_.state_dict().items()}}, tmp)
        tmp.replace(path)  # readers never see a half-written model
        return path

    @classmethod
    def load(cls, path: str | Path, device: str | None = None) -> "HGTDetector":
        import torch

        blob = torch.load(Path(path), map_location="cpu", weights_only=True)
        if blob.get("format") != MODEL_FORMAT:
            raise ValueError(f"{path}: model format {blob.get('format')} is not {MODEL_FORMAT}; retrain with `tracefix train`")
        det = cls(HGTConfig(**blob["config"]), device=device)
        det.vocab = Vocab(blob["vocab"])
        det._init_model(_dry_sample(det.vocab, det.config.window))
        det.model_.load_state_dict(blob["state_dict"])
        det.model_.eval()
        det.version = blob["version"]
        det.trained_on = blob.get("trained_on", 0)
        det.history = blob.get("history", [])
        return det


def _dry_sample(vocab: Vocab, window: int) -> Any:
    """A two-step session that yields every node and edge type with the right widths."""
    from .graph import build_graph
    from .units import build_units

    doc = {"steps": [
        {"index": 0, "kind": "llm", "agent": "a", "output_message": {"role": "assistant", "content": "x11"},
         "tool_calls": [{"name": "t", "arguments": {"x": "x11"}, "result": {"v": "x11"}, "error": "E: x"}]},
        {"index": 1, "kind": "llm", "agent": "a", "output_message": {"role": "assistant", "content": "x11"},
         "tool_calls": [{"name": "t", "arguments": {"x": "x11"}, "result": {"v": "x11"}, "error": "E: x"}]},
    ]}
    return _examples(build_graph(build_units(doc)), vocab, [[1]], window)[0]
