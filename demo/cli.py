"""`tracefix sim` and `tracefix demo-run`."""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import click

from tracefix.collector.cli_options import PORT

from .faults import FaultConfig, FaultPlanError, load_plan
from .scripted import KINDS


def _fault_config(seed: int, faults: str | None, fault_rate: float, fault_kinds: str | None,
                  follow_prob: float, ground_truth: str | None) -> FaultConfig:
    try:
        plan = load_plan(None if faults in (None, "none") else faults)
        kinds = tuple(k.strip() for k in fault_kinds.split(",") if k.strip()) if fault_kinds else KINDS
        return FaultConfig(seed=seed, plan=plan, rate=fault_rate, kinds=kinds, follow_prob=follow_prob,
                           ground_truth=ground_truth)
    except FaultPlanError as exc:
        raise click.BadParameter(str(exc)) from None


_fault_options = [
    click.option("--seed", default=0, show_default=True, type=int, help="Seed of every random choice."),
    click.option("--faults", default=None, metavar="none|PLAN.json",
                 help='Fault plan: JSON list of {"task": "t03"|"*", "step": N, "kind": KIND}.'),
    click.option("--fault-rate", default=0.0, show_default=True, type=click.FloatRange(0, 1),
                 help="Per task, probability of one fault at a hash-chosen eligible step."),
    click.option("--fault-kinds", default=None, metavar="K1,K2", help=f"Kinds --fault-rate may pick: {', '.join(KINDS)}."),
    click.option("--follow-prob", default=0.8, show_default=True, type=click.FloatRange(0, 1),
                 help="Probability that the model reads an edit in its context and acts on what it says "
                      "(drawn per request, seeded)."),
    click.option("--ground-truth", default=None, type=click.Path(dir_okay=False),
                 help="Append every injected fault to this JSONL file (labels; the product never reads it)."),
]


def fault_options(fn):
    for option in reversed(_fault_options):
        fn = option(fn)
    return fn


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8765, show_default=True, type=PORT, help="0 picks a free port.")
@fault_options
@click.option("--latency-ms", default=0.0, show_default=True, type=float, help="Added delay per completion.")
@click.option("--transcripts", is_flag=True, help="Keep every exchange; serve it at GET /_sim/sessions/SESSION.")
@click.option("--plan-fault", "plan_faults", multiple=True, metavar="TOOL.ARG=VALUE",
              help="plan-agent model: send ARG=VALUE (JSON, else text) whenever it calls TOOL, unless an edit in "
                   "its context says otherwise. Repeatable.")
@click.option("--default-model", default=None, metavar="MODEL",
              help="Answer requests for a model the sim does not know (gpt-4o-mini, ...) with this one, e.g. "
                   "plan-agent, so an app runs against the sim unchanged.")
def sim(host, port, seed, faults, fault_rate, fault_kinds, follow_prob, ground_truth, latency_ms, transcripts,
        plan_faults, default_model):
    """Start the scripted OpenAI-compatible LLM server (a test/demo component).

    Prints `tracefix sim: serving on http://HOST:PORT/v1` once it listens. Models:
    bank-agent (plays the banking demo's agents), plan-agent (any agent whose task lists
    its tool plan: `1. tool {"arg": 1}`), plus any registered ones.
    """
    from .plan_agent import parse_fault
    from .sim import SimConfig, SimServer
    from .sim_models import MODELS

    if default_model is not None and default_model not in MODELS:
        raise click.BadParameter(f"unknown model {default_model!r} (known: {', '.join(sorted(MODELS))})",
                                 param_hint="--default-model")

    try:
        parsed_faults = tuple(parse_fault(spec) for spec in plan_faults)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--plan-fault") from None
    config = SimConfig(host=host, port=port, seed=seed, latency_ms=latency_ms, record_transcripts=transcripts,
                       faults=_fault_config(seed, faults, fault_rate, fault_kinds, follow_prob, ground_truth),
                       plan_faults=parsed_faults, default_model=default_model)
    server = SimServer(config)
    base_url = server.start()
    click.echo(f"tracefix sim: serving on {base_url}")
    sys.stdout.flush()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(3600):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def _select_tasks(spec: str, domain: str = "bank") -> list[str]:
    from .domains import domain_of_task, get_domain

    known = list(get_domain(domain).tasks)
    if spec == "all":
        return known
    chosen = [t.strip() for t in spec.split(",") if t.strip()]
    unknown = [t for t in chosen if domain_of_task(t) is not get_domain(domain)]
    if unknown:
        raise click.BadParameter(f"unknown tasks {unknown}; known: {', '.join(known)}, each also as TASK@SEED "
                                 "(its template on seed SEED's world)", param_hint="--tasks")
    return chosen


