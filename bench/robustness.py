"""The localization robustness suite (`bench/localization.py --perturb`): each seed's demo
corpus recorded once, then analyzed as recorded and under every rewrite of bench/perturb.py,
clean and failed sessions alike (the HGT trained on the rewritten clean sessions); per
rewrite, top-1 / hit@3 of the shipped ranker, of the graph heuristics alone, and of the
baselines, scored on the recorded steps (a benchmark helper, not product).
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from demo_corpus import DemoCorpus
from fresh_sessions import drop_trained
from perturb import expand, perturb
from perturb_retries import original_steps
from step_rankings import by_score, evaluate, recency_baseline


def run_suite(domain: str, spec: str, seeds: list[int], per_kind: int, epochs: int) -> None:
    """`bench/localization.py --perturb SPEC`: each seed's corpus recorded once, then analyzed
    as recorded and under every rewrite SPEC names; one table per seed, then all together."""
    rewrites = expand(spec)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, DemoCorpus(tmp, domain=domain) as corpus:
        for seed in seeds:
            rows += perturb_seed(corpus, seed, per_kind, epochs, Path(tmp) / "models", rewrites)
            if len(seeds) > 1:  # a long run's seeds so far, should it be cut short
                summarize_perturbed([r for r in rows if r["seed"] == seed], [seed])
    summarize_perturbed(rows, seeds)


def both_orders(doc: dict, model) -> tuple[list, list[int], list[int]]:
    """The shipped ranker's step order and the graph heuristics' (ranker=None) in one pass:
    analyze_document's own steps, done once instead of once per order."""
    from tracefix.analysis.detectors import IsolationForestDetector
    from tracefix.analysis.evidence import findings
    from tracefix.analysis.features import feature_matrix
    from tracefix.analysis.frontier import frontiers
    from tracefix.analysis.graph import build_graph
    from tracefix.analysis.hypotheses import rank_hypotheses
    from tracefix.analysis.pipeline import session_failed
    from tracefix.analysis.ranker import ranker_inputs, session_kind, shipped_rankers
    from tracefix.analysis.units import build_units

    units = build_units(doc)
    graph = build_graph(units)
    X = feature_matrix(graph)
    scores = {"isolation_forest": IsolationForestDetector().fit_score(X)}
    if model is not None:
        scores["hgt"] = model.score(graph)
    failed = session_failed(doc)
    found_by = findings(graph)
    hypotheses = rank_hypotheses(graph, scores, frontiers(scores), X, failed=failed, found_by=found_by)
    heuristic = [h["step"] for h in hypotheses]
    ranker = shipped_rankers().get(session_kind(doc))
    if ranker is None or len(units) < 2 or not failed:
        return units, heuristic, heuristic
    values = ranker.scores(ranker_inputs(doc, units, scores, found_by))
    return units, by_score(values), heuristic


def perturb_seed(corpus: DemoCorpus, seed: int, per_kind: int, epochs: int, model_dir: Path,
                 rewrites: dict[str, list[str]]) -> list[dict]:
    """One recorded corpus, analyzed as recorded and under every rewrite: a row per failed
    session and rewrite with the ranker's and the heuristics' top-3 and the baselines'."""
    from tracefix.analysis.pipeline import analyze_document, train_on_documents

    clean_ids, truth, docs, record_s = corpus.record_seed(seed, per_kind)
    truth = drop_trained(truth, docs, f"{corpus.domain.name} seed {seed}")
    failed = [t for t in truth if docs[t["session"]].get("outcome") == "failure"]
    print(f"seed {seed}: {len(clean_ids)} clean + {len(truth)} faulted sessions recorded in {record_s:.1f}s, "
          f"{len(failed)} failed", flush=True)
    rows = []
    for name, steps in {"none": [], **rewrites}.items():
        t0 = time.perf_counter()
        view = {sid: perturb(doc, steps, seed=seed) for sid, doc in docs.items()}
        train_docs = [view[s] for s in clean_ids if view[s].get("outcome") == "success"]
        model, _ = train_on_documents(train_docs, epochs=epochs, out=model_dir / f"seed{seed}-{name}")
        for i, label in enumerate(failed):
            recorded, doc = docs[label["session"]], view[label["session"]]
            units, ranked, heuristic = both_orders(doc, model)
            if i == 0:  # the one-pass mirror must agree with the product's entry point
                product = [h["step"] for h in analyze_document(doc, model)["hypotheses"]]
                assert product[:3] == ranked[:3], (name, product[:3], ranked[:3])
            # A rewrite that added steps (retries) is scored on the recorded steps they stand for.
            origin = original_steps(recorded, doc)
            ranked, heuristic = (list(dict.fromkeys(origin[k] for k in order)) for order in (ranked, heuristic))
            n, gt = len(recorded["steps"]), label["step"]
            rows.append({"seed": seed, "rewrite": name, "kind": label["kind"], "n": n, "truth": gt,
                         "ranker": evaluate(ranked, gt, n), "heuristics": evaluate(heuristic, gt, n),
                         "recency": evaluate([origin[recency_baseline(units)]], gt, n),
                         "random": {"top1": 1 / n, "hit3": min(3, n) / n, "err": 0}})
        print(f"  {name:<14} trained and analyzed in {time.perf_counter() - t0:.1f}s", flush=True)
    return rows


def summarize_perturbed(rows: list[dict], seeds: list[int], target: float = 0.85) -> None:
    names = list(dict.fromkeys(r["rewrite"] for r in rows))
    w = max(len("rewrite"), *map(len, names))

    def mean(subset, method, key):
        return sum(r[method][key] for r in subset) / len(subset) if subset else float("nan")

    print()
    print(f"robustness suite, seeds {','.join(map(str, seeds))} (top-1 / hit@3; target top-1 >= {target})")
    print(f"{'rewrite':<{w}} {'n':>3}  {'ranker':>11}  {'heuristics':>11}  {'recency':>11}  {'random':>11}  "
          f"{'ranker per seed':<20} target")
    for name in names:
        subset = [r for r in rows if r["rewrite"] == name]
        cells = [f"{mean(subset, m, 'top1'):.2f} / {mean(subset, m, 'hit3'):.2f}"
                 for m in ("ranker", "heuristics", "recency", "random")]
        per_seed = "/".join(f"{mean([r for r in subset if r['seed'] == s], 'ranker', 'top1'):.2f}" for s in seeds)
        ok = "met" if mean(subset, "ranker", "top1") >= target else "MISSED"
        print(f"{name:<{w}} {len(subset):>3}  " + "  ".join(f"{c:>11}" for c in cells) + f"  {per_seed:<20} {ok}")
    kinds = sorted({r["kind"] for r in rows})
    print()
    print("ranker top-1 per fault kind and rewrite:")
    print(f"{'rewrite':<{w}} " + " ".join(f"{k[:12]:>12}" for k in kinds))
    for name in names:
        subset = [r for r in rows if r["rewrite"] == name]
        print(f"{name:<{w}} " + " ".join(f"{mean([r for r in subset if r['kind'] == k], 'ranker', 'top1'):>12.2f}"
                                        for k in kinds))
