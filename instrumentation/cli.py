"""The ``tracefix`` command line.

Each verb lives beside the code it drives (``tracefix.demo.cli``, ``tracefix.collector.cli``,
...). This group names them and imports a verb's module only when that verb runs, so
``tracefix --help`` works on the bare package and never imports duckdb or torch.
"""
from __future__ import annotations

import importlib

import click

# verb -> ("module:attribute", one-line help shown by `tracefix --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "sim": ("tracefix.demo.cli:sim", "Start the scripted OpenAI-compatible LLM server (demo/test component)."),
    "demo-run": ("tracefix.demo.cli:demo_run", "Run banking demo tasks against the scripted LLM server."),
    "serve": ("tracefix.collector.cli:serve", "Run the collector: OTLP receivers, DuckDB store, API, alerts."),
    "store": ("tracefix.collector.store_cli:store", "Maintain the store: compact a DuckLake's small files."),
    "sessions": ("tracefix.collector.cli:sessions", "List stored sessions."),
    "show": ("tracefix.collector.cli:show", "Show one session's steps."),
    "feedback": ("tracefix.collector.cli:feedback", "Record user feedback on a session (thumbs up/down)."),
    "import": ("tracefix.analysis.cli:import_", "Import message-log conversations as sessions."),
    "analyze": ("tracefix.analysis.cli:analyze", "Score a session's steps and rank failure hypotheses."),
    "train": ("tracefix.analysis.cli:train", "Train the normal-behaviour HGT model on successful sessions."),
    "replay": ("tracefix.replay.cli:replay", "Test failure hypotheses by replaying a session with interventions."),
    "worker": ("tracefix.replay.cli:worker", "Run the replay jobs of a collector beside the agent's own code."),
    "report": ("tracefix.analysis.report_cli:report", "Write the root-cause report of a session (HTML or Markdown)."),
    "demo": ("tracefix.demo.pipeline:demo", "Run the whole pipeline end to end on the banking demo."),
}


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

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in sorted(COMMANDS)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracefix")
def main() -> None:
    """tracefix: trace LLM agents, alert on thumbs-down sessions, verify root causes by replay."""


if __name__ == "__main__":
    main()
