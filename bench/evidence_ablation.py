"""Leave one evidence detector out (analysis/evidence/: the rules the graph heuristics add up,
whose verdict the learned ranker reads as `heuristic_rank`): the localization benches analyze
each session again with each registered detector switched off in turn, and print top-1 /
hit@3 with it, without it, and the difference (a benchmark helper, not product).

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


def ablation_summary(found: Sequence[set[str]],
                     columns: dict[str, tuple[Sequence[dict], dict[str, Sequence[dict]]]]) -> dict[str, Any]:
    """Per detector: in how many sessions it found evidence, and per column (a way of ranking)
    top-1 / hit@3 with every detector, without this one, and the difference. `columns` maps a
    column to (per-session metrics with all detectors, {detector: per-session metrics without it})."""
    out: dict[str, Any] = {}
    for name in detector_names():
        row: dict[str, Any] = {"sessions_with_evidence": sum(name in f for f in found)}
        for column, (with_all, without) in columns.items():
            row[column] = {f"{key}_{variant}": _mean(metrics, key) for key in ("top1", "hit3")
                           for variant, metrics in (("with", with_all), ("without", without[name]))}
            for key in ("top1", "hit3"):
                row[column][f"{key}_delta"] = row[column][f"{key}_without"] - row[column][f"{key}_with"]
        out[name] = row
    return out


def print_ablation(summary: dict[str, Any], n: int, title: str) -> None:
    columns = [c for c in next(iter(summary.values())) if c != "sessions_with_evidence"]
    print()
    print(f"{title} (n={n}; each cell: with all -> without this detector, difference)")
    marked = _testbed_only()
    print(f"{'detector':<22}{'found in':>9}" + "".join(f" | {c + ': top-1, hit@3':<44}" for c in columns))
    for name, row in summary.items():
        label = name + " (testbed-only)" * (name in marked)
        line = f"{label:<22}{row['sessions_with_evidence']:>5}/{n:<3}"
        for c in columns:
            v = row[c]
            line += " | " + "  ".join(f"{v[k + '_with']:.3f} -> {v[k + '_without']:.3f} {v[k + '_delta']:+.3f}"
                                      for k in ("top1", "hit3"))
        print(line)
