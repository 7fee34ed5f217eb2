"""`tracefix replay SESSION`: test a session's failure hypotheses by replaying it (DoVer)."""
from __future__ import annotations

import json
import sys
import textwrap

import click

from tracefix.collector.cli_options import db_path, server_option, store_options, token_option
from tracefix.collector.launcher import ProcessDidNotStart, temporary_collector
from tracefix.errors import UnknownSession


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


def _cut(text: str, width: int) -> str:
    """One line of at most `width` characters, a long one cut between words with an ellipsis
    (one long token where the width falls)."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    return textwrap.shorten(text, width, placeholder=" …") if " " in text[:width // 2 + 1] else text[:width - 1] + "…"


def _outcome(run: dict) -> str:
    if run.get("error") and run.get("success") is None:
        return f"error ({_cut(run['error'], 80)})"
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
        lines.append(f"trial {trial['index'] + 1}: steps {trial['start']}-{trial['end']}{plan}"
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


def on_a_collector(server: str | None, db: str | None, run):
    """`run(url)` on the collector the other verbs use (--server, else the default port's), else
    on a temporary one on the store file: replay children export their spans to it."""
    from tracefix.collector.access import collector_url

    url = collector_url(server, db, create=False)
    if url is not None:
        return run(url)
    with temporary_collector(db_path(db)) as url:
        return run(url)


# the product's LLM (analysis.llm.ProductLLM.from_env), for replay's stages and regress's judge
LLM_OPTIONS = [
    click.option("--llm-base-url", default=None, help="OpenAI-compatible endpoint for the LLM stages "
                 "(default TRACEFIX_LLM_BASE_URL; unset: deterministic fallbacks)."),
    click.option("--llm-model", default=None, help="Model for the LLM stages (default TRACEFIX_LLM_MODEL)."),
]


def llm_options(fn):
    """--llm-base-url and --llm-model (LLM_OPTIONS) on a command."""
    for option in reversed(LLM_OPTIONS):
        fn = option(fn)
    return fn


def replay_options(fn):
    """The options of a replay run, shared by `tracefix replay` and `tracefix worker`."""
    options = [
        click.option("--allow-module", "allowed_modules", multiple=True, metavar="PKG",
                     help="A module (package) whose recorded entrypoints may be imported and run here "
                          "(repeatable; PKG allows PKG.sub too) when the app marked them replayable "
                          "(@tracefix.session, tracefix.replayable). Anything else is refused."),
        click.option("--allow-entrypoint", "allowed_entrypoints", multiple=True, metavar="PKG.MOD:FUNCTION",
                     help="An entrypoint that may be imported and run here, marked by the app or not (repeatable)."),
        click.option("--allow-unsigned", is_flag=True,
                     help="Replay sessions whose entrypoint and inputs are not signed with this process's replay "
                          "key (TRACEFIX_REPLAY_KEY, the app's): anyone holding the ingest token can write those."),
        click.option("--runs", default=3, show_default=True, type=click.IntRange(1, 20),
                     help="Replays per intervention."),
        click.option("--concurrency", default=3, show_default=True, type=click.IntRange(1, 32),
                     help="Replays at once (the default runs an intervention's three together)."),
        click.option("--preload/--no-preload", default=True, show_default=True,
                     help="Fork the replays from a process that imported tracefix and the agent's traced "
                          "libraries (openai, its framework) once, instead of starting each cold."),
        click.option("--preload-module", "preload_modules", multiple=True, metavar="PKG.MOD",
                     help="A module of the agent's (within --allow-module) that process imports too, so no replay "
                          "imports it again (repeatable). What the import leaves behind is shared by every replay: "
                          "a module whose import starts a thread or process, opens a socket or calls "
                          "tracefix.init() is refused (found by a trial import), the rest is your call."),
        click.option("--rounds", default=1, show_default=True, type=click.IntRange(1, 10),
                     help="Rounds of interventions; later rounds use the repair memory of earlier ones."),
        click.option("--guard", is_flag=True, help="Guard the live part of each replay (loop / missing-action reminders)."),
        click.option("--allow-live-tools", is_flag=True,
                     help="Run tools live after the intervention even when no snapshot restores their state."),
        click.option("--timeout", default=120.0, show_default=True, help="Seconds before a replay child is killed."),
        click.option("--keep", is_flag=True, help="Keep the replay folders (cassettes, child logs; private, 0700)."),
        *LLM_OPTIONS,
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn



def _confirmed_modules(doc: dict | None, allowed: list[str], entrypoints: list[str]) -> list[str]:
    """`allowed`, plus the session's own module when the person at the terminal confirms it.
    Without a terminal, or without confirmation, an entrypoint outside `allowed` (and not one
    of `entrypoints`) is refused."""
    from tracefix.entrypoints import EntrypointRefused, check, module_of

    entrypoint = (doc or {}).get("entrypoint")
    if not entrypoint:
        return allowed  # diagnose says why the session cannot be replayed
    try:
        check(entrypoint, allowed, entrypoints)
        return allowed
    except EntrypointRefused as refused:
        module = module_of(entrypoint)  # well formed, or check() would have said so first
        if not sys.stdin.isatty():
            raise click.ClickException(f"{refused} (or run this command at a terminal to confirm it)") from None
        if not click.confirm(f"Session {doc['session_id']} was recorded from {entrypoint!r}. Replaying it imports "
                             f"and runs module {module!r} in this environment. Allow it?", default=False):
            raise click.ClickException(str(refused)) from None
        return [*allowed, module]


@click.command("replay")
@click.argument("session_id")
@store_options
@replay_options
@click.option("--per-trial", default=1, show_default=True, type=click.IntRange(1, 5),
              help="Hypotheses tested per failed trial in the first round.")
@click.option("--step", "steps", multiple=True, type=int,
              help="Test a hypothesis at this step instead of attributing (repeatable).")
@click.option("--edit", default=None, metavar="TEXT",
              help="Your own fix to test at the one --step: the text the agent gets there (a correction "
                   "added to its input, or the replacement of an orchestrator instruction).")
@click.option("--input", "inputs", multiple=True, metavar="KEY=VALUE",
              help="Override a recorded entrypoint input (e.g. base_url=http://...).")
@click.option("--json", "as_json", is_flag=True, help="Print the replay result as JSON.")
def replay(session_id, server, db, token, allowed_modules, allowed_entrypoints, allow_unsigned, runs, concurrency,
           preload, preload_modules, rounds, guard, allow_live_tools, timeout, keep, llm_base_url, llm_model, per_trial, steps, edit,
           inputs, as_json):
    """Replay SESSION from each suspected step with an intervention and judge the outcome (DoVer).

    The session's recorded entrypoint is imported and run here, so its module must be
    allowed with --allow-module (or confirmed at the terminal), and the app must have signed
    it: give this command the app's key in TRACEFIX_REPLAY_KEY (or pass --allow-unsigned)."""
    from tracefix.collector.access import AccessError, connect
    from tracefix.entrypoints import EntrypointRefused
    from tracefix.analysis.llm import ProductLLM
    from tracefix.collector.jobs import replay_request
    from tracefix.replay.admission import ReplayError
    from tracefix.replay.pipeline import diagnose, requested_hypotheses
    from tracefix.replay.verdicts import nothing_replayed

    try:
        request = replay_request(list(steps) if steps else None, edit)
    except ValueError as exc:
        raise click.UsageError(str(exc).replace("'steps'", "--step").replace("'edit'", "--edit")) from exc
    llm = ProductLLM.from_env(base_url=llm_base_url, model=llm_model)
    overrides = _parse_overrides(inputs)

    def progress(message: str) -> None:
        if not as_json:
            click.echo(f"... {message}", err=True)

    def run(url: str) -> dict:
        access = connect(server=url, token=token)
        # the entrypoint is a session field: one small page, not the whole session diagnose reads next
        allowed = _confirmed_modules(access.session_page(session_id, 0, 1), list(allowed_modules),
                                     list(allowed_entrypoints))
        return diagnose(access, session_id, allowed_modules=allowed, allowed_entrypoints=list(allowed_entrypoints),
                        allow_unsigned=allow_unsigned, llm=llm or False, runs=runs,
                        concurrency=concurrency, preload=preload, rounds=rounds, guard=guard,
                        allow_live_tools=allow_live_tools, otlp_endpoint=url, overrides=overrides, progress=progress,
                        hypotheses=requested_hypotheses(request), per_trial=per_trial, timeout_s=timeout,
                        keep=keep, preload_modules=list(preload_modules))

    try:
        result = on_a_collector(server, db, run)
    except (AccessError, ProcessDidNotStart, ReplayError, EntrypointRefused, UnknownSession) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps(result, indent=2, default=str) if as_json else render(result))
    unrun = nothing_replayed(result)
    if unrun:  # nothing was tested: a script must not read this as a diagnosis
        raise click.ClickException(unrun)


