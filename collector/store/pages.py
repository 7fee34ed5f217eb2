"""Bounded reads for the API (docs/contracts.md §1b): a session a page of steps at a time,
one step or one message whole, spans by rowid."""
from __future__ import annotations

from typing import Iterator

from tracefix.attributes import from_json_text
from tracefix.collector import assemble, document
from tracefix.collector.contracts import JsonDict
from tracefix.collector.cycles import cycle_collection_paused
from tracefix.collector.store.annotations import annotation_rows
from tracefix.collector.marks import annotation_dict
from tracefix.collector.store.log_events import join_log_events, session_event_keys
from tracefix.collector.store.outlines import KeptOutline, kept_outline, unfilled_step
from tracefix.collector.store.reads import StoreReads
from tracefix.collector.store.schema import DOCUMENT_SPAN_COLUMNS, PAGE_BUDGET_CHARS, SESSION_FIELDS, SPAN_DICT_COLUMNS
from tracefix.collector.store.sql import first_row, in_strings

MAX_CACHED_ANSWERS = 200_000  # answers whose tool-call ids a store keeps (a few MB); past it, it starts over
# Each kind of span is read with only the columns `assemble.build` reads of that kind: a
# 10,000-step session's agent and tool spans are two thirds of its rows, and each value read
# is a Python object made. (kinds, columns); "{inputs}" is the page's steps and step 0.
_SPAN_READS = (
    ("kind IN ('llm', 'message')",  # the steps
     {"trace_id": "CASE WHEN kind = 'llm' AND output_key IS NULL THEN trace_id END",  # join_log_events
      "input_keys": "CASE WHEN span_id {inputs} THEN input_keys END",
      **{c: c for c in ("span_id", "parent_span_id", "kind", "start_ns", "end_ns", "step", "call_seq", "agent", "model",
                        "input_tokens", "output_tokens", "cost_usd", "finish_reason", "output_key", "error",
                        "replay_source", "truncated", "scope")}}),
    ("kind = 'tool'",  # a tool's arguments and result are read for the page's steps only, by rowid
     {c: c for c in ("span_id", "parent_span_id", "kind", "agent", "start_ns", "end_ns", "step", "tool_name",
                     "tool_call_id", "error", "truncated", "rowid")}),
    ("kind NOT IN ('llm', 'message', 'tool', 'other')",  # agents' spans, the root: they name their spans' agent
     {c: c for c in ("span_id", "parent_span_id", "kind", "name", "agent", "truncated")}),
)


