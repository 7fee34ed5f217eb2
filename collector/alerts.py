"""Alert delivery from the outbox: POST each pending delivery to its webhook until it lands or its tries run out.

The alert and its deliveries were written in the feedback's transaction, so a crash loses
nothing; a delivery is marked delivered only after the webhook answered 2xx, and retried
with exponential backoff otherwise, up to `max_attempts` tries in all: then it is
dead-lettered (state 'dead', with its last error, in `GET /api/v1/alerts`) and never retried,
so a webhook gone for good does not keep the outbox busy forever. Receivers can deduplicate on `alert_id` (also sent as
the `Idempotency-Key` header) in the rare case the process died between the POST and the
mark.
"""
from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

from tracefix.collector import jsonsafe
from tracefix.collector.threadnames import name_os_thread

if TYPE_CHECKING:
    from tracefix.collector.server import Collector

log = logging.getLogger("tracefix.collector.alerts")


def post_json(url: str, payload: dict, headers: dict | None = None, timeout: float = 5.0) -> int:
    """POST `payload` as strict JSON (an alert stored with a non-finite score sends null)."""
    req = urllib.request.Request(url, data=jsonsafe.dumps(payload).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status


def backoff_s(attempts: int, base: float, cap: float) -> float:
    return min(cap, base * (2 ** attempts))


class AlertDeliverer:
    def __init__(self, collector: "Collector", *, base_delay: float = 0.25, max_delay: float = 30.0,
                 max_attempts: int = 50):
        self.collector = collector
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_attempts = max_attempts  # then the delivery is dead-lettered (state 'dead')
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tracefix-alerts", daemon=True)

    def start(self) -> "AlertDeliverer":
        self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        name_os_thread("tf-alerts")
        store, writer = self.collector.store, self.collector.writer
        while not self._stop.is_set():
            try:
                due = store.due_deliveries()
                for d in due:
                    if self._stop.is_set():
                        return
                    self._deliver(d)
                nxt = store.next_delivery_ns()
            except Exception:
                log.exception("alert delivery loop failed; retrying")
                nxt = None
            wait = 5.0 if nxt is None else max(0.0, min(5.0, (nxt - time.time_ns()) / 1e9))
            self._wake.wait(wait)
            self._wake.clear()

    def _deliver(self, d: dict) -> None:
        writer = self.collector.writer
        try:
            status = post_json(d["webhook"], d["payload"], {"Idempotency-Key": d["alert_id"]})
            ok, err = 200 <= status < 300, f"HTTP {status}"
        except urllib.error.HTTPError as exc:
            ok, err = False, f"HTTP {exc.code}"
        except Exception as exc:  # refused, timeout, DNS: the webhook is down; retry later
            ok, err = False, f"{type(exc).__name__}: {exc}"
        self.collector.metrics.webhook_delivery(ok)
        if ok:
            writer.run(lambda s: s.mark_delivery(d["alert_id"], d["webhook"], delivered=True))
            log.info("alert %s for session %s delivered to %s", d["alert_id"], d["payload"].get("session_id"),
                        d["webhook"])
        elif d["attempts"] + 1 >= self.max_attempts:
            writer.run(lambda s: s.mark_delivery(d["alert_id"], d["webhook"], delivered=False, error=err, dead=True))
            log.error("alert %s to %s failed (%s) %d times; dead-lettered, no more retries", d["alert_id"],
                      d["webhook"], err, d["attempts"] + 1)
        else:
            delay = backoff_s(d["attempts"], self.base_delay, self.max_delay)
            nxt = time.time_ns() + int(delay * 1e9)
            writer.run(lambda s: s.mark_delivery(d["alert_id"], d["webhook"], delivered=False, error=err,
                                                 next_attempt_ns=nxt))
            log.warning("alert %s to %s failed (%s); retry in %.1fs", d["alert_id"], d["webhook"], err, delay)
