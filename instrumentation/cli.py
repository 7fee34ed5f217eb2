"""The ``tracefix`` command line: the composition root of every process it starts.

Each verb lives beside the code it drives (``tracefix.demo.cli``, ``tracefix.collector.cli``,
...). This group names them and imports a verb's module only when that verb runs, so
``tracefix --help`` works on the bare package and never imports duckdb or torch.

Parts import only the parts below them (docs/architecture.md). Where a process runs a part
above the one that owns its verb, this module wires it in: `tracefix serve` (the collector)
gets the analysis's diagnosis job and the report renderer as loaders (:func:`serve_pipeline`).
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

import click

from tracefix.errors import TracefixError

# verb -> ("module:attribute", one-line help shown by `tracefix --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "sim": ("tracefix.demo.cli:sim", "Start the scripted OpenAI-compatible LLM server (demo/test component)."),
    "demo-run": ("tracefix.demo.cli:demo_run", "Run demo tasks (the banking team, or --domain warehouse) against the scripted LLM server."),
    "serve": ("tracefix.collector.serve_cli:serve", "Run the collector: OTLP receivers, DuckDB store, API, alerts."),
    "store": ("tracefix.collector.store_cli:store", "Maintain the store: compact a DuckLake's small files."),
    "sessions": ("tracefix.collector.cli:sessions", "List stored sessions."),
    "show": ("tracefix.collector.cli:show", "Show one session's steps."),
    "feedback": ("tracefix.collector.cli:feedback", "Record user feedback on a session (thumbs up/down)."),
    "alerts": ("tracefix.collector.cli:alerts", "List the alerts thumbs-downs raised, with their webhook deliveries."),
    "jobs": ("tracefix.collector.cli:jobs", "List diagnosis and replay jobs and their states."),
    "import": ("tracefix.collector.import_cli:import_", "Import message-log conversations as sessions."),
    "analyze": ("tracefix.analysis.cli:analyze", "Score a session's steps and rank failure hypotheses."),
    "train": ("tracefix.analysis.cli:train", "Train the normal-behaviour HGT on successful sessions (--ranker: the step ranker)."),
    "replay": ("tracefix.replay.cli:replay", "Test failure hypotheses by replaying a session with interventions."),
    "worker": ("tracefix.replay.cli:worker", "Run the replay jobs of a collector beside the agent's own code."),
    "dataset": ("tracefix.collector.dataset_cli:dataset", "Datasets of sessions to run again: add, list, show, export, import (JSONL)."),
    "regress": ("tracefix.replay.regress_cli:regress", "Run dataset items again on the agent code installed now; non-zero exit on a failing item."),
    "report": ("tracefix.report.cli:report", "Write the root-cause report of a session (HTML or Markdown)."),
    "demo": ("tracefix.demo.pipeline:demo", "Run the whole pipeline end to end on the banking demo."),
}


def _loader(target: str) -> Callable[[], Any]:
    """Imports `module:attribute` when called (ImportError when its part is not installed)."""
    def load() -> Any:
        module_name, attr = target.split(":")
        return getattr(importlib.import_module(module_name), attr)
    return load


def serve_pipeline() -> Any:
    """What `tracefix serve` runs above the collector: the diagnosis of a thumbs-down session,
    the report behind its report route and the web UI at `/` (tracefix.collector.pipeline)."""
    from tracefix.collector.pipeline import ServePipeline

    return ServePipeline(diagnosis=_loader("tracefix.analysis.diagnosis:run_diagnosis"),
                         report=_loader("tracefix.report.stored:render_stored_report"),
                         web_ui=_loader("tracefix.ui:with_ui"))


# verb -> what its command receives as its click context object (`click.pass_obj`)
WIRING: dict[str, Callable[[], Any]] = {"serve": serve_pipeline}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        target, _ = COMMANDS[name]
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            extra = module_name.split(".")[1] if module_name.count(".") > 1 else "all"
            raise click.ClickException(
                f"'tracefix {name}' needs extra dependencies ({exc}). "
                f"Install them with: pip install 'tracefix[{extra}]'"
            ) from exc
        return getattr(module, attr)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TracefixError as exc:  # what tracefix refused is said in one line, not as a traceback
            raise click.ClickException(str(exc)) from exc

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in sorted(COMMANDS)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracefix")
@click.pass_context
def main(ctx: click.Context) -> None:
    """tracefix: trace LLM agents, alert on thumbs-down sessions, verify root causes by replay."""
    wire = WIRING.get(ctx.invoked_subcommand or "")
    ctx.obj = wire() if wire else None


if __name__ == "__main__":
    main()
