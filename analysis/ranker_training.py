"""Training and cross-validating the learned step ranker on labelled failed sessions.

Labelled data comes as files a user can produce:

- a message log with its decisive step (the Who&When format: `history` or `messages`, a
  task under `question`/`task`..., and `mistake_step`), one per .json file, a folder of
  them, or one per line of a .jsonl file;
- a session document with its labelled step: `{"session": <document>, "mistake_step": k}`
  (bench/demo_labelled.py writes the demo's injected faults this way), optionally with
  `"hgt": [per-step surprise]` from an HGT trained on the same app's successful sessions, so
  the ranker learns what the HGT's surprise is worth beside the other inputs (without it the
  HGT columns are 0 in training and the ranker gives them no weight).

Every log goes through the product's own path (the importer's document, then the same
analysis `analyze` runs) so the ranker learns from the inputs it will see. Labels never
reach the analysis: they are taken off before the document is built.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from .ranker import EVIDENCE_PREFIX, StepRanker, fit_ranker, order_by, ranker_inputs, save_rankers, session_kind

LABEL_KEYS = ("mistake_step", "mistake_agent", "mistake_reason", "mistake_type")


class RecordedSurprise:
    """Stands in for the HGT with the per-step surprise it gave when the labelled session was
    recorded: the model itself (trained on that app's successful sessions) need not travel
    with the labels."""

    version = "recorded"

    def __init__(self, values: Sequence[float]):
        self.values = [float(v) for v in values]

    def score(self, graph: Any) -> list[float]:
        if len(graph) != len(self.values):
            raise ValueError(f"recorded HGT surprise has {len(self.values)} steps, the session {len(graph)}")
        return list(self.values)

    def explain(self, graph: Any, step: int) -> dict:
        return {}


def _records(path: Path) -> Iterator[tuple[str, dict]]:
    if path.is_dir():
        for child in sorted(path.rglob("*.json")):
            yield from _records(child)
        return
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        for line_no, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                yield f"{path}:{line_no}", json.loads(line)
    else:
        data = json.loads(text)
        for i, record in enumerate(data if isinstance(data, list) else [data]):
            yield (f"{path}[{i}]" if isinstance(data, list) else str(path)), record


def labelled_sessions(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """[{"name", "group", "doc", "step"}] from labelled logs and labelled session documents."""
    from tracefix.collector.imports import conversation_to_document

    out = []
    for path in paths:
        path = Path(path)
        for name, record in _records(path):
            if "mistake_step" not in record:
                raise ValueError(f"{name}: no `mistake_step` label")
            step = int(record["mistake_step"])
            if isinstance(record.get("session"), dict):
                doc, group = record["session"], "sessions:" + path.stem
            else:
                doc = conversation_to_document({k: v for k, v in record.items() if k not in LABEL_KEYS + ("hgt",)})
                group = "logs:" + (Path(name.split(":")[0].split("[")[0]).parent.name or path.stem)
            if 0 <= step < len(doc.get("steps") or []):
                hgt = record.get("hgt")
                out.append({"name": name, "group": group, "doc": doc, "step": step,
                            "model": RecordedSurprise(hgt) if isinstance(hgt, list) else None})
    return out


def session_inputs(doc: dict, model: Any = None,
                   evidence: Sequence[Any] | None = None) -> tuple[list[list[float]], dict[str, Any]]:
    """The ranker's inputs for one session, computed exactly as `analyze_document` does
    (with `evidence`, from those evidence detectors only: an ablation)."""
    from .evidence import REGISTRY, findings
    from .graph import build_graph
    from .pipeline import analyze_document
    from .units import build_units

    detectors = REGISTRY if evidence is None else evidence
    result = analyze_document(doc, model, ranker=None, evidence=detectors)
    scores = {name: [row[name] for row in result["scores"]] for name in result["detectors"]}
    units = build_units(doc)
    return ranker_inputs(doc, units, scores, findings(build_graph(units), detectors)), result


def fold_of(items: Sequence[dict], folds: int, seed: int) -> list[int]:
    """Fold per item, stratified by group so every fold holds each corpus; with as many folds
    as items, each item is a fold of its own (leave-one-out: no seed changes it)."""
    if folds >= len(items):
        return list(range(len(items)))
    rng = random.Random(seed)
    assignment = [0] * len(items)
    for group in sorted({it["group"] for it in items}):
        members = [i for i, it in enumerate(items) if it["group"] == group]
        rng.shuffle(members)
        for position, i in enumerate(members):
            assignment[i] = position % folds
    return assignment


def cross_validate(items: Sequence[dict], inputs: Sequence[Sequence[Sequence[float]]], folds: int = 5,
                   seeds: Sequence[int] = (0, 1, 2), l2: float = 0.3,
                   select: Callable[[Sequence[float]], Sequence[float]] | None = None) -> list[list[int]]:
    """Held-out rankings: for each seed, each session ranked by a model fitted on the other
    folds. Returns one ranking per (seed, session), in seed-major order. `select` keeps a
    subset of the inputs (for ablations: the others are zeroed before fitting)."""
    prepared = [[list(select(row)) for row in X] for X in inputs] if select else inputs
    rankings: list[list[int]] = []
    for seed in seeds:
        assignment = fold_of(items, folds, seed)
        held: list[list[int]] = [[] for _ in items]
        for fold in range(folds):
            train = [(prepared[i], items[i]["step"]) for i in range(len(items)) if assignment[i] != fold]
            model = fit_ranker(train, l2=l2)
            for i in range(len(items)):
                if assignment[i] == fold:
                    held[i] = order_by(model.scores(prepared[i]))
        rankings += held
    return rankings


def left_out_inputs(kind: str) -> tuple[str, ...]:
    """The evidence detectors' inputs a ranker of this session kind is fitted without: those
    that earned on no labelled data, and for message logs those that earned only on the
    bundled testbed (evidence/base.py says how each was judged)."""
    from .evidence import REGISTRY

    return tuple(EVIDENCE_PREFIX + d.name for d in REGISTRY
                 if not d.ranker_input or (d.testbed_only and kind == "message"))


def train_rankers(paths: Iterable[str | Path], out: str | Path, l2: float = 0.3,
                  progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, StepRanker], Path]:
    """Fit one ranker per session kind on every labelled session in `paths`, each without the
    inputs `left_out_inputs` names for its kind; write them to `out`."""
    items = labelled_sessions(paths)
    if not items:
        raise ValueError("no labelled sessions found")
    inputs = []
    for done, item in enumerate(items, start=1):
        inputs.append(session_inputs(item["doc"], item.get("model"))[0])
        if progress:
            progress(done, len(items))
    rankers = {}
    for kind in sorted({session_kind(item["doc"]) for item in items}):
        members = [i for i, item in enumerate(items) if session_kind(item["doc"]) == kind]
        groups: dict[str, int] = {}
        for i in members:
            groups[items[i]["group"]] = groups.get(items[i]["group"], 0) + 1
        rankers[kind] = fit_ranker([(inputs[i], items[i]["step"]) for i in members], l2=l2,
                                   trained_on={"sessions": len(members), "groups": groups},
                                   left_out=left_out_inputs(kind))
    return rankers, save_rankers(rankers, out)
