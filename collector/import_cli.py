"""`tracefix import`: message-log conversations read from a file (tracefix.collector.imports)
and written to the store in batches a collector takes, each conversation stored once."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterator

import click

from tracefix.collector.access import AccessError, connect
from tracefix.collector.cli_options import store_options


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="Print the created session ids as a JSON list.")
@store_options
def import_(file: str, as_json: bool, server: str | None, db: str | None, token: str | None) -> None:
    """Import message-log conversations (JSON object, JSON list or JSONL) as sessions.

    Each conversation has its messages under `messages` or `history` (each with `content`
    and a speaker in `name` or `role`), optionally a `task` and a `ground_truth`. Every
    message becomes one step, numbered from 0.
    """
    from tracefix.collector.imports import ImportFormatError, documents_from_text

    raw = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.ClickException(
            f"{file} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}): save it as UTF-8, "
            f"e.g. iconv -f latin1 -t utf-8 {file} > converted.json") from None
    try:
        docs = documents_from_text(text)
    except ImportFormatError as exc:
        raise click.ClickException(f"{file}: {exc}") from exc
    try:
        access = connect(server=server, db=db, token=token)
    except Exception as exc:
        raise click.ClickException(f"cannot open the store ({exc})") from exc
    with access:
        # Ids are content hashes: a conversation imported before is already stored, and importing
        # it again would write it over the stored session (its messages by position, its times
        # anew). The store leaves those out (import_new_sessions), and a conversation the file
        # holds twice, and says which they were.
        ids: list[str] = []
        pending = list(_import_batches(docs))[::-1]  # a stack: the next batch on top
        with click.progressbar(length=len(docs), label="importing", file=sys.stderr) as bar:
            while pending:
                batch = pending.pop()
                try:
                    imported, stored = access.import_new_sessions(batch)
                except Exception as exc:
                    # refused as too large (413, or a reset connection: the collector answers
                    # before reading the rest): the same sessions again, in halves
                    if isinstance(exc, AccessError) and exc.status in (None, 413) and len(batch) > 1:
                        pending += [batch[len(batch) // 2:], batch[:len(batch) // 2]]
                        continue
                    for sid in ids:  # what is stored, so a script can go on from it
                        click.echo(sid)
                    raise click.ClickException(
                        f"import stopped after {len(ids)} of {len(docs)} new sessions: a request of {len(batch)} "
                        f"session(s), {len(json.dumps(batch)) / 1e6:.1f} MB, failed and none of it was created ({exc}). "
                        "Run the same import again to go on: stored sessions are skipped.") from exc
                ids += imported
                for sid in stored:
                    click.echo(f"already stored: {sid}", err=True)
                bar.update(len(batch))
    if as_json:
        click.echo(json.dumps(ids))
    else:
        for sid in ids:
            click.echo(sid)
        click.echo(f"imported {len(ids)} session(s)", err=True)


# An import goes to the store in requests of at most this much JSON (a collector refuses a body
# over its --max-body-mb, 32 MB by default) and this many sessions (each request is one transaction).
IMPORT_BATCH_BYTES = 8 * 1024 * 1024
IMPORT_BATCH_SESSIONS = 200


def _import_batches(docs: list[dict]) -> Iterator[list[dict]]:
    """`docs` in order, in batches of IMPORT_BATCH_BYTES / IMPORT_BATCH_SESSIONS at most: a
    session larger than a batch goes alone."""
    batch: list[dict] = []
    size = 0
    for doc in docs:
        n = len(json.dumps(doc))  # as HttpAccess sends it (ASCII)
        if batch and (size + n > IMPORT_BATCH_BYTES or len(batch) >= IMPORT_BATCH_SESSIONS):
            yield batch
            batch, size = [], 0
        batch.append(doc)
        size += n
    if batch:
        yield batch
