"""How the store puts values in SQL, and its transactions."""
from __future__ import annotations

import re
from typing import Any, Iterable

import duckdb
import pyarrow as pa
import pyarrow.compute as pc


HEX_ID = re.compile(r"[0-9a-f]{1,64}")  # span ids are hex we wrote ourselves: safe to inline in SQL


def distinct_spans(table: pa.Table) -> int:
    """How many different spans (trace_id, span_id) an Arrow table of spans holds."""
    return pc.count_distinct(pc.binary_join_element_wise(table["trace_id"], table["span_id"], "")).as_py()


def records(result: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """The rows of an executed query as dicts by column name (what the SELECT names them),
    so no reader counts columns."""
    names = [d[0] for d in result.description]
    return [dict(zip(names, row)) for row in result.fetchall()]


def first_row(result: duckdb.DuckDBPyConnection) -> tuple | None:
    """The first row of an executed query (None: no row), its result read to the end. A result
    read with `fetchone` stays open, and so does its transaction until the cursor's next
    query: an idle reader's cursor would then keep every CHECKPOINT out for good (DuckDB refuses
    one while another transaction is open and deletes wait to be checkpointed)."""
    rows = result.fetchall()
    return rows[0] if rows else None


def scalar(result: duckdb.DuckDBPyConnection) -> Any:
    """The one value of a query that answers one row (an aggregate: count, max)."""
    row = first_row(result)
    if row is None:
        raise LookupError("the query answered no row")
    return row[0]


def in_strings(values: Iterable[str]) -> tuple[str, list]:
    """`IN (...)` over strings, and its parameters: how the store puts a list of ids in SQL.

    DuckDB's Python client tries `import pandas` for every bound parameter value (each failed
    attempt walks sys.path: ~2 ms of each ingest transaction went there), so the values go
    in as SQL string literals. A value with a NUL byte, which SQL text cannot carry, falls
    back to a bound list."""
    values = list(values)
    if any("\x00" in v for v in values):
        return "IN (SELECT unnest(?::VARCHAR[]))", [values]
    return "IN (" + (", ".join("'" + v.replace("'", "''") + "'" for v in values) or "NULL") + ")", []


class Transaction:
    """`with Transaction(con) as con:` commits on success, rolls back on an exception."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con

    def __enter__(self):
        self.con.begin()
        return self.con

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.con.commit()
        else:
            self.con.rollback()
        return False
