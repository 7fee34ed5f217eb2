"""Feedback and the alert outbox: negative feedback records its alert, one delivery per
webhook and a diagnosis job in one transaction; the notifier works the deliveries off."""
from __future__ import annotations

import json
import math
import time
import uuid
from typing import Iterable
from urllib.parse import quote

from tracefix.attributes import from_json_text
from tracefix.collector import document, jsonsafe
from tracefix.collector.redact import redact_text, redact_value
from tracefix.collector.store.datasets import DEFAULT_DATASET, insert_item
from tracefix.collector.store.jobs import insert_job
from tracefix.collector.store.reads import StoreReads
from tracefix.collector.store.sql import records, scalar
from tracefix.errors import UnknownSession


def check_score(score: float) -> float:
    """A feedback score as stored: a finite number. NaN compares false with everything (it
    would never alert) and ±Infinity is no JSON number, so both are refused."""
    if not math.isfinite(score):
        raise ValueError(f"feedback 'score' must be a finite number, not {score!r}")
    return score


def slack_escape(text: str) -> str:
    """`text` shown as written in a Slack message: its three escapes, so that `<!channel>` or
    `<https://…|label>` from a sender is no mention or link; line breaks as spaces, so that it
    cannot add a line that looks like the alert's own."""
    return " ".join(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").splitlines())


def alert_text(alert: dict) -> str:
    """The Slack-compatible `text` of an alert's payload. The session id, the comment and the
    task come from whoever holds the ingest token, so they are escaped; the report link is the
    collector's own."""
    comment, task = alert.get("comment"), alert.get("task")
    if alert.get("step") is not None:  # a person's mark on one step (label, score or both)
        what = ", ".join([*([slack_escape(alert["label"])] if alert.get("label") else []),
                          *([f"{alert['score']:g}"] if alert.get("score") is not None else [])])
        head = f"negative mark ({what}) on step {alert['step']} of session"
    else:
        head = f"negative feedback ({alert['score']:g}) on session"
    return (f":thumbsdown: tracefix: {head} "
            f"{slack_escape(alert['session_id'])}" + (f": {slack_escape(comment)}" if comment else "")
            + (f"\nTask: {slack_escape(task)}" if task else "") + f"\nReport: {alert['link']}")


class FeedbackOutbox(StoreReads):
    """Feedback, and for negative feedback its alert, webhook deliveries and diagnosis job."""

    def add_feedback(self, session_id: str, score: float, comment: str | None = None, *, source: str = "api",
                     alert_threshold: float = 0.0, webhooks: Iterable[str] = (), public_url: str | None = None) -> dict:
        """Record feedback; below the threshold, the alert (outbox) and a diagnosis job are
        created in the same transaction. Raises UnknownSession."""
        score = check_score(float(score))
        with self._tx() as con:
            res = self._add_feedback(con, session_id, score, comment, source=source,
                                     feedback_id=None, created_ns=None, alert_threshold=alert_threshold,
                                     webhooks=list(webhooks), public_url=public_url)
        fb = res["feedback"][0]
        fb["alert_id"] = res["alerts"][0]["alert_id"] if res["alerts"] else None
        fb["job_id"] = res["jobs"][0]["job_id"] if res["jobs"] else None
        return fb

    def _add_feedback(self, con, session_id, score, comment, *, source, feedback_id, created_ns,
                      alert_threshold, webhooks, public_url) -> dict:
        row = con.execute("SELECT output FROM sessions WHERE session_id = ?", [session_id]).fetchone()
        if row is None:
            raise UnknownSession(session_id)
        (output,) = row
        comment = redact_text(comment) if comment else comment  # stored, and sent in the alert
        feedback_id = feedback_id or f"fb-{uuid.uuid4().hex[:16]}"
        created_ns = created_ns or time.time_ns()
        con.execute("INSERT INTO feedback VALUES (?, ?, ?, ?, ?, ?)",
                    [feedback_id, session_id, score, comment, source, created_ns])
        fb = {"feedback_id": feedback_id, "session_id": session_id, "score": score, "comment": comment,
              "source": source, "created_at": document.iso(created_ns)}
        out = {"feedback": [fb], "alerts": [], "jobs": []}
        if score < alert_threshold:
            self._raise_alert(con, out, session_id, feedback_id, score, comment, output=output,
                              created_ns=created_ns, webhooks=webhooks, public_url=public_url)
            insert_item(con, DEFAULT_DATASET, session_id, "thumbs-down", created_ns)  # a regression test to keep
        return out

    def _raise_alert(self, con, out: dict, session_id: str, cause_id: str, score: float | None, comment: str | None,
                     *, output, created_ns: int, webhooks, public_url: str | None, step: int | None = None,
                     label: str | None = None) -> None:
        """The alert of a negative mark (a session's feedback, or a step's annotation: `step`),
        its webhook deliveries and a diagnosis job, added to `out`'s alerts and jobs."""
        alert_id = f"al-{uuid.uuid4().hex[:16]}"
        task = self._task_of(con, session_id)
        final_answer = document.final_answer(from_json_text(output))
        link = f"{(public_url or '').rstrip('/')}/api/v1/sessions/{quote(session_id, safe='')}/report"
        payload = {
            "alert_id": alert_id, "session_id": session_id, "score": score, "task": task,
            "final_answer": final_answer, "comment": comment, "link": link,
            **({"step": step, "label": label} if step is not None else {}),
        }
        payload = redact_value("alert", payload)  # a session stored before the rules knew its secret
        payload = {"text": alert_text(payload), **payload}
        con.execute("INSERT INTO alerts VALUES (?, ?, ?, ?, ?, ?)",
                    [alert_id, cause_id, session_id, jsonsafe.dumps(payload), bool(public_url), created_ns])
        for url in dict.fromkeys(webhooks):
            con.execute("INSERT INTO deliveries VALUES (?, ?, 'pending', 0, ?, NULL, NULL)",
                        [alert_id, url, created_ns])
        job_id = insert_job(con, session_id, "diagnosis", f"feedback {cause_id}", created_ns)
        out["alerts"].append({"alert_id": alert_id, "payload": payload})
        out["jobs"].append({"job_id": job_id, "session_id": session_id})

    def fan_out_alerts(self, webhooks: list[str], public_url: str) -> int:
        """Give alerts recorded without a server (CLI on the file) a delivery per webhook."""
        with self._tx() as con:
            rows = con.execute("SELECT alert_id, payload, created_ns FROM alerts WHERE NOT fanout_done").fetchall()
            for alert_id, payload, created_ns in rows:
                p = json.loads(payload)
                if not p.get("link", "").startswith("http"):
                    p["link"] = f"{public_url.rstrip('/')}{p['link']}"
                    p["text"] = alert_text(p)
                for url in dict.fromkeys(webhooks):
                    con.execute("INSERT INTO deliveries SELECT ?, ?, 'pending', 0, ?, NULL, NULL WHERE NOT EXISTS "
                                "(SELECT 1 FROM deliveries WHERE alert_id = ? AND webhook = ?)",
                                [alert_id, url, created_ns, alert_id, url])
                con.execute("UPDATE alerts SET fanout_done = true, payload = ? WHERE alert_id = ?",
                            [jsonsafe.dumps(p), alert_id])
        return len(rows)

    def due_deliveries(self, now_ns: int | None = None, limit: int = 50) -> list[dict]:
        rows = records(self._read().execute(
            """SELECT d.alert_id, d.webhook, d.attempts, a.payload FROM deliveries d JOIN alerts a USING (alert_id)
               WHERE d.state = 'pending' AND d.next_attempt_ns <= ? ORDER BY d.next_attempt_ns LIMIT ?""",
            [now_ns or time.time_ns(), limit]))
        return [{**r, "payload": json.loads(r["payload"])} for r in rows]

    def claim_due_deliveries(self, hold_s: float = 60.0, limit: int = 50) -> list[dict]:
        """On a store several collectors share: the due deliveries, each moved `hold_s` into
        the future in the same transaction (under the lock of the deliveries queue), so the other
        collectors' delivery loops pass over them while this one tries. Its outcome
        (`mark_delivery`) replaces the hold; if this collector dies first, the delivery is
        due again once the hold ends: at least once, the receiver deduplicating on
        `webhook-id` / `Idempotency-Key` (the alert id)."""
        now = time.time_ns()

        def claim(con) -> list[dict]:
            due = records(con.execute(
                """SELECT d.alert_id, d.webhook, d.attempts, a.payload FROM deliveries d JOIN alerts a USING (alert_id)
                   WHERE d.state = 'pending' AND d.next_attempt_ns <= ? ORDER BY d.next_attempt_ns LIMIT ?""",
                [now, limit]))
            for d in due:
                con.execute("UPDATE deliveries SET next_attempt_ns = ? WHERE alert_id = ? AND webhook = ?",
                            [now + int(hold_s * 1e9), d["alert_id"], d["webhook"]])
            return due

        due = self._write(claim, ["deliveries"])  # one claim at a time, beside span transactions
        return [{**r, "payload": json.loads(r["payload"])} for r in due]

    def next_delivery_ns(self) -> int | None:
        return scalar(self._read().execute("SELECT min(next_attempt_ns) FROM deliveries WHERE state = 'pending'"))

    def mark_delivery(self, alert_id: str, webhook: str, *, delivered: bool, error: str | None = None,
                      next_attempt_ns: int | None = None, dead: bool = False) -> None:
        """Record one attempt: delivered, failed and due again at `next_attempt_ns`, or failed and
        `dead` (dead-lettered: kept with its last error for `list_alerts`, never due again)."""
        with self._tx() as con:
            if delivered:
                con.execute("UPDATE deliveries SET state = 'delivered', attempts = attempts + 1, delivered_ns = ?, "
                            "last_error = NULL WHERE alert_id = ? AND webhook = ?", [time.time_ns(), alert_id, webhook])
            elif dead:
                con.execute("UPDATE deliveries SET state = 'dead', attempts = attempts + 1, last_error = ?, "
                            "next_attempt_ns = NULL WHERE alert_id = ? AND webhook = ?", [error, alert_id, webhook])
            else:
                con.execute("UPDATE deliveries SET attempts = attempts + 1, last_error = ?, next_attempt_ns = ? "
                            "WHERE alert_id = ? AND webhook = ?", [error, next_attempt_ns, alert_id, webhook])

    def list_alerts(self, session_id: str | None = None, *, offset: int = 0, limit: int | None = None,
                    newest_first: bool = False) -> list[dict]:
        """Alerts with their deliveries, in the order they were raised (`newest_first` reverses
        it), from `offset`, at most `limit` of them (None: all)."""
        order = "DESC" if newest_first else "ASC"
        rows = records(self._read().execute(
            f"""WITH page AS (SELECT * FROM alerts WHERE ? IS NULL OR session_id = ?
                              ORDER BY created_ns {order}, alert_id LIMIT ? OFFSET ?)
               SELECT a.alert_id, a.feedback_id, a.session_id, a.payload, a.created_ns,
                      list({{'webhook': d.webhook, 'state': d.state, 'attempts': d.attempts,
                            'last_error': d.last_error, 'delivered_ns': d.delivered_ns}}) FILTER (d.webhook IS NOT NULL) AS deliveries
               FROM page a LEFT JOIN deliveries d USING (alert_id)
               GROUP BY ALL ORDER BY a.created_ns {order}, a.alert_id""",
            [session_id, session_id, limit, offset]))
        out = []
        for r in rows:
            deliveries = [{**{k: v for k, v in d.items() if k != "delivered_ns"},
                           "delivered_at": document.iso(d["delivered_ns"])} for d in (r["deliveries"] or [])]
            out.append({"alert_id": r["alert_id"], "feedback_id": r["feedback_id"], "session_id": r["session_id"],
                        "payload": json.loads(r["payload"]), "created_at": document.iso(r["created_ns"]),
                        "deliveries": deliveries})
        return out

    def count_alerts(self, session_id: str | None = None) -> int:
        """How many alerts `list_alerts` lists in all (a page's total)."""
        return scalar(self._read().execute("SELECT count(*) FROM alerts WHERE ? IS NULL OR session_id = ?",
                                           [session_id, session_id]))
