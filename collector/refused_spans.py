"""Finding the spans the database refuses in a request (collector/writer.py).

A request the database refuses for what it holds (`is_data_error`) is cut in halves, and
those in theirs, until the refused spans are found: the others are stored, the refused ones
reported to the exporter (`Refused`, in the export's partial success). Any other error stops
the search and is raised: the request is then retried whole, and its parts already stored are
not stored twice (ingest stores a span once)."""
from __future__ import annotations

import logging
from typing import Callable

from tracefix.collector.normalize import Batch, span_label

log = logging.getLogger("tracefix.collector.writer")

# Spans the database refused for what they hold: (how many, why). A batch's future resolves
# to a list of these (empty: every span stored).
Refused = tuple[int, str]

# Failed transactions spent finding refused spans in one request: one bad span among 20,000
# costs about 2 log2(20,000) = 29; past the budget, what still fails is refused whole.
MAX_ISOLATION_ATTEMPTS = 64


def is_data_error(exc: BaseException) -> bool:
    """True when a write failed because of what the batch holds: retrying cannot help, so the
    receiver answers 400 instead of a retryable 503."""
    import duckdb

    return isinstance(exc, (ValueError, TypeError, OverflowError, duckdb.ConversionException,
                            duckdb.InvalidInputException, duckdb.ConstraintException))


def store_isolating(batch: Batch, store: Callable[[Batch], None], failed: BaseException | None = None
                    ) -> list[Refused]:
    """`store(batch)`; when the database refuses it for what it holds, `store` its halves, and
    theirs, so only the spans it refuses stay out. Returns those; raises the first error that
    is no data error. `failed`: the error `batch` just gave (it is not stored again whole)."""
    refused: list[Refused] = []
    parts, attempts = [batch], 0
    while parts:
        part = parts.pop()
        exc = failed if part is batch else None
        if exc is None:
            try:
                store(part)
                continue
            except Exception as part_exc:
                exc = part_exc
        if not is_data_error(exc):
            raise exc
        attempts += 1
        if part.span_count > 1 and attempts < MAX_ISOLATION_ATTEMPTS:
            first, second = part.halves()
            parts += [second, first]
            continue
        log.warning("the database refused %d records: %s", part.records, exc)
        refused.append((part.records, f"{_what(part)}: the database refused it ({type(exc).__name__}: "
                                         f"{str(exc)[:200]})"))
    return refused


def _what(batch: Batch) -> str:
    """A refused part named for the exporter: its span when it is one, else a count."""
    table = batch.span_arrow()
    if table is None:  # log records or metric points
        return f"{batch.records} records"
    if table.num_rows == 1:
        row = table.select(["name", "span_id", "trace_id"]).to_pylist()[0]
        return span_label(row["name"], row["span_id"], row["trace_id"])
    return f"{table.num_rows} spans"
