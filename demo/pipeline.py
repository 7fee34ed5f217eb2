"""`tracefix demo`: the whole product, end to end, on the bundled banking testbed.

    tracefix demo [--tasks N] [--fault-rate R] [--seed S] [--out DIR] [--keep]

While it runs, the collector's web UI is at the printed `web UI:` address; with `--keep`
from a terminal the demo keeps serving it (and the store) until Ctrl-C.

1. starts a local webhook receiver, the scripted LLM server (`tracefix sim`, with a fault
   plan that makes a few tasks fail through different kinds of faults), `tracefix serve`
   on a temporary store, each on a free loopback port, and a `tracefix worker`; the app and
   the worker share a fresh replay key (the app signs what it records, the worker replays
   only that), which the collector never gets;
2. runs N banking tasks under tracefix's instrumentation, exporting OTLP to the collector;
3. trains the normal-behaviour model (HGT) on the sessions that succeeded;
4. sends a thumbs-down on each failed session, which raises an alert (received by the
   local webhook) and queues a diagnosis job: `tracefix serve` analyzes the session and
   queues its replay, which a `tracefix worker` (allowed to run the demo's modules only)
   claims and runs;
5. waits for the jobs, writes one HTML report per failed session and an index page, and
   prints a summary table beside the injected faults.
6. with `--regress`, runs `tracefix regress` on the failed sessions (each a dataset item
   since its thumbs-down) with the team's version 2 and, as a control, version 1
   (:mod:`tracefix.demo.regress_stage`).

The injected fault of each session comes from the sim's ground-truth file: the demo reads
it to show how the diagnosis compares with the truth; the product itself never does. The
command exits non-zero when any stage failed, and stops every process it started on the
way out, Ctrl-C included.

This module is the command (its options, the stages in order, the summary, the exit code);
the stages are :mod:`tracefix.demo.stages`, the fault plan and ground truth
:mod:`tracefix.demo.fault_plan`, the webhook receiver :mod:`tracefix.demo.webhook`.
"""
from __future__ import annotations

import shutil
import signal
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import click
from rich.markup import escape

from tracefix.collector.launcher import ProcessDidNotStart

from .regress_stage import regress_stage, regress_table
from .stages import Demo, FailedSession, StageFailed


def summary_table(failed: list[FailedSession]):
    from rich.table import Table

    table = Table(title="failed sessions", title_justify="left")
    for col in ("session", "task", "injected fault (step)", "top hypothesis", "in top 3", "best verdict"):
        table.add_column(col, overflow="fold")
    for f in failed:
        best = f.best
        fault = f.fault
        verdict = (f"{best.get('verdict')} @ {best.get('step')}" if best else "—")
        table.add_row(f.session_id[:12], f.task_id,
                      f"{fault['kind']} ({fault['step']})" if fault else "—",
                      "—" if f.top_step is None else str(f.top_step),
                      ("yes" if fault and fault["step"] in f.top3 else "no") if fault else "—",
                      verdict + (" [red](problem)[/]" if f.problems else ""))
    return table


def web_ui_line(url: str, serving: bool) -> str:
    """The summary's line on the web UI: a link to follow only while something answers it (the
    collector stops with the demo unless it is kept serving)."""
    if serving:
        return f"web UI: {url}/ (serving until Ctrl-C)"
    return (f"web UI: stopped with the demo (it answered at {url}/ while the demo ran; "
            "--keep from a terminal keeps it serving)")


