"""Which session ids a store may hold, so that a batch of new sessions reads nothing before
it writes them (collector/store/ingest.py).

Before it writes its sessions, a batch reads which of its sessions and trace ids are stored:
to merge into them, to adopt the session a trace's earlier spans were stored under, to skip
the spans a retry repeats. For a batch of new sessions that read finds nothing, and cost
0.5-0.9 ms of a transaction's ~12-17 (bench/ingest.py's requests). On a DuckDB file the store
is the only writer (DuckDB lets one process write it; the collector has one Store), so it
keeps the ids it loaded and wrote, as Python's hash() of each (8 bytes a session, in this
process: collector.keyset): an id whose hash it lacks was never stored. A hash it has (the
id's, another id's with the same hash, a session deleted since) only means the table is read,
as before. Not for a lake, where other collectors write.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from tracefix.collector.keyset import KeySet


class StoredSessions:
    def __init__(self) -> None:
        self._keys: KeySet | None = None  # loaded by the first batch

    def maybe_stored(self, con, ids: list[str]) -> list[str]:
        """Those of `ids` that may be stored; the others are not."""
        if self._keys is None:
            stored = con.execute("SELECT session_id FROM sessions").to_arrow_table().column(0).to_pylist()
            self._keys = KeySet(np.fromiter(map(hash, stored), dtype=np.int64, count=len(stored)))
        hashes = [hash(i) for i in ids]
        unknown = set(self._keys.missing(hashes))
        return [i for i, h in zip(ids, hashes) if h not in unknown]

    def written(self, ids: Iterable[str]) -> None:
        """Told of every session the store inserts, before it commits (one rolled back only
        costs a read later)."""
        if self._keys is not None:
            self._keys.add(map(hash, ids))
