"""`tracefix regress`: run dataset items again on the agent code installed here, print a
table (before → after k/N, verdict), write JUnit XML for CI, and exit 1 when an item is
still or newly failing (2 when one could not be checked: refused, or no run got an outcome).
Runs of an app without an evaluator are scored by the replay's LLM judge when an LLM is
configured (--llm-base-url, TRACEFIX_LLM_BASE_URL), and the table says so.

The runs go in this process's children (`tracefix.replay.regress`), or, with `--queue`, to
the collector's queue as `regress` jobs that `tracefix worker --jobs regress` runs; this
command then waits for their results. Either way each item's result is stored under the
run's id (`GET /api/v1/regress?run_id=...`, the web UI's `/regress?run=...`)."""
from __future__ import annotations

import json
import time

import click

from tracefix.collector.cli_options import store_options
from tracefix.collector.launcher import ProcessDidNotStart
from tracefix.replay.cli import _parse_overrides, llm_options, on_a_collector
from tracefix.replay.regress import TOOL_MODES, RegressOptions


def select_items(access, dataset, service, since, kind, session_ids) -> list[dict]:
    """The items to run, whole: of `dataset` (else of every dataset, each session once), by the filters."""
    items = access.dataset_items(dataset, full=True, service=service, since=since, kind=kind,
                                 session_ids=list(session_ids) or None)
    return list({item["session_id"]: item for item in reversed(items)}.values())[::-1]


def _wait_for_queued(access, run_id: str, expected: int, timeout_s: float, progress) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        results = access.regress_results(run_id)
        progress(len(results), expected)
        if len(results) >= expected or time.monotonic() > deadline:
            return results
        time.sleep(0.5)


@click.command("regress")
@store_options
@click.argument("session_ids", nargs=-1)
@click.option("--dataset", default=None, help="Run this dataset's items (default: every dataset's).")
@click.option("--service", default=None, help="Only items of this service.")
@click.option("--since", default=None, help="Only items whose session started since (ISO-8601 or epoch seconds).")
@click.option("--kind", type=click.Choice(("thumbs-down", "added", "imported")), default=None,
              help="Only items that came in this way.")
@click.option("--runs", default=3, show_default=True, type=click.IntRange(1, 20), help="Runs per item.")
@click.option("--tools", type=click.Choice(TOOL_MODES), default="recorded", show_default=True,
              help="recorded: a tool call gets its recorded result when the same call (tool, arguments) was "
                   "recorded, else runs live; live: every call runs live (needs a snapshot of the state the "
                   "tools change, or --allow-live-tools).")
@click.option("--allow-module", "allowed_modules", multiple=True, metavar="PKG",
              help="A module whose recorded entrypoints may run here when the app marked them replayable (repeatable).")
@click.option("--allow-entrypoint", "allowed_entrypoints", multiple=True, metavar="PKG.MOD:FUNCTION",
              help="An entrypoint that may run here, marked by the app or not (repeatable).")
@click.option("--allow-unsigned", is_flag=True,
              help="Run items whose entrypoint and inputs the app did not sign with TRACEFIX_REPLAY_KEY.")
@click.option("--allow-live-tools", is_flag=True, help="Run tools live even where no snapshot restores their state.")
@click.option("--concurrency", default=3, show_default=True, type=click.IntRange(1, 32), help="Runs at once.")
@click.option("--preload/--no-preload", default=True, show_default=True,
              help="Fork the runs from a process that imported the agent's traced libraries once.")
@click.option("--timeout", default=120.0, show_default=True, help="Seconds before a run is killed.")
@click.option("--input", "inputs", multiple=True, metavar="KEY=VALUE",
              help="Override a recorded entrypoint input in every run (e.g. base_url=http://...).")
@click.option("--junit", "junit", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write JUnit XML here (a test case per item).")
@click.option("--queue", is_flag=True, help="Queue the items as regress jobs for `tracefix worker --jobs regress` "
                                            "and wait for their results instead of running them here.")
@click.option("--wait", "wait_s", default=1800.0, show_default=True, help="With --queue: seconds to wait.")
@click.option("--keep", is_flag=True, help="Keep the runs' folders (private, 0700).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of the table.")
@llm_options
def regress(server, db, token, session_ids, dataset, service, since, kind, runs, tools, allowed_modules,
            allowed_entrypoints, allow_unsigned, allow_live_tools, concurrency, preload, timeout, inputs, junit,
            queue, wait_s, keep, as_json, llm_base_url, llm_model):
    """Run dataset items (all, --dataset, the filters, or the SESSION ids given) again on the agent
    code installed here, --runs times each, with the LLM live; compare with how they went.

    Exit status: 0 when nothing fails, 1 when an item is still or newly failing, 2 when an
    item could not be checked (refused: not allowed here or not signed; or no run ended)."""
    from tracefix import replay_signing
    from tracefix.analysis.llm import ProductLLM
    from tracefix.collector.access import AccessError, connect
    from tracefix.entrypoints import EntrypointRefused, normalize_allowed, normalize_entrypoints
    from tracefix.replay import regress as regressing
    from tracefix.replay import regress_report

    try:
        entrypoints = list(normalize_entrypoints(allowed_entrypoints))
    except EntrypointRefused as exc:
        raise click.BadParameter(str(exc), param_hint="--allow-entrypoint") from exc
    options = RegressOptions(allowed_modules=list(normalize_allowed(allowed_modules)), allowed_entrypoints=entrypoints,
                             runs=runs, tools=tools, allow_live_tools=allow_live_tools,
                             replay_key=replay_signing.key_from_env(), allow_unsigned=allow_unsigned,
                             concurrency=concurrency, preload=preload, timeout_s=timeout,
                             overrides=_parse_overrides(inputs), keep=keep)
    llm = ProductLLM.from_env(base_url=llm_base_url, model=llm_model)  # judges runs without an evaluator
    progress = regress_report.progress_bar()
    run_id = regressing.new_run_id()

    def run(url: str) -> list[dict]:
        access = connect(server=url, token=token)
        items = select_items(access, dataset, service, since, kind, session_ids)
        if not items:
            raise click.ClickException("no dataset items to run (a thumbs-down adds one; so does "
                                       "`tracefix dataset add SESSION`)")
        click.echo(f"tracefix regress {run_id}: {len(items)} item(s), {runs} run(s) each, tools {tools}"
                   + (f"; runs without an evaluator scored by the LLM judge ({llm.model} at {llm.base_url})"
                      if llm is not None and not queue else ""), err=True)
        if queue:
            access.queue_regress(run_id, [(i["dataset"], i["session_id"]) for i in items],
                                 {"runs": runs, "tools": tools})
            results = _wait_for_queued(access, run_id, len(items), wait_s, progress)
            return sorted(results, key=lambda r: [i["session_id"] for i in items].index(r["session_id"]))
        options.otlp_endpoint = url
        options.otlp_headers = {"authorization": f"Bearer {token}"} if token else None
        results = regressing.regress(items, options, run_id=run_id, progress=progress, access=access, llm=llm)
        for result in results:
            access.save_regress_result(run_id, result["session_id"], result)
        return results

    try:
        results = on_a_collector(server, db, run)
    except (AccessError, ProcessDidNotStart, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps(results, indent=2, default=str) if as_json else regress_report.table(results))
    if junit:
        with open(junit, "w", encoding="utf-8") as f:
            f.write(regress_report.junit_xml(results, run_id))
    click.get_current_context().exit(regressing.exit_code(results))