def serve_until_interrupted(console) -> None:
    """Keep the demo's processes (the collector and its web UI) running until Ctrl-C."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also where a launcher left SIGINT ignored
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        console.print("stopping the demo's processes")


@click.command()
@click.option("--tasks", "n_tasks", default=10, show_default=True, type=click.IntRange(1, 22),
              help="How many banking tasks to run (t01..tN).")
@click.option("--fault-rate", default=0.3, show_default=True, type=click.FloatRange(0.0, 1.0),
              help="Share of the tasks that get one injected fault (at least one when positive).")
@click.option("--seed", default=7, show_default=True, type=int, help="Seed of the testbed and the fault plan.")
@click.option("--out", default="tracefix-demo", show_default=True, type=click.Path(file_okay=False),
              help="Folder for the reports and index.html.")
@click.option("--keep", is_flag=True, help="Keep the store, model and process logs (under OUT/work) instead of "
              "a temporary folder that is removed at the end; run from a terminal, also keep serving the "
              "web UI until Ctrl-C.")
@click.option("--epochs", default=30, show_default=True, type=click.IntRange(1, 500),
              help="Training epochs of the HGT model.")
@click.option("--llm", type=click.Choice(["env", "none", "sim"]), default="env", show_default=True,
              help="LLM for tracefix's own stages: env = TRACEFIX_LLM_* if set (else the deterministic "
                   "fallbacks), none = fallbacks only, sim = the scripted server's sim-analyst model.")
@click.option("--follow-prob", default=0.8, show_default=True, type=click.FloatRange(0, 1),
              help="Probability that the scripted model follows a correction (testbed setting).")
@click.option("--time-limit", default=540, show_default=True, type=float, help="Seconds before the demo gives up.")
@click.option("--regress", "regress", is_flag=True,
              help="Then run `tracefix regress` on the failed sessions with the team's version 2 (it re-asks for a "
                   "tool call's missing argument), and as a control on version 1: missing-argument failures must "
                   "come out fixed, the others still failing, none fixed on version 1.")
def demo(n_tasks, fault_rate, seed, out, keep, epochs, llm, follow_prob, time_limit, regress):
    """Run the whole pipeline end to end on the banking demo.

    Starts the scripted LLM server and `tracefix serve`, runs the banking tasks traced
    (some fail through injected faults), trains the model on the successful ones, sends a
    thumbs-down on each failure, waits for the alerts and the diagnoses (analysis, then
    replay), writes a report per failed session and an index, and prints a summary table.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    # Wide enough for the summary table when the output is a pipe or a CI log.
    console = Console(width=None if sys.stdout.isatty() else 120)
    out_dir = Path(out).resolve()
    work = out_dir / "work" if keep else Path(tempfile.mkdtemp(prefix="tracefix-demo-"))
    if keep and work.exists():
        shutil.rmtree(work)  # a fresh store each run: old sessions would skew training
    work.mkdir(parents=True, exist_ok=True)
    tasks = [f"t{i:02d}" for i in range(1, n_tasks + 1)]

    def on_term(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    started = time.monotonic()
    code = 0
    demo_run = None
    try:
        with ExitStack() as stack:
            with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                          MofNCompleteColumn(), TimeElapsedColumn(), console=console) as progress:
                demo_run = Demo(progress, tasks=tasks, fault_rate=fault_rate, seed=seed, out=out_dir, work=work,
                                epochs=epochs, llm=llm, follow_prob=follow_prob, deadline_s=time_limit)
                demo_run.start(stack)
                demo_run.run_tasks()
                if demo_run.failed:
                    demo_run.train()
                    demo_run.thumbs_down()
                    demo_run.wait_for_diagnosis()
                    if regress:
                        regress_stage(demo_run)
                else:
                    demo_run.say("no session failed (--fault-rate 0): nothing to diagnose")
                index = demo_run.write_reports()
            console.print(summary_table(demo_run.failed))
            if regress and demo_run.failed:
                console.print(regress_table(demo_run))
            validated = sum(1 for f in demo_run.failed if f.best and f.best.get("verdict") == "validated")
            hits = sum(1 for f in demo_run.failed if f.fault and f.fault["step"] in f.top3)
            console.print(f"injected fault step in the top 3 hypotheses: {hits}/{len(demo_run.failed)}; "
                          f"sessions with a validated fix: {validated}/{len(demo_run.failed)}")
            problems = demo_run.problems + [f"{f.session_id}: {p}" for f in demo_run.failed for p in f.problems]
            for p in problems:
                console.print(f"[red]problem:[/] {escape(p)}")
            code = 1 if problems else 0
            console.print(f"reports: {index}")
            serving = keep and sys.stdin.isatty()  # someone is there to look, and to press Ctrl-C
            console.print(web_ui_line(demo_run.serve_url, serving))
            console.print(f"demo finished in {time.monotonic() - started:.0f} s"
                          + (f"; store and logs kept in {work}" if keep else ""))
            if serving:
                serve_until_interrupted(console)
    except (StageFailed, ProcessDidNotStart) as exc:
        console.print(f"[red]demo failed:[/] {escape(str(exc))}")
        code = 1
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: stopping the demo's processes[/]")
        code = 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        if demo_run is not None and demo_run.handle is not None:
            demo_run.handle.shutdown(timeout_millis=2000)
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(code)
