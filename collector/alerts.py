"""Alert delivery from the outbox: POST each pending delivery to its webhook until it lands or its tries run out.

The alert and its deliveries were written in the feedback's transaction, so a crash loses
nothing; a delivery is marked delivered only after the webhook answered 2xx, and retried
otherwise, up to `max_attempts` tries in all: then it is dead-lettered (state 'dead', with
its last error, in `GET /api/v1/alerts`) and never retried, so a webhook gone for good does
not keep the outbox busy forever. Receivers can deduplicate on `alert_id` (also sent as the
`Idempotency-Key` and `webhook-id` headers) in the rare case the process died between the
POST and the mark.

What a receiver's answer means (after the Standard Webhooks spec, "Delivery success and failure"):
- 2xx: delivered.
- 4xx other than 408 and 429: the receiver refuses this request and will refuse it again,
  so the delivery is dead-lettered at once, the status and the start of the body kept.
- 408, 429, 5xx, timeouts, refused connections: retried after a full-jitter backoff,
  random.uniform(0, min(cap, base * 2**attempts)), so many collectors failing at once do not
  retry in step. A `Retry-After` (seconds or an HTTP date) on 429 / 503 sets the next try's
  time instead, bounded by the cap (`--alert-retry-max`).
- 307 / 308: followed (a few hops), still a POST with the same body and headers: these codes
  exist to say "same request, other URL", e.g. an endpoint moved or a trailing slash added.
  The spec recommends treating every 3xx as a failure; we follow these two because a body-
  and method-preserving redirect loses nothing, and an outbox stuck on a moved URL would.
- 301 / 302 / 303: a failure (retried), `Location` in `last_error`. Clients turn these into a
  GET without the body (urllib did so silently), which a POST receiver cannot take; one that
  answers them is misconfigured and its URL should be fixed, as the spec says.

With `--webhook-secret`, each POST is signed as the Standard Webhooks spec says, so receivers
can verify it with any of its libraries (e.g. `standardwebhooks.Webhook(secret).verify`):
`webhook-id` (the alert id), `webhook-timestamp` (unix seconds of this try, so a retry is not
rejected as a replay) and `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
"""
from __future__ import annotations

import base64
import binascii
import email.utils
import hashlib
import hmac
import logging
import random
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from tracefix.collector import jsonsafe
from tracefix.collector.redact import redact_value
from tracefix.collector.threadnames import name_os_thread

if TYPE_CHECKING:
    from tracefix.collector.server import Collector

log = logging.getLogger("tracefix.collector.alerts")

SECRET_PREFIX = "whsec_"
MAX_REDIRECTS = 5
ERROR_BODY_CHARS = 200  # of a refusing receiver's answer, kept in `last_error`
RETRYABLE_4XX = (408, 429)  # timeout and rate limit: the same request may pass later
REDIRECTS_KEEPING_POST = (307, 308)


@dataclass
class WebhookAnswer:
    """The final answer to one delivery try (after any 307/308 hops)."""
    status: int
    body_start: str = ""
    retry_after: str | None = None
    location: str | None = None

    @property
    def delivered(self) -> bool:
        return 200 <= self.status < 300

    @property
    def refused_for_good(self) -> bool:
        return 400 <= self.status < 500 and self.status not in RETRYABLE_4XX

    def error(self) -> str:
        err = f"HTTP {self.status}"
        if self.location is not None:
            err += f" to {self.location} (not followed: a POST receiver should not redirect with it)"
        if self.body_start:
            err += f": {self.body_start}"
        return err


def webhook_secret_key(secret: str) -> bytes:
    """The HMAC key of a `whsec_<base64>` secret (the prefix is optional, as in the spec's libraries)."""
    encoded = secret[len(SECRET_PREFIX):] if secret.startswith(SECRET_PREFIX) else secret
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except binascii.Error:
        raise ValueError("a webhook secret is whsec_ followed by base64, e.g. whsec_$(openssl rand -base64 32)") from None
    if not key:
        raise ValueError("the webhook secret is empty")
    return key


def signature_headers(key: bytes, msg_id: str, body: str, timestamp: int | None = None) -> dict:
    """Standard Webhooks headers signing `body` (the exact text sent) for `msg_id`."""
    timestamp = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(key, f"{msg_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": "v1," + base64.b64encode(mac).decode()}


def post_json(client: httpx.Client, url: str, body: str, headers: dict) -> WebhookAnswer:
    """POST the JSON `body`, following 307/308 with the same method, body and headers."""
    for _ in range(MAX_REDIRECTS + 1):
        with client.stream("POST", url, content=body.encode(),
                           headers={"Content-Type": "application/json", **headers}) as resp:
            redirect = resp.is_redirect and urllib.parse.urljoin(url, resp.headers["location"])
            if redirect and resp.status_code in REDIRECTS_KEEPING_POST:
                url = redirect
                continue
            answer = WebhookAnswer(resp.status_code, retry_after=resp.headers.get("retry-after"),
                                   location=redirect or None)
            if not answer.delivered:
                answer.body_start = _body_start(resp)
            return answer
    raise httpx.TooManyRedirects(f"more than {MAX_REDIRECTS} redirects")


