"""What every read needs: a session's time range (so scans skip row groups) and messages
by key, fetched a few rows at a time so no read holds more than it shows."""
from __future__ import annotations

from typing import Iterable, Iterator

from tracefix.collector import document
from tracefix.collector.store.connection import StoreConnection
from tracefix.collector.store.sql import first_row


class StoreReads(StoreConnection):
    """The helpers every reader uses."""

    def _time_range(self, cur, session_id: str) -> tuple[int, int]:
        """Where a session's spans start: lets scans skip row groups by their zonemaps."""
        row = first_row(cur.execute("SELECT started_ns, greatest(started_ns, ended_ns) FROM sessions WHERE session_id = ?",
                          [session_id]))
        if row is None or row[0] is None:  # unknown session, or one without spans yet
            return (document.INT64_MIN, document.INT64_MAX)
        started, ended = row
        return started, ended

    def _message_rowids(self, keys: Iterable[int], cur) -> dict[int, int]:
        """Where messages are, by key. The keys go in as a literal IN list (they are our own
        integers), which DuckDB filters in its scan of the key column (~12 ms at 3M messages);
        only the key column is read."""
        out: dict[int, int] = {}
        keys = [int(k) for k in keys]
        for i in range(0, len(keys), 1000):
            chunk = ", ".join(map(str, keys[i:i + 1000]))
            out.update(cur.execute(f"SELECT key, rowid FROM messages WHERE key IN ({chunk})").fetchall())
        return out

    def _fetch_by_rowid(self, cur, table: str, columns: str, rowids: list[int], chunk: int = 8) -> Iterator[tuple]:
        """Rows of `table` by rowid, a few per query. DuckDB reads a filtered column's strings
        a whole vector at a time (2,048 rows: 400 MB of 200 KB messages, ~70 ms, for any one of
        them) unless the filter is one rowid (or key) equality; an IN list of rowids reads the
        range between its ends. So: one equality per row, UNION ALL."""
        for i in range(0, len(rowids), chunk):
            yield from cur.execute(" UNION ALL ".join(
                f"SELECT rowid, {columns} FROM {table} WHERE rowid = {int(r)}" for r in rowids[i:i + chunk])).fetchall()

    def _iter_message_texts(self, keys: Iterable[int], cur, where: dict[int, int] | None = None
                            ) -> Iterator[tuple[int, str]]:
        """(key, stored text) of these messages in the order given, fetched a few at a time
        (keys not stored are skipped). `where`: their rowids, when already looked up."""
        keys = list(dict.fromkeys(int(k) for k in keys))
        where = self._message_rowids(keys, cur) if where is None else where
        for i in range(0, len(keys), 8):
            chunk = [k for k in keys[i:i + 8] if k in where]
            texts = {key: text for _, key, text in self._fetch_by_rowid(cur, "messages", "key, message",
                                                                       [where[k] for k in chunk])}
            for key in chunk:
                if key not in texts:  # a checkpoint between the two reads may have moved rows
                    row = first_row(cur.execute(f"SELECT message FROM messages WHERE key = {key}"))
                    if row is None:
                        continue
                    texts[key] = row[0]
                yield key, texts.pop(key)

    def _message_texts(self, keys: set[int], cur=None) -> dict[int, str]:
        """Messages by key."""
        return dict(self._iter_message_texts(keys, cur or self._read()))

    def _messages(self, keys: set[int], cur=None) -> dict[int, dict]:
        return {k: document.stored_message(m) for k, m in self._message_texts(keys, cur).items()}

    def iter_message_texts(self, keys: Iterable[int], cur=None) -> Iterator[tuple[int, str]]:
        """(key, stored text) in the order given, a few messages in memory at a time."""
        return self._iter_message_texts(keys, cur or self._read())

    def _task_of(self, con, session_id: str) -> str | None:
        """The session's task as its row keeps it (store.tasks: set at ingest, so an alert reads
        no message; reading its step 0's messages cost a thumbs-down 10-20 ms at 100k sessions)."""
        row = first_row(con.execute("SELECT task FROM sessions WHERE session_id = ?", [session_id]))
        return row[0] if row else None
