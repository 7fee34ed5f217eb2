"""`tracefix analyze`, `tracefix train`.

Each talks to the store through the collector's access layer: `--server URL` (a running
`tracefix serve`, the only writer of its file) or `--db PATH` (open the DuckDB file
directly when no server runs). Environment: TRACEFIX_SERVER, TRACEFIX_DB, TRACEFIX_TOKEN,
TRACEFIX_MODEL_DIR (where models are written and read), TRACEFIX_LLM_* (optional analyst).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from tracefix.collector.cli_options import store_options
from tracefix.errors import UnknownSession

_BARS = "▁▂▃▄▅▆▇█"


_store_options = store_options


def _access(server: str | None, db: str | None, token: str | None):
    from tracefix.collector.access import connect

    try:
        return connect(server=server, db=db, token=token, create=False)
    except Exception as exc:
        raise click.ClickException(f"cannot open the store ({exc})") from exc


@click.command("analyze")
@click.argument("session")
@click.option("--json", "as_json", is_flag=True, help="Print the analysis result as JSON (contracts section 3).")
@click.option("--model-dir", type=click.Path(file_okay=True), default=None,
              help="Folder (or file) of the HGT model; default $TRACEFIX_MODEL_DIR or <db folder>/models.")
@click.option("--no-llm", is_flag=True, help="Do not ask the LLM analyst even if TRACEFIX_LLM_BASE_URL is set.")
@click.option("--all-steps", is_flag=True, help="List every step, not only those near the evidence (long sessions).")
@_store_options
def analyze(session: str, as_json: bool, model_dir: str | None, no_llm: bool, all_steps: bool, server: str | None,
            db: str | None, token: str | None) -> None:
    """Score a session's steps with the anomaly detectors and rank failure hypotheses.

    The result is stored with the session (GET /api/v1/sessions/{id}/analysis).
    """
    from .pipeline import analyze_session

    access = _access(server, db, token)
    try:
        result = analyze_session(access, session, model_dir=model_dir, llm=False if no_llm else None)
    except UnknownSession as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(result, indent=2, default=str))
    else:
        click.echo(render_text(result, all_steps=all_steps))


def _bar(value: float, lo: float, hi: float) -> str:
    if hi - lo < 1e-12:
        return _BARS[0]
    return _BARS[min(int((value - lo) / (hi - lo) * (len(_BARS) - 1) + 0.5), len(_BARS) - 1)]


# Longer sessions list only the steps near the evidence (the sparklines still show all).
MAX_LISTED_STEPS = 60
SPARKLINE_WIDTH = 100
# Wide enough for a speaker label of a message log ("Orchestrator (-> WebSurfer)").
MAX_AGENT_WIDTH = 28


def render_text(result: dict, all_steps: bool = False) -> str:
    """The compact text timeline `tracefix analyze` prints."""
    detectors = result.get("detectors") or []
    rows = result.get("scores") or []
    frontier = result.get("frontier") or {}
    lines = [f"session {result.get('session_id')}  model {result.get('model_version') or 'none'}  "
             f"detectors: {', '.join(detectors)}"]
    if rows:
        width = max(1, -(-len(rows) // SPARKLINE_WIDTH))  # steps per character
        if width > 1:
            lines.append(f"  (one character = the highest of {width} consecutive steps)")
        for name in detectors:
            values = [r.get(name, 0.0) for r in rows]
            lo, hi = min(values), max(values)
            peaks = [max(values[i:i + width]) for i in range(0, len(values), width)]
            lines.append(f"  {name:<17} {''.join(_bar(v, lo, hi) for v in peaks)}")
        agent_w = min(max(len(str(r.get("agent"))) for r in rows), MAX_AGENT_WIDTH)
        header = f"  {'step':>4}  {'agent':<{agent_w}}  {'phase':<8} {'status':<6}"
        header += "".join(f" {name[:16]:>16}" for name in detectors)
        lines.append(header)
        ranges = {n: (min(r.get(n, 0.0) for r in rows), max(r.get(n, 0.0) for r in rows)) for n in detectors}
        shown = rows
        if len(rows) > MAX_LISTED_STEPS and not all_steps:
            near = {s for steps in frontier.values() for s in steps}
            for h in result.get("hypotheses") or []:
                near |= {h["step"], *((h.get("evidence") or {}).get("path") or [])}
            near = {s + d for s in near for d in (-1, 0, 1)}
            shown = [r for r in rows if r["step"] in near]
        for r in shown:
            agent = str(r.get("agent"))
            agent = agent if len(agent) <= agent_w else agent[:agent_w - 1] + "…"
            line = f"  {r['step']:>4}  {agent:<{agent_w}}  {r.get('phase', ''):<8} {r.get('status', ''):<6}"
            for name in detectors:
                flag = "*" if r["step"] in frontier.get(name, []) else " "
                line += f" {r.get(name, 0.0):>9.3f} {_bar(r.get(name, 0.0), *ranges[name])}{flag:>1}    "
            lines.append(line.rstrip())
        lines.append("  (* = on that detector's frontier)" + (
            f"; {len(rows) - len(shown)} routine steps not listed (--all-steps lists them)" if len(shown) < len(rows) else ""))
    lines.append("hypotheses:")
    for h in result.get("hypotheses") or []:
        ev = h.get("evidence") or {}
        path = " <- ".join(map(str, ev.get("path") or []))
        lines.append(f"  {h['rank']}. step {h['step']}  {h.get('agent')}  score {h.get('score'):.2f}  "
                     f"[{', '.join(ev.get('detectors') or []) or 'dependency path'}]  source={h.get('source')}")
        if path and len(ev.get("path") or []) > 1:
            lines.append(f"     path: {path}")
        if ev.get("features"):
            lines.append("     features: " + ", ".join(f"{k}={v:g}" for k, v in ev["features"].items()))
        lines.append(f"     {h.get('rationale', '')}")
    if not result.get("hypotheses"):
        lines.append("  (none)")
    for note in result.get("notes") or []:
        lines.append(f"note: {note}")
    return "\n".join(lines)


@click.command("train")
@click.option("--criterion", type=click.Choice(["success", "positive"]), default="success", show_default=True,
              help="Training sessions: evaluator success, or positive user feedback.")
@click.option("--epochs", type=click.IntRange(min=1), default=30, show_default=True)
@click.option("--out", type=click.Path(), default=None,
              help="Model folder or .pt file; default $TRACEFIX_MODEL_DIR or <db folder>/models.")
@click.option("--device", default=None, help="torch device (default: cuda when available, else cpu).")
@click.option("--ranker", is_flag=True,
              help="Train the learned step ranker instead, from --labelled files (no store needed).")
@click.option("--labelled", "labelled", multiple=True, type=click.Path(exists=True),
              help="With --ranker: labelled failed sessions: message logs with `mistake_step` (.json, .jsonl "
                   "or a folder of them) or {\"session\": document, \"mistake_step\": k} lines. Repeatable.")
@click.option("--l2", type=click.FloatRange(min=0.0), default=0.3, show_default=True,
              help="With --ranker: L2 penalty on the standardized weights.")
@_store_options
def train(criterion: str, epochs: int, out: str | None, device: str | None, ranker: bool,
          labelled: tuple[str, ...], l2: float, server: str | None, db: str | None, token: str | None) -> None:
    """Train the normal-behaviour HGT model on the store's successful sessions (or, with
    --ranker, the learned step ranker on labelled failed sessions)."""
    from tqdm import tqdm

    from .pipeline import train_model

    if ranker:
        _train_ranker(labelled, out, l2, db)
        return

    access = _access(server, db, token)
    bar = tqdm(total=epochs, desc="train hgt", unit="epoch", file=sys.stderr, dynamic_ncols=True)

    def progress(record: dict) -> None:
        bar.update(1)
        bar.set_postfix(loss=f"{record['loss']:.4f}")
        tqdm.write(f"epoch {record['epoch']}/{record['epochs']}  loss {record['loss']:.4f}  "
                   f"{record['seconds']:.2f}s", file=sys.stderr)

    try:
        detector, path = train_model(access, criterion=criterion, epochs=epochs, out=out, device=device,
                                     progress=progress)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        bar.close()
    click.echo(f"model {detector.version} trained on {detector.trained_on} session(s) ({detector.device.type}) -> {path}")


def _train_ranker(labelled: tuple[str, ...], out: str | None, l2: float, db: str | None) -> None:
    from tqdm import tqdm

    from .pipeline import default_model_dir
    from .ranker_training import train_rankers

    if not labelled:
        raise click.UsageError("--ranker needs at least one --labelled file or folder")
    target = Path(out) if out else default_model_dir(db) / "ranker.json"
    if target.suffix != ".json":
        target = target / "ranker.json"
    bar = tqdm(desc="ranker inputs", unit="session", file=sys.stderr, dynamic_ncols=True)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(1)

    try:
        rankers, path = train_rankers(labelled, target, l2=l2, progress=progress)
    except (ValueError, KeyError) as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        bar.close()
    for kind, model in rankers.items():
        click.echo(f"ranker for {kind} sessions: {model.version}, {model.trained_on['sessions']} labelled "
                   f"session(s) {model.trained_on['groups']}")
    click.echo(f"-> {path} (analyze uses it from the model folder; the package ships its own)")