def _body_start(resp: httpx.Response) -> str:
    """The first characters of an error answer, read no further (a receiver may answer megabytes)."""
    got = b""
    for chunk in resp.iter_bytes():
        got += chunk
        if len(got) >= ERROR_BODY_CHARS * 4:
            break
    return " ".join(got.decode("utf-8", "replace").split())[:ERROR_BODY_CHARS]


def backoff_s(attempts: int, base: float, cap: float) -> float:
    """Full jitter: anywhere up to the exponential bound, so retries of many senders spread out."""
    return random.uniform(0, min(cap, base * (2 ** attempts)))


def retry_after_s(value: str | None, cap: float) -> float | None:
    """The wait a `Retry-After` asks for (delta seconds or an HTTP date), at most `cap`; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        wait = float(value)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        wait = when.timestamp() - time.time()
    return max(0.0, min(cap, wait))


class AlertDeliverer:
    def __init__(self, collector: "Collector", *, base_delay: float = 0.25, max_delay: float = 30.0,
                 max_attempts: int = 50, secret: str | None = None, timeout: float = 5.0):
        self.collector = collector
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_attempts = max_attempts  # then the delivery is dead-lettered (state 'dead')
        self.secret_key = webhook_secret_key(secret) if secret else None
        self.timeout = timeout
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
        store = self.collector.store
        # redirects are followed by post_json (307/308 only); one client keeps connections alive
        with httpx.Client(timeout=self.timeout, follow_redirects=False) as client:
            while not self._stop.is_set():
                try:
                    # collectors sharing a lake each run this loop: there, a delivery is claimed first
                    due = (self.collector.writer.run(lambda s: s.claim_due_deliveries(hold_s=self.timeout * 2 + 30))
                           if store.shared else store.due_deliveries())
                    for d in due:
                        if self._stop.is_set():
                            return
                        self._deliver(client, d)
                    nxt = store.next_delivery_ns()
                except Exception:
                    log.exception("alert delivery loop failed; retrying")
                    nxt = None
                wait = 5.0 if nxt is None else max(0.0, min(5.0, (nxt - time.time_ns()) / 1e9))
                self._wake.wait(wait)
                self._wake.clear()

    def _deliver(self, client: httpx.Client, d: dict) -> None:
        writer = self.collector.writer
        # strict JSON (a stored non-finite score sends null); signed as sent. Redacted again:
        # an alert stored by an older collector may carry a secret its task text held.
        body = jsonsafe.dumps(redact_value("alert", d["payload"]))
        headers = {"Idempotency-Key": d["alert_id"]}
        if self.secret_key is not None:
            headers.update(signature_headers(self.secret_key, d["alert_id"], body))
        answer: WebhookAnswer | None = None
        try:
            answer = post_json(client, d["webhook"], body, headers)
            err = answer.error()
        except Exception as exc:  # refused, timeout, DNS, redirect loop: the webhook is down; retry later
            err = f"{type(exc).__name__}: {exc}"
        tries = d["attempts"] + 1
        self.collector.metrics.webhook_delivery(answer is not None and answer.delivered)
        if answer is not None and answer.delivered:
            writer.run(lambda s: s.mark_delivery(d["alert_id"], d["webhook"], delivered=True))
            log.info("alert %s for session %s delivered to %s", d["alert_id"], d["payload"].get("session_id"),
                        d["webhook"])
        elif answer is not None and answer.refused_for_good:
            writer.run(lambda s: s.mark_delivery(d["alert_id"], d["webhook"], delivered=False, error=err, dead=True))
            log.error("alert %s to %s refused (%s); dead-lettered, not retried", d["alert_id"], d["webhook"], err)
        elif tries >= self.max_attempts:
            writer.run(lambda s: s.mark_delivery(d["alert_id"], d["webhook"], delivered=False, error=err, dead=True))
            log.error("alert %s to %s failed (%s) %d times; dead-lettered, no more retries", d["alert_id"],
                      d["webhook"], err, tries)
        else:
            delay = None
            if answer is not None and answer.status in (429, 503):
                delay = retry_after_s(answer.retry_after, self.max_delay)
            if delay is None:
                delay = backoff_s(d["attempts"], self.base_delay, self.max_delay)
            nxt = time.time_ns() + int(delay * 1e9)
            writer.run(lambda s: s.mark_delivery(d["alert_id"], d["webhook"], delivered=False, error=err,
                                                 next_attempt_ns=nxt))
            log.warning("alert %s to %s failed (%s); retry in %.1fs", d["alert_id"], d["webhook"], err, delay)
