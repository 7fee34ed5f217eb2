"""Analysis and replay results, one JSON document per session each."""
from __future__ import annotations

import json
import time
from typing import Any, Mapping

from tracefix.collector.contracts import JsonDict
from tracefix.collector.redact import redact_value
from tracefix.collector.store.connection import StoreConnection
from tracefix.collector.store.sql import first_row


class Results(StoreConnection):
    """One analysis and one replay result per session, stored as the client sent them, but
    for the secrets in them (a replay's runs and an edit's text are new text)."""

    def _save_result(self, table: str, session_id: str, result: Mapping[str, Any]) -> None:
        result = redact_value(table, dict(result))
        with self._tx() as con:
            if self.shared:  # a lake has no key to replace on: the write lock makes delete + insert one step
                con.execute(f"DELETE FROM {table} WHERE session_id = ?", [session_id])
                con.execute(f"INSERT INTO {table} VALUES (?, ?, ?)",
                            [session_id, json.dumps(result, ensure_ascii=False), time.time_ns()])
                return
            con.execute(f"INSERT OR REPLACE INTO {table} VALUES (?, ?, ?)",
                        [session_id, json.dumps(result, ensure_ascii=False), time.time_ns()])

    def _get_result(self, table: str, session_id: str) -> JsonDict | None:
        row = first_row(self._read().execute(f"SELECT result FROM {table} WHERE session_id = ?", [session_id]))
        return json.loads(row[0]) if row else None

    def save_analysis(self, session_id: str, result: Mapping[str, Any]) -> None:
        """Store an analysis result (tracefix.analysis.contracts.AnalysisResult): JSON, opaque here."""
        self._save_result("analyses", session_id, result)

    def get_analysis(self, session_id: str) -> JsonDict | None:
        return self._get_result("analyses", session_id)

    def save_replay(self, session_id: str, result: Mapping[str, Any]) -> None:
        """Store a replay result (tracefix.replay.contracts.ReplayResult): JSON, opaque here."""
        self._save_result("replays", session_id, result)

    def get_replay(self, session_id: str) -> JsonDict | None:
        return self._get_result("replays", session_id)
