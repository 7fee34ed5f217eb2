"""What every read needs: a session's time range (so scans skip row groups) and messages
by key, fetched a few rows at a time so no read holds more than it shows."""
from __future__ import annotations

from typing import Iterable, Iterator

from tracefix.attributes import from_json_text
from tracefix.collector import document
from tracefix.collector.store.connection import StoreConnection
from tracefix.collector.store.sql import HEX_ID, first_row, in_strings


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
        sess = first_row(con.execute("SELECT metadata, inputs FROM sessions WHERE session_id = ?", [session_id]))
        msgs = self._first_messages(con, [session_id]).get(session_id, [])
        return document.task_of(from_json_text(sess[0]) if sess else None, from_json_text(sess[1]) if sess else None,
                                msgs)

    def _first_messages(self, con, session_ids: list[str]) -> dict[str, list[dict]]:
        """The input messages of each session's step 0 (where the task usually is)."""
        in_sessions, params = in_strings(session_ids)
        firsts = con.execute(f"SELECT session_id, span_id, started_ns FROM steps WHERE idx = 0 "
                             f"AND session_id {in_sessions}", params).fetchall()
        span_ids = [span_id for _, span_id, _ in firsts if HEX_ID.fullmatch(span_id or "")]
        if not span_ids:
            return {}
        starts = [started for _, _, started in firsts if started is not None]
        lo, hi = (min(starts), max(starts)) if starts else (document.INT64_MIN, document.INT64_MAX)
        in_spans, _ = in_strings(span_ids)  # hex: never the bound fallback
        rows = con.execute(
            f"""SELECT session_id, kind, input_keys, output_key FROM spans
                WHERE start_ns BETWEEN {int(lo)} AND {int(hi)} AND span_id {in_spans}
                AND session_id {in_sessions}""", params).fetchall()
        wanted = {sid: (list(keys or []) + ([out] if kind == "message" and out is not None else []))
                  for sid, kind, keys, out in rows}
        texts = self._message_texts({k for keys in wanted.values() for k in keys}, con)
        return {sid: [document.stored_message(texts[k]) for k in keys if k in texts] for sid, keys in wanted.items()}
