"""Leave one evidence detector out (analysis/evidence/: the rules the graph heuristics add up,
and which the learned ranker reads one input each, `evidence_<name>`): the localization
benches rank each session again with each registered detector switched off in turn, and
print the detector's weight in the ranker, top-1 / hit@3 with it, without it, and the
difference (a benchmark helper, not product).

A detector that carries a fault kind shows a negative difference there; one whose difference
is 0 on a corpus adds nothing to it (or is covered by another detector). How many sessions
the detector found anything in at all comes first: a detector that needs recorded tool
results finds nothing in a conversation in words only.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence


def detector_names() -> tuple[str, ...]:
    from tracefix.analysis.evidence import NAMES

    return NAMES


def _testbed_only() -> set[str]:
    from tracefix.analysis.evidence import REGISTRY

    return {d.name for d in REGISTRY if d.testbed_only}


def leave_one_out(analyze: Callable[[Sequence[Any]], Any]) -> dict[str, Any]:
    """{detector: analyze(every registered detector but that one)}."""
    from tracefix.analysis.evidence import without

    return {name: analyze(without(name)) for name in detector_names()}


def evidence_found(doc: dict) -> set[str]:
    """The detectors that found any evidence in the session."""
    from tracefix.analysis.evidence import REGISTRY
    from tracefix.analysis.graph import build_graph
    from tracefix.analysis.units import build_units

    graph = build_graph(build_units(doc))
    return {d.name for d in REGISTRY if d.evidence(graph)}


def _mean(metrics: Sequence[dict], key: str) -> float:
    return sum(m[key] for m in metrics) / len(metrics) if metrics else float("nan")


def ranker_weights(ranker: Any) -> dict[str, float]:
    """{detector: the weight of its input in this ranker} (per standard deviation of the input)."""
    from tracefix.analysis.ranker import EVIDENCE_PREFIX

    return {name: ranker.weight_of(EVIDENCE_PREFIX + name) for name in detector_names()}


def without_input(name: str) -> Callable[[Sequence[float]], list[float]]:
    """A ranker input row with one detector's input zeroed (for ranker_training.cross_validate)."""
    from tracefix.analysis.ranker import EVIDENCE_PREFIX, FEATURE_NAMES

    column = FEATURE_NAMES.index(EVIDENCE_PREFIX + name)
    return lambda row: [0.0 if i == column else v for i, v in enumerate(row)]


def cross_validated_ablation(items: Sequence[dict], inputs: Sequence[Any], score: Callable[[int, list[int]], dict],
                             folds: int, seeds: Sequence[int]) -> tuple[list[dict], dict[str, list[dict]]]:
    """The ranker cross-validated on these sessions (ranker_training.cross_validate: `items`
    give each session's group and labelled step) with every detector's input, and with each
    one's input zeroed in turn (fitted again on every fold): (per-session metrics, {detector:
    per-session metrics}), each the mean over the fold seeds of `score(session, ranking)`."""
    from tracefix.analysis.ranker_training import cross_validate

    def held_out(select: Callable[[Sequence[float]], list[float]] | None) -> list[dict]:
        flat = cross_validate(items, inputs, folds=folds, seeds=seeds, select=select)
        out = []
        for i in range(len(items)):
            each = [score(i, flat[k * len(items) + i]) for k in range(len(seeds))]
            out.append({key: sum(e[key] for e in each) / len(each) for key in ("top1", "hit3")})
        return out

    return held_out(None), {name: held_out(without_input(name)) for name in detector_names()}


def ablation_summary(found: Sequence[set[str]],
                     columns: dict[str, tuple[Sequence[dict], dict[str, Sequence[dict]]]],
                     weights: dict[str, float] | None = None) -> dict[str, Any]:
    """Per detector: in how many sessions it found evidence, its weight in the ranker (when
    given), and per column (a way of ranking) top-1 / hit@3 with every detector, without this
    one, and the difference. `columns` maps a column to (per-session metrics with all
    detectors, {detector: per-session metrics without it})."""
    out: dict[str, Any] = {}
    for name in detector_names():
        row: dict[str, Any] = {"sessions_with_evidence": sum(name in f for f in found)}
        if weights is not None:
            row["weight"] = weights[name]
        for column, (with_all, without) in columns.items():
            row[column] = {f"{key}_{variant}": _mean(metrics, key) for key in ("top1", "hit3")
                           for variant, metrics in (("with", with_all), ("without", without[name]))}
            for key in ("top1", "hit3"):
                row[column][f"{key}_delta"] = row[column][f"{key}_without"] - row[column][f"{key}_with"]
        out[name] = row
    return out


def print_ablation(summary: dict[str, Any], n: int, title: str) -> None:
    first = next(iter(summary.values()))
    columns = [c for c in first if c not in ("sessions_with_evidence", "weight")]
    weighed = "weight" in first
    print()
    print(f"{title} (n={n}; weight: of the detector's input in the ranker; each cell: with all -> without "
          "this detector, difference)")
    marked = _testbed_only()
    print(f"{'detector':<36}{'found in':>9}" + f"{'weight':>8}" * weighed
          + "".join(f" | {c + ': top-1, hit@3':<44}" for c in columns))
    for name, row in summary.items():
        label = name + " (testbed-only)" * (name in marked)
        line = f"{label:<36}{row['sessions_with_evidence']:>5}/{n:<3}" + f"{row.get('weight', 0.0):>+8.3f}" * weighed
        for c in columns:
            v = row[c]
            line += " | " + "  ".join(f"{v[k + '_with']:.3f} -> {v[k + '_without']:.3f} {v[k + '_delta']:+.3f}"
                                      for k in ("top1", "hit3"))
        print(line)
