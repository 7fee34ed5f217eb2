"""CLI verbs that read and write the stored sessions: `tracefix sessions`, `show`, `jobs`,
`alerts` and `feedback` (`serve` is tracefix.collector.serve_cli, `import`
tracefix.collector.import_cli).

They go through `tracefix.collector.access.connect`: a running collector's API when one
answers, else the DuckDB file.
"""
from __future__ import annotations

import json
from typing import Any, Callable

import click

from tracefix.collector import document
from tracefix.collector.access import AccessError, connect
from tracefix.collector.cli_options import store_options
from tracefix.collector.jobs import JOB_KINDS, JOB_STATES
from tracefix.collector.session_list import DIAGNOSIS_STATES, SESSION_SORTS


def _store_options(fn):
    fn = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(fn)
    return store_options(fn)


def _connect(db, server, token):
    try:
        return connect(server=server, db=db, token=token, create=False)  # a reading verb makes no store
    except AccessError as exc:
        raise click.ClickException(str(exc)) from exc


def _fmt_score(v):
    return "" if v is None else f"{v:g}"


@click.command()
@_store_options
@click.option("--feedback", type=click.Choice(["negative", "positive", "any"]), default=None)
@click.option("--outcome", type=click.Choice(["success", "failure"]), default=None)
@click.option("--service", default=None)
@click.option("--agent", default=None)
@click.option("--since", default=None, help="ISO-8601 time (or epoch seconds).")
@click.option("--until", default=None)
@click.option("--model", default=None, help="Sessions with an LLM call to this model.")
@click.option("--task", default=None, help="Sessions whose task holds this text (any case).")
@click.option("--diagnosis", type=click.Choice(DIAGNOSIS_STATES), default=None, help="Sessions in this diagnosis state.")
@click.option("--min-cost", type=click.FloatRange(min=0), default=None, help="USD the LLM calls cost at least.")
@click.option("--max-cost", type=click.FloatRange(min=0), default=None, help="USD the LLM calls cost at most.")
@click.option("--sort", type=click.Choice(SESSION_SORTS), default="time", show_default=True,
              help="Sessions without the value come last.")
@click.option("--asc", "ascending", is_flag=True, help="Smallest first (default: largest, newest first).")
@click.option("--limit", default=50, show_default=True, type=int)
@click.option("--offset", default=0, type=int)
def sessions(db, server, token, as_json, feedback, outcome, service, agent, since, until, model, task, diagnosis,
             min_cost, max_cost, sort, ascending, limit, offset):
    """List stored sessions, newest first (or as --sort says)."""
    def line(r: dict) -> str:
        task = (r.get("task") or "").replace("\n", " ")[:60]
        return (f"{r['session_id'][:38]:<38} {(r['started_at'] or '')[:19]:<20} {r['steps']:>5} "
                f"{(r['outcome'] or '-'):<8} {_fmt_score(r['feedback_score']):>8} "
                f"{document.usd_text(r.get('cost_usd')):>10}  {task}")

    _print_listing(db, server, token, as_json, lambda store: store.list_sessions(
        feedback=feedback, outcome=outcome, service=service, agent=agent, since=since, until=until, limit=limit,
        offset=offset, sort=sort, descending=not ascending, model=model, task=task, diagnosis=diagnosis,
        min_cost=min_cost, max_cost=max_cost), "no sessions", f"{'SESSION':<38} {'STARTED':<20} {'STEPS':>5} {'OUTCOME':<8} {'FEEDBACK':>8} {'COST':>10}  TASK",
        line)


