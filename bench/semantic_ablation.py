"""Do sentence-embedding features help the learned step ranker on real agents' logs?

    .venv/bin/python bench/semantic_ablation.py [--limit N] [--folds 5] [--seeds 0 1 2]

The Who&When development split (/work/shared/data/whowhen-dev, labels stripped before the
document is built, as `tracefix train --ranker` does) goes through `session_inputs`: the
ranker's inputs exactly as `analyze` computes them (no HGT, no LLM). To those the
experiment appends the columns of `analysis.semantic` (WordLlama's static embeddings,
shipped in its wheel) the way the ranker treats its own signals: raw, within-session
z-scores for the session-relative ones, and each raw column times log(n)/4. Then the same
cross-validation as bench/whowhen.py's `full` row (5 folds stratified by subset, 3 seeds,
sessions in file-number order so the folds are the same) for each variant:

  full (current inputs)         the ranker as shipped today
  + semantic                    the current inputs and the semantic columns
  + semantic z-scores only      ... only their within-session z-scores (fewest new weights)
  full - TF-IDF similarity      the lexical task/final similarity and novelty zeroed
  semantic for TF-IDF           ... and the semantic columns in their place
  signals only (+ semantic)     no detector or heuristic input, with and without semantics
  semantic only                 the semantic columns alone (plus position, to be fair:
                                rel_position, agent_turn, first_agent_turn)

Printed side by side: top-1 and hit@3 per subset (mean over seeds), the seed spread of
top-1, and the paired change against `full`: in how many (session, seed) pairs the variant's
first step became right (+) or wrong (-). One session moves a rate by 1/63 (algo) or 1/29
(hand). Choosing the best of these rows on this same split would itself be fitting to it:
a variant earns a place only by a margin well beyond a session or two.

Also timed: the semantic columns of one 1,000-step session made of the split's own steps
(real text), after the model is loaded.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

DATA = Path("/work/shared/data/whowhen-dev")
SUBSETS = ("Algorithm-Generated", "Hand-Crafted")
TFIDF_COLUMNS = ("task_similarity", "final_similarity", "novelty")
POSITION_COLUMNS = ("rel_position", "agent_turn", "first_agent_turn")


def load_items(limit: int | None) -> list[dict]:
    """Labelled sessions per subset, in file-number order (as bench/whowhen.py, so folds match)."""
    from tracefix.analysis.ranker_training import labelled_sessions

    items = []
    for subset in SUBSETS:
        files = sorted((DATA / subset).glob("*.json"), key=lambda p: int(p.stem) if p.stem.isdigit() else p.stem)
        for path in files[:limit]:
            for item in labelled_sessions([path]):
                items.append({**item, "group": subset})
    return items


def semantic_block(doc: dict, embedder) -> tuple[list[str], list[list[float]], float]:
    """The semantic columns as the ranker would take them: raw, z-scored, scaled by log(n)."""
    from tracefix.analysis.features import zscores
    from tracefix.analysis.semantic import SEMANTIC_RELATIVE, semantic_columns
    from tracefix.analysis.units import build_units

    units = build_units(doc)
    t0 = time.perf_counter()
    names, rows = semantic_columns(doc, units, embedder=embedder)
    seconds = time.perf_counter() - t0
    n = len(rows)
    relative = [zscores([row[names.index(name)] for row in rows]) for name in SEMANTIC_RELATIVE]
    scale = math.log(n) / 4.0 if n else 0.0
    block = [rows[k] + [column[k] for column in relative] + [v * scale for v in rows[k]] for k in range(n)]
    all_names = list(names) + [f"{name}_z" for name in SEMANTIC_RELATIVE] + [f"{name}_x_log_n" for name in names]
    return all_names, block, seconds


def evaluate(items: list[dict], inputs: list, folds: int, seeds: tuple[int, ...], select=None) -> dict:
    """Per subset: mean top-1 / hit@3 over seeds, top-1's range, and each (seed, session)'s hit."""
    from tracefix.analysis.ranker_training import cross_validate

    flat = cross_validate(items, inputs, folds=folds, seeds=seeds, select=select)
    out = {}
    for subset in SUBSETS:
        idx = [i for i, it in enumerate(items) if it["group"] == subset]
        top1, hit3, hits = [], [], []
        for s in range(len(seeds)):
            ranked = [flat[s * len(items) + i] for i in idx]
            hits += [r[0] == items[i]["step"] for r, i in zip(ranked, idx)]
            top1.append(sum(r[0] == items[i]["step"] for r, i in zip(ranked, idx)) / len(idx))
            hit3.append(sum(items[i]["step"] in r[:3] for r, i in zip(ranked, idx)) / len(idx))
        out[subset] = {"n": len(idx), "top1": statistics.mean(top1), "hit3": statistics.mean(hit3),
                       "top1_min": min(top1), "top1_max": max(top1), "hits": hits}
    return out


def long_session_seconds(items: list[dict], embedder, steps: int = 1000) -> tuple[float, int]:
    """Seconds for the semantic columns of one `steps`-step session built from the split's own
    steps (best of three, model already loaded), and its text size in characters."""
    from tracefix.analysis.semantic import semantic_columns
    from tracefix.analysis.step_signals import text_of
    from tracefix.analysis.units import build_units

    pool = [step for it in items for step in it["doc"]["steps"]]
    doc = {**items[0]["doc"], "steps": [dict(pool[k % len(pool)], index=k) for k in range(steps)]}
    units = build_units(doc)
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        semantic_columns(doc, units, embedder=embedder)
        runs.append(time.perf_counter() - t0)
    return min(runs), sum(len(text_of(u)) for u in units)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="only the first N logs of each subset")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args()

    from tracefix.analysis.ranker import FEATURE_NAMES
    from tracefix.analysis.ranker_training import session_inputs
    from tracefix.analysis.semantic import load_embedder

    t0 = time.perf_counter()
    embedder = load_embedder()
    load_s = time.perf_counter() - t0
    if embedder is None:
        raise SystemExit("the semantic model is not installed: pip install 'tracefix[analysis]' (wordllama)")
    items = load_items(args.limit)
    base, semantic, embed_seconds = [], [], []
    t0 = time.perf_counter()
    for done, item in enumerate(items, start=1):
        base.append(session_inputs(item["doc"])[0])
        names, block, seconds = semantic_block(item["doc"], embedder)
        semantic.append(block)
        embed_seconds.append(seconds)
        if done % 20 == 0 or done == len(items):
            print(f"  inputs for {done}/{len(items)} sessions ({time.perf_counter() - t0:.0f}s)", file=sys.stderr)

    combined = [[b + s for b, s in zip(X, S)] for X, S in zip(base, semantic)]
    all_names = list(FEATURE_NAMES) + names
    width = len(all_names)

    def keep(predicate):
        mask = [predicate(name) for name in all_names]
        return lambda row: [v if m else 0.0 for m, v in zip(mask, row)]

    def base_of(name: str) -> str:
        for suffix in ("_z", "_x_log_n"):
            if name.endswith(suffix):
                return name[: -len(suffix)]
        return name

    is_semantic = lambda name: name in names  # noqa: E731
    is_tfidf = lambda name: base_of(name) in TFIDF_COLUMNS  # noqa: E731
    is_detector = lambda name: base_of(name).startswith(("isolation_forest", "hgt", "evidence_"))  # noqa: E731
    is_position = lambda name: base_of(name) in POSITION_COLUMNS  # noqa: E731
    variants = {
        "full (current inputs)": (base, None),
        "+ semantic": (combined, None),
        "+ semantic z-scores only": (combined, keep(lambda n: not is_semantic(n) or n.endswith("_z"))),
        "full - TF-IDF similarity": (combined, keep(lambda n: not is_semantic(n) and not is_tfidf(n))),
        "semantic for TF-IDF": (combined, keep(lambda n: not is_tfidf(n))),
        "signals only": (combined, keep(lambda n: not is_semantic(n) and not is_detector(n))),
        "signals only + semantic": (combined, keep(lambda n: not is_detector(n))),
        "semantic + position only": (combined, keep(lambda n: is_semantic(n) or is_position(n))),
        "position only": (combined, keep(is_position)),
    }
    assert all(len(row) == width for X in combined for row in X)
    seeds = tuple(args.seeds)
    results = {name: evaluate(items, X, args.folds, seeds, select) for name, (X, select) in variants.items()}

    n_steps = [len(X) for X in base]
    long_s, long_chars = long_session_seconds(items, embedder)
    sizes = {s: sum(it["group"] == s for it in items) for s in SUBSETS}
    print(f"Who&When dev split: {len(items)} sessions ({', '.join(f'{s}: {n}' for s, n in sizes.items())}), "
          f"{args.folds} folds x {len(seeds)} seeds, ranker cross-validated; mean over seeds, [min-max top-1 over seeds]")
    print(f"semantic model {embedder.name} ({embedder.dim}-d): load {load_s:.2f}s; semantic columns per session "
          f"median {statistics.median(embed_seconds) * 1000:.1f} ms, max {max(embed_seconds) * 1000:.1f} ms "
          f"(sessions of median {statistics.median(n_steps):.0f}, max {max(n_steps)} steps); "
          f"a 1,000-step session of the split's steps ({long_chars / 1e6:.1f} M chars): {long_s * 1000:.0f} ms")
    print()
    reference = results["full (current inputs)"]
    print(f"{'variant':<28}" + "".join(f" | {f'{s} (n={n})':<44}" for s, n in sizes.items()))
    print(f"{'':<28}" + " | top-1  hit@3  top-1 over seeds  vs full   " * len(SUBSETS))
    for name, per_subset in results.items():
        line = f"{name:<28}"
        for s in SUBSETS:
            r = per_subset[s]
            gained = sum(h and not g for h, g in zip(r["hits"], reference[s]["hits"]))
            lost = sum(g and not h for h, g in zip(r["hits"], reference[s]["hits"]))
            line += f" | {r['top1']:.3f}  {r['hit3']:.3f}  [{r['top1_min']:.3f}-{r['top1_max']:.3f}]    +{gained:<2} -{lost:<2}  "
        print(line)


if __name__ == "__main__":
    main()
