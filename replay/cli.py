"""`tracefix replay SESSION`: test a session's failure hypotheses by replaying it (DoVer)."""
from __future__ import annotations

import json
import os

import click

from tracefix.collector import DEFAULT_DB
from tracefix.collector.launcher import ProcessDidNotStart, temporary_collector


def _parse_overrides(pairs: tuple[str, ...]) -> dict:
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--input")
        key, value = pair.split("=", 1)
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def _outcome(run: dict) -> str:
    if run.get("error") and run.get("success") is None:
        return f"error ({run['error'][:80]})"
    success = {True: "success", False: "failure", None: "unjudged"}[run.get("success")]
    fulfilled = {True: "followed", False: "not followed", None: "follow unknown"}[run.get("fulfilled")]
    progress = "" if run.get("progress") is None else f", progress {run['progress']:+.0%}"
    div = f", diverged at step {run['divergence'].get('step')}" if isinstance(run.get("divergence"), dict) else ""
    return f"{success}, {fulfilled}{progress}{div} [{run.get('wall_s', 0):.1f}s]"


def render(result: dict) -> str:
    lines = [f"session {result['session_id']}: {len(result['trials'])} trial(s), "
             f"{len(result['hypotheses'])} hypothesis(es) tested in {result['rounds']} round(s)"]
    stages = result["stages"]
    lines.append("stages: " + ", ".join(f"{k}={v}" for k, v in stages.items())
                 + ("" if result.get("llm") else "  (no LLM configured: deterministic fallbacks)"))
    if result.get("llm"):
        llm = result["llm"]
        lines.append(f"LLM: {llm['model']} at {llm['base_url']}, {llm['requests']} request(s)")
    for trial in result["trials"]:
        lines.append("")
        plan = f", plan at step {trial['plan_step']}" if trial.get("plan_step") is not None else ""
        lines.append(f"trial {trial['index']}: steps {trial['start']}-{trial['end']}{plan}"
                     f"{' (failed)' if trial.get('failed') else ''}")
        for h in [h for h in result["hypotheses"] if h.get("trial") == trial["index"]]:
            lines += _render_hypothesis(h)
    orphans = [h for h in result["hypotheses"] if h.get("trial") not in {t["index"] for t in result["trials"]}]
    for h in orphans:
        lines += _render_hypothesis(h)
    for note in result.get("notes") or []:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def _render_hypothesis(h: dict) -> list[str]:
    iv = h["intervention"]
    out = [f"  hypothesis (round {h['round']}, {h['source']}): step {h['step']} {h.get('agent') or ''}: {h.get('reason') or ''}",
           f"  intervention ({iv['kind']}/{iv['category']}, {iv.get('source')}): {iv['text']}"]
    for i, run in enumerate(h.get("runs") or [], 1):
        out.append(f"    run {i}: {_outcome(run)}")
    out.append(f"  verdict: {h['verdict'].upper()} ({h['verdict_reason']})")
    return out


@click.command("replay")
@click.argument("session_id")
@click.option("--server", envvar="TRACEFIX_SERVER", help="URL of a running `tracefix serve` (else --db).")
@click.option("--db", envvar="TRACEFIX_DB", default=None, help=f"Store file when no server runs (default {DEFAULT_DB}).")
@click.option("--token", envvar="TRACEFIX_TOKEN", default=None, help="Bearer token of the server.")
@click.option("--runs", default=3, show_default=True, type=click.IntRange(1, 20), help="Replays per intervention.")
@click.option("--concurrency", default=2, show_default=True, type=click.IntRange(1, 32), help="Replays at once.")
@click.option("--rounds", default=1, show_default=True, type=click.IntRange(1, 10),
              help="Rounds of interventions; later rounds use the repair memory of earlier ones.")
@click.option("--per-trial", default=1, show_default=True, type=click.IntRange(1, 5),
              help="Hypotheses tested per failed trial in the first round.")
@click.option("--step", "steps", multiple=True, type=int,
              help="Test a hypothesis at this step instead of attributing (repeatable).")
@click.option("--guard", is_flag=True, help="Guard the live part of each replay (loop / missing-action reminders).")
@click.option("--allow-live-tools", is_flag=True,
              help="Run tools live after the intervention even when no snapshot restores their state.")
@click.option("--input", "inputs", multiple=True, metavar="KEY=VALUE",
              help="Override a recorded entrypoint input (e.g. base_url=http://...).")
@click.option("--timeout", default=120.0, show_default=True, help="Seconds before a replay child is killed.")
@click.option("--llm-base-url", default=None, help="OpenAI-compatible endpoint for the LLM stages "
              "(default TRACEFIX_LLM_BASE_URL; unset: deterministic fallbacks).")
@click.option("--llm-model", default=None, help="Model for the LLM stages (default TRACEFIX_LLM_MODEL).")
@click.option("--json", "as_json", is_flag=True, help="Print the replay result as JSON.")
def replay(session_id, server, db, token, runs, concurrency, rounds, per_trial, steps, guard, allow_live_tools,
           inputs, timeout, llm_base_url, llm_model, as_json):
    """Replay SESSION from each suspected step with an intervention and judge the outcome (DoVer)."""
    from tracefix.collector.access import connect
    from tracefix.replay.llm import ProductLLM
    from tracefix.replay.pipeline import ReplayError, diagnose

    llm = ProductLLM.from_env(base_url=llm_base_url, model=llm_model)
    overrides = _parse_overrides(inputs)

    def progress(message: str) -> None:
        if not as_json:
            click.echo(f"... {message}", err=True)

    def run(url: str) -> dict:
        access = connect(server=url, token=token)
        return diagnose(access, session_id, llm=llm or False, runs=runs, concurrency=concurrency, rounds=rounds,
                        guard=guard, allow_live_tools=allow_live_tools, otlp_endpoint=url, overrides=overrides,
                        progress=progress, hypotheses=[{"step": s} for s in steps] or None, per_trial=per_trial,
                        timeout_s=timeout)

    try:
        if server:
            result = run(server.rstrip("/"))
        else:
            path = db or DEFAULT_DB
            if not os.path.exists(path):
                raise click.ClickException(f"no store at {path}: pass --server URL or --db PATH")
            with temporary_collector(path) as url:
                result = run(url)
    except ProcessDidNotStart as exc:
        raise click.ClickException(str(exc)) from exc
    except ReplayError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps(result, indent=2, default=str) if as_json else render(result))