def _print_listing(db, server, token, as_json: bool, read: Callable[[Any], list[dict]], nothing: str, header: str,
                   line: Callable[[dict], str]) -> None:
    """What a listing verb prints: `read(store)`'s rows as JSON, or as a table under `header`."""
    with _connect(db, server, token) as store:
        try:
            rows = read(store)
        except (AccessError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    elif not rows:
        click.echo(nothing)
    else:
        click.echo(header)
        for row in rows:
            click.echo(line(row))


@click.command()
@_store_options
@click.option("--state", type=click.Choice(JOB_STATES), default=None)
@click.option("--kind", type=click.Choice(JOB_KINDS), default=None)
@click.option("--session", "session_id", default=None, help="Only this session's jobs.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100_000))
def jobs(db, server, token, as_json, state, kind, session_id, limit):
    """List diagnosis and replay jobs, newest first."""
    def line(r: dict) -> str:
        return (f"{r['job_id']:<22} {r['session_id'][:34]:<34} {r['kind']:<9} {r['state']:<8} "
                f"{(r['created_at'] or '')[:19]:<20} {(r['worker'] or '-')[:16]:<16} {_short(r['error'] or '', 80)}")

    _print_listing(db, server, token, as_json, lambda store: store.list_jobs(state, session_id, kind, newest=limit),
                   "no jobs", f"{'JOB':<22} {'SESSION':<34} {'KIND':<9} {'STATE':<8} {'CREATED':<20} {'WORKER':<16} ERROR",
                   line)


@click.command()
@_store_options
@click.option("--session", "session_id", default=None, help="Only this session's alerts.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100_000))
def alerts(db, server, token, as_json, session_id, limit):
    """List the alerts thumbs-downs raised and how their webhook deliveries went, newest first."""
    def line(r: dict) -> str:
        payload = r["payload"] if isinstance(r["payload"], dict) else {}
        states: dict[str, int] = {}
        for d in r["deliveries"]:
            states[d["state"]] = states.get(d["state"], 0) + 1
        deliveries = ", ".join(f"{n} {state}" for state, n in sorted(states.items())) or "no webhook"
        return (f"{r['alert_id']:<20} {r['session_id'][:34]:<34} {(r['created_at'] or '')[:19]:<20} "
                f"{_fmt_score(payload.get('score')):>5}  {deliveries:<24} {_short(payload.get('comment') or '', 60)}")

    _print_listing(db, server, token, as_json, lambda store: store.list_alerts(session_id, newest=limit), "no alerts",
                   f"{'ALERT':<20} {'SESSION':<34} {'CREATED':<20} {'SCORE':>5}  {'DELIVERIES':<24} COMMENT", line)


def _short(value, n=160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = (text or "").replace("\n", " ")
    return text if len(text) <= n else text[: n - 1] + "…"


# `show` reads a session page by page: a session of any size prints in bounded memory.
SHOW_PAGE_STEPS = 100
SHOW_MAX_CHARS = 400


@click.command()
@_store_options
@click.argument("session_id")
@click.option("--spans", is_flag=True, help="Show the raw spans instead of the steps.")
def show(db, server, token, as_json, session_id, spans):
    """Show one session's steps (or its spans); --json prints the whole document."""
    with _connect(db, server, token) as store:
        try:
            if as_json or spans:
                doc = store.get_session(session_id)
                if doc is None:
                    raise click.ClickException(f"unknown session {session_id!r}")
                if spans:
                    raw = store.get_spans(session_id)
                    if as_json:
                        click.echo(json.dumps(raw, indent=2, ensure_ascii=False))
                    for s in raw if not as_json else []:
                        click.echo(f"{s['start_time']}  {s['kind']:<8} {s['name']}  ({s['duration_ms']} ms)")
                else:
                    click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
                return
            _show_pages(store, session_id)
        except AccessError as exc:
            raise click.ClickException(str(exc)) from exc


def _show_pages(store, session_id: str) -> None:
    doc = store.session_page(session_id, 0, SHOW_PAGE_STEPS, SHOW_MAX_CHARS)
    if doc is None:
        raise click.ClickException(f"unknown session {session_id!r}")
    click.echo(f"session {doc['session_id']}  service={doc['service']}  outcome={doc['outcome']}  "
               f"score={doc['score']}  replayable={doc['replayable']}")
    if doc.get("task"):
        click.echo(f"task: {_short(doc['task'], 200)}")
    click.echo(f"agents: {', '.join(doc['agents'])}  tokens: {doc['tokens']['input']} in / {doc['tokens']['output']} out")
    page = doc
    while True:
        for st in page["steps"]:
            out = st.get("output_message") or {}
            click.echo(f"[Step {st['index']}] {st['agent'] or '-'} ({st['kind']}, {st['model'] or '-'})"
                       + (f"  ERROR {st['error']}" if st.get("error") else ""))
            if out.get("content"):
                click.echo(f"    says: {_short(out['content'])}")
            for tc in st["tool_calls"]:
                click.echo(f"    tool {tc['name']}({_short(tc['arguments'], 80)}) -> "
                           f"{_short(tc['error'] or tc['result'], 80)}")
            if st.get("snapshots"):
                click.echo(f"    snapshots: {', '.join(st['snapshots'])}")
        offset = page["page"]["next_offset"]
        if offset is None:
            break
        page = store.session_page(session_id, offset, SHOW_PAGE_STEPS, SHOW_MAX_CHARS)
        if page is None:
            break
    for fb in doc["feedback"]:
        click.echo(f"feedback {fb['score']:g} at {fb['created_at']}: {fb.get('comment') or ''}")
    if doc.get("replayable_reason"):
        click.echo(f"not replayable as is: {doc['replayable_reason']}")
    if doc.get("output") is not None:
        click.echo(f"output: {_short(doc['output'], 300)}")


@click.command()
@_store_options
@click.argument("session_id")
@click.option("--down", "direction", flag_value="down", help="Thumbs down (score -1).")
@click.option("--up", "direction", flag_value="up", help="Thumbs up (score 1).")
@click.option("--score", type=float, default=None, help="An explicit score instead of --up/--down.")
@click.option("--comment", default=None)
def feedback(db, server, token, as_json, session_id, direction, score, comment):
    """Record feedback on a session; a thumbs-down raises an alert and queues a diagnosis."""
    if score is None:
        if direction is None:
            raise click.UsageError("give --down, --up or --score")
        score = -1.0 if direction == "down" else 1.0
    with _connect(db, server, token) as store:
        try:
            fb = store.add_feedback(session_id, score, comment)
        except KeyError as exc:
            raise click.ClickException(f"unknown session {session_id!r}") from exc
        except (AccessError, ValueError) as exc:  # ValueError: a NaN or infinite --score
            raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(fb, indent=2))
        return
    click.echo(f"feedback {fb['score']:g} recorded on {session_id}"
               + (f"; alert {fb['alert_id']} raised" if fb.get("alert_id") else "")
               + (f"; diagnosis job {fb['job_id']} queued" if fb.get("job_id") else ""))