@click.command("worker")
@server_option(without="the collector on the default port, http://127.0.0.1:4318")
@token_option()
@replay_options
@click.option("--name", default=None, help="This worker's name in the jobs table (default HOST:PID).")
@click.option("--poll", default=1.0, show_default=True, type=click.FloatRange(0.05, 60),
              help="Seconds between looks at an empty queue.")
@click.option("--lease", default=60.0, show_default=True, type=click.FloatRange(5, 3600),
              help="Seconds a claimed job stays this worker's without a renewal (renewed while it runs).")
@click.option("--once", is_flag=True, help="Exit when the queue is empty instead of waiting for more jobs (and exit 1 when the collector cannot be reached instead of waiting for it).")
@click.option("--jobs", "jobs", default="replay", show_default=True, metavar="replay|diagnosis|regress|replay,diagnosis",
              help="The kinds of job this worker claims. Diagnosis jobs (the analysis of a thumbs-down session, then "
                   "its replay job queued under --diagnose full) run no agent code and need no --allow-module; "
                   "`tracefix serve --diagnosis-workers 0` leaves them all to such workers. Regress jobs (`tracefix regress "
                   "--queue`) run dataset items again under the same rules as replays.")
def worker(server, token, allowed_modules, allowed_entrypoints, allow_unsigned, runs, concurrency, preload,
           preload_modules, rounds, guard, allow_live_tools, timeout, keep, llm_base_url, llm_model, name, poll, lease, once, jobs):
    """Run replay (and diagnosis) jobs queued by `tracefix serve`, beside the agent's own code.

    Start it in the agent's image or virtualenv with the agent's modules allowed
    (--allow-module) and the app's replay key in TRACEFIX_REPLAY_KEY; a job whose
    entrypoint lies outside them, was not marked replayable by the app, or whose entrypoint
    and inputs the app did not sign is refused and the reason stored on the job."""
    from tracefix import replay_signing
    from tracefix.collector.access import DEFAULT_SERVER, AccessError, HttpAccess, checked_server
    from tracefix.entrypoints import EntrypointRefused, normalize_allowed, normalize_entrypoints
    from tracefix.analysis.llm import ProductLLM
    from tracefix.replay.preload_modules import app_preloads
    from tracefix.replay.worker import KINDS, Worker

    kinds = tuple(dict.fromkeys(k.strip() for k in jobs.split(",") if k.strip()))
    if not kinds or any(k not in KINDS for k in kinds):
        raise click.BadParameter(f"{jobs!r}: give replay, diagnosis, regress or a list of them (replay,diagnosis)",
                                 param_hint="--jobs")
    allowed = list(normalize_allowed(allowed_modules))
    try:
        entrypoints = list(normalize_entrypoints(allowed_entrypoints))
    except EntrypointRefused as exc:
        raise click.BadParameter(str(exc), param_hint="--allow-entrypoint") from exc
    replay_key = replay_signing.key_from_env()
    try:
        preload_modules = app_preloads(normalize_allowed(preload_modules), allowed)
    except EntrypointRefused as exc:
        raise click.BadParameter(str(exc), param_hint="--preload-module") from exc
    if {"replay", "regress"} & set(kinds):  # both run the agent's code
        if not allowed and not entrypoints:
            raise click.UsageError("give at least one --allow-module PKG or --allow-entrypoint PKG.MOD:FUNCTION: "
                                   "what this worker may replay")
        if replay_key is None and not allow_unsigned:
            raise click.UsageError(f"set {replay_signing.ENV_VAR} to the app's replay key, so this worker replays "
                                   "only sessions the app signed (or pass --allow-unsigned to replay whatever the "
                                   "ingest token's holders send)")
    options = dict(runs=runs, concurrency=concurrency, preload=preload, rounds=rounds, guard=guard,
                   allow_live_tools=allow_live_tools, replay_key=replay_key, allow_unsigned=allow_unsigned,
                   preload_modules=preload_modules, timeout_s=timeout, keep=keep, llm=ProductLLM.from_env(base_url=llm_base_url, model=llm_model) or False)
    try:  # no --server: the collector the other verbs find on the default port (the worker waits for it)
        url = checked_server(server or DEFAULT_SERVER)
    except AccessError as exc:
        raise click.BadParameter(str(exc), param_hint="--server") from exc
    access = HttpAccess(url, token)
    the_worker = Worker(access, allowed, name=name, lease_s=lease, poll_s=poll, replay_options=options, kinds=kinds,
                        allowed_entrypoints=entrypoints)
    try:
        handled = the_worker.run_until_stopped(once=once)
    except AccessError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"tracefix worker: stopped after {handled} job(s)")
