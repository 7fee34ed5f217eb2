"""`tracefix dataset add|list|show|export|import`: the sessions kept to be run again by
`tracefix regress` (every thumbs-down goes to the dataset `default` by itself; what an item
says: `tracefix.collector.datasets`). Export and import are JSONL, one item a line, whole:
an imported item keeps its entrypoint, inputs, the app's signature records and recorded tool
calls, so another store (a CI job's) can regress it."""
from __future__ import annotations

import json
import sys

import click

from tracefix.collector.access import AccessError, connect
from tracefix.collector.cli_options import store_options
from tracefix.collector.store.datasets import DEFAULT_DATASET, ITEM_KINDS


def _connect(db, server, token, create: bool = False):
    try:
        return connect(server=server, db=db, token=token, create=create)
    except AccessError as exc:
        raise click.ClickException(str(exc)) from exc


def _filters(fn):
    fn = click.option("--kind", type=click.Choice(ITEM_KINDS), default=None,
                      help="Only items that came in this way.")(fn)
    fn = click.option("--since", default=None, help="Only sessions started since (ISO-8601 or epoch seconds).")(fn)
    fn = click.option("--service", default=None, help="Only sessions of this service.")(fn)
    return click.option("--dataset", default=None, help="Only this dataset (default: all).")(fn)


@click.group("dataset")
def dataset() -> None:
    """Datasets of sessions: every thumbs-down, and the sessions you add, to run again with `tracefix regress`."""


@dataset.command("add")
@store_options
@click.argument("session_ids", nargs=-1, required=True)
@click.option("--dataset", "name", default=DEFAULT_DATASET, show_default=True)
def add(db, server, token, session_ids, name):
    """Add stored sessions to a dataset."""
    with _connect(db, server, token) as store:
        try:
            done = store.add_to_dataset(name, list(session_ids))
        except KeyError as exc:  # UnknownSession, from the file or the API: its message names the session
            raise click.ClickException(f"{exc}: nothing was added") from exc
        except (AccessError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
    click.echo(f"{len(done['added'])} session(s) added to {done['dataset']}"
               + (f"; {len(done['present'])} there already" if done["present"] else ""))


@dataset.command("list")
@store_options
@_filters
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_(db, server, token, dataset, service, since, kind, as_json):
    """List the items (with --dataset, of one dataset; without, of all, after a line per dataset)."""
    with _connect(db, server, token) as store:
        try:
            names = store.list_datasets()
            items = store.dataset_items(dataset, service=service, since=since, kind=kind)
        except (AccessError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps({"datasets": names, "items": items}, indent=2, ensure_ascii=False))
        return
    if not items:
        click.echo("no items")
        return
    for d in names if dataset is None else []:
        click.echo(f"dataset {d['dataset']}: {d['items']} item(s) ({d['thumbs_down']} thumbs-down, "
                   f"{d['added']} added, {d['imported']} imported)")
    click.echo(f"{'DATASET':<14} {'SESSION':<38} {'KIND':<12} {'OUTCOME':<8} {'MILESTONES':>10}  VALIDATED EDIT")
    for item in items:
        reached = item["milestones"]
        edit = item.get("validated_edit") or {}
        edit_text = f"step {edit['step']}: {' '.join(str(edit.get('text') or '').split())[:60]}" if edit else "-"
        click.echo(f"{item['dataset'][:14]:<14} {item['session_id'][:38]:<38} {item['kind']:<12} "
                   f"{(item.get('outcome') or '-'):<8} "
                   f"{(str(sum(m['achieved'] for m in reached)) + '/' + str(len(reached))) if reached else '-':>10}  "
                   f"{edit_text}")


@dataset.command("show")
@store_options
@click.argument("session_id")
@click.option("--dataset", default=None, help="The dataset holding it (default: its first).")
def show(db, server, token, session_id, dataset):
    """Print one item whole, as JSON."""
    with _connect(db, server, token) as store:
        try:
            items = store.dataset_items(dataset, full=True, session_ids=[session_id])
        except (AccessError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
    if not items:
        raise click.ClickException(f"no dataset item of session {session_id!r}"
                                   + (f" in {dataset!r}" if dataset else ""))
    click.echo(json.dumps(items[0], indent=2, ensure_ascii=False))


@dataset.command("export")
@store_options
@_filters
@click.option("-o", "--output", type=click.File("w"), default="-", show_default=True, help="JSONL file.")
def export(db, server, token, dataset, service, since, kind, output):
    """Write the items whole, one JSON object a line (JSONL)."""
    with _connect(db, server, token) as store:
        try:
            items = store.dataset_items(dataset, full=True, service=service, since=since, kind=kind)
        except (AccessError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
    for item in items:
        output.write(json.dumps(item, ensure_ascii=False, sort_keys=True) + "\n")
    if output is not sys.stdout:
        click.echo(f"{len(items)} item(s) written", err=True)


def read_items(lines) -> list[dict]:
    """The items of a JSONL text: one object with a `session_id` a line (blank lines skipped)."""
    items = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise click.ClickException(f"line {n}: not JSON ({exc})") from None
        if not isinstance(item, dict) or not isinstance(item.get("session_id"), str) or not item["session_id"]:
            raise click.ClickException(f"line {n}: an item is a JSON object with a 'session_id'")
        items.append(item)
    return items


@dataset.command("import")
@store_options
@click.argument("file", type=click.File("r"))
@click.option("--dataset", default=None, help="Put every item here (default: the dataset each item names).")
def import_(db, server, token, file, dataset):
    """Read items from a JSONL file (as `tracefix dataset export` writes them)."""
    items = read_items(file)
    groups: dict[str, list[dict]] = {}
    for item in items:
        groups.setdefault(dataset or item.get("dataset") or DEFAULT_DATASET, []).append(item)
    added = present = 0
    with _connect(db, server, token, create=True) as store:
        try:
            for name, group in groups.items():
                done = store.import_dataset_items(name, group)
                added, present = added + len(done["added"]), present + len(done["present"])
        except (AccessError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
    click.echo(f"{added} item(s) imported" + (f"; {present} there already" if present else ""))
