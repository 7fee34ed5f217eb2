"""Report rendering time vs session length: 50, 200, 1000 steps, HTML and Markdown.

    .venv/bin/python bench/report_render.py [--sizes 50,200,1000] [--repeats 3]

The sessions are bench/analysis_latency.py's long banking-style runs, analyzed for real
(run-local detector, no model) so the graph, scores and hypotheses have the shapes the
report draws. Each render is timed whole, and its two pictures alone, side by side in one
run. Prints medians, the per-step cost and growth ratios against the smallest size
(linear growth = ratio equal to the size ratio). The collector renders on request
(`GET /api/v1/sessions/{id}/report`), so the figure to watch is the 1000-step HTML.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from analysis_latency import long_session  # noqa: E402  (the same sessions as the analysis bench)


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    from tracefix.analysis.pipeline import analyze_document
    from tracefix.report.render import render_html, render_markdown, report_images

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,200,1000")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    render_html(long_session(10, seed=1), analyze_document(long_session(10, seed=1), None, llm=None))  # warm up
    rows = []
    for n in sizes:
        doc = long_session(n, seed=n)
        analysis = analyze_document(doc, None, llm=None)
        html_s = median_time(lambda: render_html(doc, analysis), args.repeats)
        md_s = median_time(lambda: render_markdown(doc, analysis), args.repeats)
        images_s = median_time(lambda: report_images(analysis), args.repeats)
        size_kb = len(render_html(doc, analysis).encode()) / 1024
        rows.append((n, html_s, md_s, images_s, size_kb))

    base_n, base_html = rows[0][0], rows[0][1]
    print(f"{'steps':>6} {'html s':>8} {'md s':>8} {'images s':>9} {'images %':>9} {'ms/step':>8} "
          f"{'html KB':>8} {'size ratio':>10} {'time ratio':>10}")
    for n, html_s, md_s, images_s, size_kb in rows:
        print(f"{n:>6} {html_s:>8.3f} {md_s:>8.3f} {images_s:>9.3f} {100 * images_s / html_s:>8.0f}% "
              f"{1000 * html_s / n:>8.2f} {size_kb:>8.0f} {n / base_n:>10.1f} {html_s / base_html:>10.2f}")


if __name__ == "__main__":
    main()