class Pages(StoreReads):
    """Reads bounded by what one API page shows, however long the session."""

    def session_page(self, session_id: str, offset: int = 0, limit: int = 100, max_chars: int | None = 2000,
                     content: str = "previews", budget_chars: int = PAGE_BUDGET_CHARS) -> dict | None:
        """The session document with only steps [offset, offset + limit) (fewer when their
        content passes `budget_chars`), strings longer than `max_chars` cut and marked, input
        messages named by key with their previews under `messages`; `content="keys"` leaves
        messages out (keys only), for a reader that fetches them in full. Reads only what the
        page shows, so its memory is bounded by the page, not the session."""
        return self._paged_document(self._read(), session_id, offset, limit, max_chars, budget_chars,
                                    input_previews=content == "previews", output=content == "previews")

    def session_step(self, session_id: str, index: int) -> dict | None:
        """One step in full (contents uncut); its input messages by key only, since a growing
        prompt can be as large as the whole session."""
        cur = self._read()
        lo, hi = self._time_range(cur, session_id)
        row = first_row(cur.execute("SELECT count(*) FILTER (WHERE idx < ?), count(*) FILTER (WHERE idx = ?) FROM steps "
                          "WHERE started_ns BETWEEN ? AND ? AND session_id = ?",
                          [index, index, lo, hi, session_id]))
        before, found = row or (0, 0)
        if not found:
            return None
        doc = self._paged_document(cur, session_id, before, 1, None, 1 << 62, input_previews=False, output=True)
        if doc is None or not doc["steps"]:
            return None
        return {"session_id": session_id, "step": doc["steps"][0]}

    def session_outline(self, session_id: str, full_step: int | None = None) -> dict | None:
        """The session document (§1) with every step but without contents: each step has its
        index, kind, agent, model, start, duration, tokens, error, `output_message_key`, and its
        tool calls' names, ids and errors (what a timeline draws). Reads no message, argument or
        result but step 0's messages (the task), so a tool call sits on the step its span
        recorded (`tracefix.step`), else the step before it in time, rather than on the step
        whose output names its call id. With `full_step`, `doc["full_step"]` is that step as
        `session_step` gives it (None when there is no such step), placed the same way. None
        for an unknown session. The outline is kept until the session is written to again
        (outlines.py); its feedback and step marks are read each time. The steps are shared
        with later reads: a caller copies what it changes."""
        cur = self._read()
        row = first_row(cur.execute("SELECT updated_ns FROM sessions WHERE session_id = ?", [session_id]))
        if row is None:
            return None
        kept = self._outlines.get(session_id, row[0])
        if kept is None:
            kept = self._read_outline(cur, session_id, row[0])
            if kept is None:
                return None
            self._outlines.put(session_id, kept)
        doc = dict(kept.doc)
        doc["feedback"] = assemble.feedback_of(cur.execute(
            "SELECT feedback_id, score, comment, source, created_ns FROM feedback WHERE session_id = ? "
            "ORDER BY created_ns", [session_id]).fetchall())
        doc["annotations"] = [annotation_dict(r, session_id, kept.step_of_span)
                              for r in annotation_rows(cur, session_id)]
        if full_step is not None:
            found = None
            if (fill := kept.fills.get(full_step)) is not None:
                found = unfilled_step(kept, full_step, self._input_keys(cur, session_id, fill[1]))
                self._fill_step(cur, found, None, None, True)
            doc["full_step"] = found
        return doc

    def _read_outline(self, cur, session_id: str, version: int | None) -> KeptOutline | None:
        # a 10,000-step outline makes ~300,000 objects, none of them cycles: collections set off
        # meanwhile walked the process's every object for nothing (a fifth of the outline's time)
        with cycle_collection_paused():
            return self._assemble_outline(cur, session_id, version)

    def _assemble_outline(self, cur, session_id: str, version: int | None) -> KeptOutline | None:
        doc = self._paged_document(cur, session_id, 0, 0, None, 0, input_previews=False, output=False, outline=True)
        if doc is None:
            return None
        return kept_outline(version, doc)

    def _input_keys(self, cur, session_id: str, span_id: str) -> list[int]:
        """One step's input message keys (those its GenAI events carried where its span has none)."""
        lo, hi = self._time_range(cur, session_id)
        rows = [dict(zip(("trace_id", "span_id", "kind", "input_keys", "output_key"), r)) for r in cur.execute(
            "SELECT trace_id, span_id, kind, input_keys, output_key FROM spans WHERE start_ns BETWEEN ? AND ? "
            "AND session_id = ? AND span_id = ?", [lo, hi, session_id, span_id]).fetchall()]
        join_log_events(cur, rows, {span_id})
        return list(rows[0]["input_keys"] or []) if rows else []

    def _paged_document(self, cur, session_id: str, offset: int, limit: int, max_chars: int | None,
                        budget_chars: int, input_previews: bool, output: bool, outline: bool = False) -> dict | None:
        srow = first_row(cur.execute(f"SELECT {', '.join(SESSION_FIELDS)} FROM sessions WHERE session_id = ?",
                           [session_id]))
        if srow is None:
            return None
        session = dict(zip(SESSION_FIELDS, srow))
        lo, hi = self._time_range(cur, session_id)
        order = cur.execute("SELECT span_id, idx FROM steps WHERE started_ns BETWEEN ? AND ? AND session_id = ? "
                            "ORDER BY idx", [lo, hi, session_id]).fetchall()
        page_ids = {span_id for span_id, _ in order[offset:offset + limit]}
        # step 0 too: its first messages name the session's task
        detail_ids = page_ids | ({order[0][0]} if order else set())
        in_detail, in_params = in_strings(detail_ids)
        # (as Arrow, made into dicts in one call: a quarter less CPU than a dict per fetched tuple)
        step_spans, tool_spans, other_spans = (
            cur.execute(f"SELECT {select.replace('{inputs}', in_detail)} FROM spans WHERE start_ns BETWEEN ? AND ? "
                        f"AND session_id = ? AND {kinds} ORDER BY start_ns",
                        [*(in_params if "{inputs}" in select else ()), lo, hi, session_id]).to_arrow_table().to_pylist()
            for kinds, columns in _SPAN_READS
            for select in [", ".join(f"{expr} AS {name}" for name, expr in columns.items())])
        for span in tool_spans:  # its arguments and result: fetched for the page's steps only
            span["tool_arguments"] = span["tool_result"] = document.RowRef(span.pop("rowid"))
        spans = step_spans + tool_spans + other_spans
        join_log_events(cur, step_spans, detail_ids)  # messages the GenAI events of bare LLM spans carried
        links = dict(cur.execute("SELECT span_id, parent_span_id FROM spans WHERE start_ns BETWEEN ? AND ? "
                                 "AND session_id = ? AND kind = 'other'", [lo, hi, session_id]).fetchall())
        refs: dict[int, document.MessageRef] = {}
        for span in step_spans:
            for k in (span["input_keys"] or []):
                refs.setdefault(k, document.MessageRef(k))
            if span["output_key"] is not None:
                refs.setdefault(span["output_key"], document.MessageRef(span["output_key"]))
        # Outside the page an output matters only by its tool call ids, which place tool spans on steps
        # and name the calls no tool span recorded (the document's `replayable`: live tools).
        # (an outline reads no message: its tool calls sit on their recorded step, else by time)
        # Read once per answer and kept: every page of a long session needs all of them (a
        # 10,000-step session's first page spent 2.6 s reading them, and each later page again).
        if not outline:
            outputs = [s["output_key"] for s in step_spans if s["output_key"] is not None and s["kind"] == "llm"]
            # taken out of the shared dict first: another reader may start it over meanwhile
            known = {key: ids for key in outputs if (ids := self._call_ids.get(key)) is not None}
            unread = [key for key in outputs if key not in known]
            if unread:
                if len(self._call_ids) + len(unread) > MAX_CACHED_ANSWERS:
                    self._call_ids.clear()
                where = self._message_rowids(unread, cur)
                for _, key, calls in self._fetch_by_rowid(
                        cur, "messages", "key, json_extract(message, '$.tool_calls')",
                        sorted(where.values()), chunk=64):
                    known[key] = self._call_ids[key] = _ids_and_names(calls)
            for key in outputs:
                if calls := known.get(key):
                    refs[key]["tool_calls"] = [{"id": i, "name": name} for i, name in calls]
        first = next((s for s in step_spans if order and s["span_id"] == order[0][0]), None)
        if first is not None:
            first_keys = [*(first["input_keys"] or []), *([first["output_key"]] if first["output_key"] is not None else [])]
            for key, text in self._iter_message_texts(first_keys, cur):
                refs[key].update(document.clip(document.stored_message(text), 1000)[0])
        snaps = [(span_id, key, document.RowRef(rowid), step, time_ns) for span_id, key, rowid, step, time_ns in
                 cur.execute("SELECT span_id, key, rowid, step, time_ns FROM snapshots WHERE session_id = ? "
                             "ORDER BY time_ns, seq", [session_id]).fetchall()]
        feedback = cur.execute("SELECT feedback_id, score, comment, source, created_ns FROM feedback "
                               "WHERE session_id = ? ORDER BY created_ns", [session_id]).fetchall()
        # the page's own shape (contracts §1b): the document's header, steps as the page shows them
        doc: JsonDict = dict(assemble.build(session, spans, links, order, refs, snaps, feedback,
                                            annotation_rows(cur, session_id)))

        if outline:
            return doc
        page: list[dict] = []
        messages: dict[str, dict] = {}
        used = 0
        page_steps = [st for st in doc["steps"] if st["span_id"] in page_ids]
        # where the page's messages are, in one scan of the key column rather than one per step
        wanted = {m.key for st in page_steps for m in (st["input_messages"] if input_previews else [])}
        wanted |= {st["output_message"].key for st in page_steps if output and st["output_message"] is not None}
        where = self._message_rowids(wanted, cur)
        for step in page_steps:
            if page and used > budget_chars:
                break
            used += self._fill_step(cur, step, messages if input_previews else None, max_chars, output, where)
            page.append(step)
        doc["steps"] = page
        if input_previews:
            doc["messages"] = messages
        end = offset + len(page)
        doc["page"] = {"offset": offset, "limit": limit, "returned": len(page), "total": len(order),
                       "next_offset": end if end < len(order) else None, "max_chars": max_chars}
        return doc

    def _fill_step(self, cur, step: dict, messages: dict | None, max_chars: int | None, with_output: bool,
                   where: dict[int, int] | None = None) -> int:
        """Put a page step's contents in place (fetched now, cut to `max_chars`); returns
        about how many characters they add to the page."""
        used = 0
        inputs = step.pop("input_messages")
        step["input_message_keys"] = [document.key_ref(m.key) for m in inputs]
        if messages is not None:
            fresh = [m.key for m in inputs if document.key_ref(m.key) not in messages]
            for key, text in self._iter_message_texts(fresh, cur, where):
                preview, cut = document.clip(document.stored_message(text), max_chars)
                if cut:
                    preview["truncated"] = cut
                messages[document.key_ref(key)] = preview
                used += len(text) - cut + 64
        output = step["output_message"]
        step["output_message_key"] = document.key_ref(output.key) if output is not None else None
        if output is not None and not with_output:
            step["output_message"] = None
        elif output is not None:
            output_text = next((t for _, t in self._iter_message_texts([output.key], cur, where)), None)
            preview, cut = document.clip(document.stored_message(output_text), max_chars) if output_text is not None else (None, 0)
            if cut and preview is not None:
                preview["truncated"] = cut
            step["output_message"] = preview
            used += len(output_text or "") - cut
        calls = {tc["arguments"].rowid: tc for tc in step["tool_calls"] if isinstance(tc["arguments"], document.RowRef)}
        step_cut = 0
        for rowid, arguments, result in self._fetch_by_rowid(cur, "spans", "tool_arguments, tool_result", sorted(calls)):
            tc = calls.pop(rowid)
            (tc["arguments"], tc["result"]), cut = document.clip([from_json_text(arguments), from_json_text(result)],
                                                                 max_chars)
            if cut:
                tc["truncated"] = cut
            step_cut += cut
            used += len(arguments or "") + len(result or "") - cut
        for tc in calls.values():  # rows gone since the skeleton was read
            tc["arguments"] = tc["result"] = None
        states = {ref.rowid: key for key, ref in step["snapshots"].items() if isinstance(ref, document.RowRef)}
        for rowid, state in self._fetch_by_rowid(cur, "snapshots", "state", sorted(states)):
            step["snapshots"][states[rowid]], cut = document.clip(from_json_text(state), max_chars)
            step_cut += cut
            used += len(state or "") - cut
        for key, value in step["snapshots"].items():
            if isinstance(value, document.RowRef):  # rows gone since the skeleton was read
                step["snapshots"][key] = None
        if step_cut:
            step["truncated"] = step_cut  # the step in full: GET .../steps/{index}
        return used

    def session_message_keys(self, session_id: str, cur=None) -> list[int] | None:
        """Every message (and tool-definitions blob) the session's spans refer to, by key, in
        key order: what `GET .../messages` pages through. None for an unknown session."""
        cur = cur or self._read()
        if first_row(cur.execute("SELECT 1 FROM sessions WHERE session_id = ?", [session_id])) is None:
            return None
        lo, hi = self._time_range(cur, session_id)
        where = "FROM spans WHERE start_ns BETWEEN ? AND ? AND session_id = ?"
        keys = {r[0] for r in cur.execute(
            f"""SELECT DISTINCT k FROM (SELECT unnest(input_keys) AS k {where} UNION ALL SELECT output_key {where}
                UNION ALL SELECT tools_key {where}) WHERE k IS NOT NULL""", [lo, hi, session_id] * 3).fetchall()}
        return sorted(keys | session_event_keys(cur, session_id, lo, hi))

    def session_message(self, session_id: str, key: int) -> str | None:
        """A message's stored text when the session refers to it (else None: keys are not
        a way to read other sessions' messages)."""
        cur = self._read()
        lo, hi = self._time_range(cur, session_id)
        key = int(key)
        used = first_row(cur.execute(f"""SELECT 1 FROM spans WHERE start_ns BETWEEN ? AND ? AND session_id = ?
                               AND (output_key = {key} OR tools_key = {key} OR list_contains(input_keys, {key}))
                               LIMIT 1""", [lo, hi, session_id]))
        if used is None and key not in session_event_keys(cur, session_id, lo, hi):
            return None
        return next((text for _, text in self._iter_message_texts([key], cur)), None)

    def session_span_rowids(self, session_id: str, cur=None) -> list[int] | None:
        """The session's spans in `get_spans` order, as rowids (what `GET .../spans` pages
        through). None for an unknown session."""
        cur = cur or self._read()
        if first_row(cur.execute("SELECT 1 FROM sessions WHERE session_id = ?", [session_id])) is None:
            return None
        lo, hi = self._time_range(cur, session_id)
        return [r[0] for r in cur.execute("SELECT rowid FROM spans WHERE start_ns BETWEEN ? AND ? AND session_id = ? "
                                          "ORDER BY start_ns, span_id", [lo, hi, session_id]).fetchall()]

    def iter_spans(self, rowids: list[int], cur=None) -> Iterator[dict]:
        """Span dicts (contracts §2) for these rowids, in that order, a few in memory at a time;
        the attributes the messages table holds are named by key (`message_keys`), not rebuilt."""
        cur = cur or self._read()
        for i in range(0, len(rowids), 8):
            chunk = rowids[i:i + 8]
            rows = {rowid: dict(zip(SPAN_DICT_COLUMNS, values))
                    for rowid, *values in self._fetch_by_rowid(cur, "spans", ", ".join(SPAN_DICT_COLUMNS), chunk)}
            for rowid in chunk:
                if rowid in rows:
                    yield assemble.span_dict(rows.pop(rowid), None)


def _ids_and_names(calls_json: str | None) -> tuple[tuple[str | None, str | None], ...]:
    """(id, tool name) of each tool call an LLM answer's `tool_calls` (JSON text) names."""
    calls = from_json_text(calls_json)
    out = []
    for call in calls if isinstance(calls, list) else ():
        if isinstance(call, dict):
            name = (call.get("function") or {}).get("name") if isinstance(call.get("function"), dict) else None
            out.append((call.get("id"), name or call.get("name")))
    return tuple(out)