def _read_ground_truth(path: str | None) -> list[dict]:
    if not path or not Path(path).exists():
        return []
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


DEFAULT_GROUND_TRUTH = "demo-ground-truth.jsonl"  # where a faulty demo-run keeps its labels


@click.command("demo-run")
@click.option("--base-url", default=None, help="An OpenAI-compatible endpoint (e.g. a running `tracefix sim`).")
@click.option("--sim", "use_sim", is_flag=True, help="Start an in-process scripted LLM server (the default "
              "when no --base-url is given).")
@click.option("--domain", default="bank", show_default=True, type=click.Choice(["bank", "warehouse"]),
              help="Which demo app: the banking team (tasks t01..) or the warehouse crew (tickets w01..).")
@click.option("--tasks", "task_spec", default="all", show_default=True, metavar="all|t01,t02",
              help="Which tasks; t03@5 is t03 on seed 5's world (other customers, ids and amounts).")
@fault_options
@click.option("--otlp-endpoint", default=None, help="Trace the runs to this OTLP endpoint "
              "(also on when OTEL_EXPORTER_OTLP_ENDPOINT is set).")
def demo_run(base_url, use_sim, domain, task_spec, seed, faults, fault_rate, fault_kinds, follow_prob, ground_truth,
             otlp_endpoint):
    """Run demo tasks (banking, or --domain warehouse) one after another and report which succeeded.

    Prints one line per task and ends with `succeeded: N/M`; failed tasks are listed with
    the fault the scripted model injected (ground truth), which a run with faults also
    appends to --ground-truth (default ./demo-ground-truth.jsonl).
    """
    from .domains import get_domain

    app_domain = get_domain(domain)
    tasks = _select_tasks(task_spec, domain)
    faulty = faults not in (None, "none") or fault_rate > 0
    if base_url and use_sim:
        raise click.UsageError("give either --base-url or --sim, not both")
    if base_url and faulty:
        raise click.UsageError("fault options configure the in-process sim; with --base-url pass them to "
                               "`tracefix sim` instead")
    if faulty and not ground_truth:
        # The labels are what a faulty run is for (benchmarks score against them): keep them.
        ground_truth = DEFAULT_GROUND_TRUTH
    config = _fault_config(seed, faults, fault_rate, fault_kinds, follow_prob, ground_truth)

    endpoint = otlp_endpoint or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if endpoint:
        import tracefix

        tracefix.init(endpoint=otlp_endpoint, service_name=app_domain.service)  # None: the OTEL_* variables
    app = app_domain.app()  # after init, so the openai client is instrumented
    evaluate, last_database, run_task = app.evaluate, app.last_database, app.run_task
    from .sim import SimConfig, SimServer

    server = None
    if not base_url:
        server = SimServer(SimConfig(seed=seed, faults=config))
        base_url = server.start()
        click.echo(f"tracefix demo-run: scripted LLM server at {base_url}")
    ok, failures, errors = 0, [], 0
    try:
        for task_id in tasks:
            started = time.perf_counter()
            try:
                output = run_task(task_id, base_url=base_url, seed=seed)
            except Exception as exc:  # e.g. the endpoint is unreachable: say so, go on with the next task
                errors += 1
                click.echo(f"{task_id} ERROR   {type(exc).__name__}: {exc}")
                continue
            result = evaluate(task_id, last_database(), output["final_answer"])
            ms = (time.perf_counter() - started) * 1000
            status = "success" if result["success"] else "FAILED "
            ok += result["success"]
            click.echo(f"{task_id} {status} steps={output['llm_calls']:>2} replans={output['replans']} "
                       f"{ms:6.0f} ms  answer: {output['final_answer'][:90]}")
            if not result["success"]:
                failures.append(task_id)
    finally:
        if server is not None:
            injected = list(server.injector.injected)
            server.stop()
        else:
            injected = _read_ground_truth(ground_truth)
    if failures:
        click.echo("failures (ground truth):")
        for task_id in failures:
            labels = [g for g in injected if g["task"] == task_id]
            if labels:
                g = labels[-1]
                click.echo(f"  {task_id}: step {g['step']} {g['agent']} {g['kind']}: {g['detail']}")
            else:
                click.echo(f"  {task_id}: no injected fault on record")
        if ground_truth:
            click.echo(f"ground truth written to {ground_truth}")
    click.echo(f"succeeded: {ok}/{len(tasks)}")
    if errors:
        raise click.ClickException(f"{errors} task(s) could not run (see the ERROR lines above)")
