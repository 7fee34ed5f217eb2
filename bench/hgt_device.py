"""The HGT on each torch device this machine has: CPU, and CUDA where there is one, side by
side in one run, on the same sessions with the same seed.

    .venv/bin/python bench/hgt_device.py [--sessions 120] [--steps 40] [--epochs 4]
                                         [--score-steps 1000] [--repeats 5]

Per device it prints:
- training: seconds per epoch (median of the epochs after the first, which pays for the
  device's warm-up), and the last epoch's loss;
- scoring one `--score-steps` session with the trained model (median of `--repeats` after a
  warm-up), and the whole analysis of it (`analyze_document`: units, graph, both
  detectors, heuristics, ranker);
- the ratio of each time to the CPU's.

And whether the devices agree where a user would notice: the model trained on the GPU,
saved and loaded on the CPU (what a diagnosis worker without a GPU does with it), scores the
session as the GPU does (largest difference of a step's score); and how alike the CPU's and
the GPU's models (same seed) score the steps (rank correlation, shared top ten) beside two
CPU models of different seeds, the baseline: the devices' arithmetic differs in its last
bits, so training takes another path on each, as it does with another seed.

Sessions are the long banking-style runs of bench/analysis_latency.py (a team: plan,
instruct, look up, transfer, report). Torch runs with the analysis's own thread setting
(TRACEFIX_TORCH_THREADS, default 1) on the CPU. Where torch sees no CUDA device the CPU row
is printed alone, and the script says so.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analysis_latency import long_session  # noqa: E402
from report_render import median_time  # noqa: E402


def _median_time(fn, repeats: int) -> float:
    fn()  # warm-up: allocations, kernels, caches
    return median_time(fn, repeats)


def _synchronized(fn, device: str):
    import torch

    def run():
        out = fn()
        if device == "cuda":
            torch.cuda.synchronize()
        return out
    return run


def rank_correlation(a, b) -> float:
    """Spearman's rho (ties broken by position: scores here are continuous)."""
    import numpy as np

    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def top_shared(a, b, k: int = 10) -> int:
    import numpy as np

    return len(set(np.argsort(-np.asarray(a))[:k].tolist()) & set(np.argsort(-np.asarray(b))[:k].tolist()))


def measure(device: str, graphs, session: dict, graph, epochs: int, repeats: int) -> dict:
    """Train on `graphs` and time `session` (whose graph is `graph`) on `device`."""
    from tracefix.analysis.detectors import HGTDetector
    from tracefix.analysis.pipeline import analyze_document

    model = HGTDetector(epochs=epochs, device=device).fit(graphs)
    per_epoch = statistics.median(h["seconds"] for h in model.history[1:]) if epochs > 1 else model.history[0]["seconds"]
    scores = model.score(graph)
    return {
        "device": device, "model": model, "scores": scores,
        "epoch_s": per_epoch, "loss": model.history[-1]["loss"],
        "score_s": _median_time(_synchronized(lambda: model.score(graph), device), repeats),
        "analysis_s": _median_time(_synchronized(lambda: analyze_document(session, model), device), repeats),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=120, help="training sessions")
    ap.add_argument("--steps", type=int, default=40, help="steps per training session")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--score-steps", type=int, default=1000, help="steps of the session scored")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    import numpy as np
    import torch

    from tracefix.analysis.detectors import HGTDetector
    from tracefix.analysis.graph import build_graph
    from tracefix.analysis.units import build_units

    graphs = [build_graph(build_units(long_session(args.steps, seed=s))) for s in range(args.sessions)]
    session = long_session(args.score_steps, seed=10_000)
    graph = build_graph(build_units(session))
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    print(f"torch {torch.__version__}; devices: cpu" + (f", cuda ({name})" if name else " (no CUDA device here)"))
    print(f"training: {args.sessions} sessions x {args.steps} steps, {args.epochs} epochs; "
          f"scoring: one {args.score_steps}-step session, median of {args.repeats}")
    rows = [measure(d, graphs, session, graph, args.epochs, args.repeats) for d in devices]

    cpu = rows[0]
    print(f"\n{'device':8} {'s/epoch':>9} {'ratio':>7} {'last loss':>10} {'score s':>9} {'ratio':>7} "
          f"{'analysis s':>11} {'ratio':>7}")
    for r in rows:
        print(f"{r['device']:8} {r['epoch_s']:9.3f} {r['epoch_s'] / cpu['epoch_s']:7.2f} {r['loss']:10.4f} "
              f"{r['score_s']:9.3f} {r['score_s'] / cpu['score_s']:7.2f} "
              f"{r['analysis_s']:11.3f} {r['analysis_s'] / cpu['analysis_s']:7.2f}")
    other_seed = HGTDetector(epochs=args.epochs, device="cpu", seed=1).fit(graphs).score(graph)
    print("\nhow alike two models score the session's steps (rank correlation; of the ten most surprising, shared):")
    print(f"  CPU seed 0 vs CPU seed 1   {rank_correlation(cpu['scores'], other_seed):6.3f}   "
          f"{top_shared(cpu['scores'], other_seed)} of 10   (baseline: training noise alone)")
    if len(rows) < 2:
        print("\nno CUDA device: the GPU rows and the device checks need a machine with one")
        return

    gpu = rows[1]
    own = np.asarray(gpu["scores"])
    print(f"  CPU vs GPU, same seed      {rank_correlation(cpu['scores'], own):6.3f}   {top_shared(cpu['scores'], own)} of 10")
    with tempfile.TemporaryDirectory() as tmp:
        on_cpu = HGTDetector.load(gpu["model"].save(Path(tmp)), device="cpu")
    moved = np.asarray(on_cpu.score(graph))
    print(f"\nthe GPU-trained model loaded on the CPU: largest score difference {np.abs(moved - own).max():.2e} "
          f"(scores {own.min():.3f}..{own.max():.3f})")


if __name__ == "__main__":
    main()
