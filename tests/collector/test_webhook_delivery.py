"""Webhooks delivered as receivers expect (Standard Webhooks spec): a 4xx refusal is not retried,
a Retry-After is honoured, a 307 is followed as the same POST, a 301 is not, and every POST is
signed so that `standardwebhooks` verifies it.

One collector with one webhook per behaviour and one alert keeps the module fast: each
receiver answers its own way and each test reads its own receiver and delivery."""
from __future__ import annotations

import base64
import time

import procs
import pytest
from collector_support import WebhookReceiver
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError
from test_alerts import raise_alert, wait_until

from tracefix.collector.access import HttpAccess
from tracefix.collector.alerts import backoff_s, retry_after_s

SECRET = "whsec_" + base64.b64encode(b"tracefix-test-signing-secret-32b").decode()
OTHER_SECRET = "whsec_" + base64.b64encode(b"some-other-receivers-secret-32by").decode()
RETRY_AFTER_S = 1


def _rate_limited_once(path: str, tries: int) -> tuple[int, dict]:
    return (429, {"Retry-After": str(RETRY_AFTER_S)}) if tries == 0 else (200, {})


def _moved_with_307(path: str, tries: int) -> tuple[int, dict]:
    return (307, {"Location": "/moved"}) if path == "/hook" else (200, {})


def _moved_with_301(path: str, tries: int) -> tuple[int, dict]:
    return (301, {"Location": "/elsewhere"}) if path == "/hook" else (200, {})


@pytest.fixture(scope="module")
def delivered(tmp_path_factory):
    """Receivers by behaviour, the alert raised, and a reader of each receiver's delivery."""
    receivers = {"refusing": WebhookReceiver(status=400), "rate_limited": WebhookReceiver(respond=_rate_limited_once),
                 "moved_307": WebhookReceiver(respond=_moved_with_307),
                 "moved_301": WebhookReceiver(respond=_moved_with_301), "plain": WebhookReceiver()}
    hooks = [arg for r in receivers.values() for arg in ("--webhook", r.url)]
    # base 0.25 s: any backoff retry of the first failure comes within 0.25 s, well before Retry-After's 1 s
    serve = procs.start_serve(tmp_path_factory.mktemp("hooks") / "hooks.duckdb", *hooks, "--alert-retry-max", "2",
                              "--webhook-max-attempts", "3", "--diagnose", "off",
                              env={"TRACEFIX_WEBHOOK_SECRET": SECRET})
    try:
        sid = "webhook-semantics"
        alert_id = raise_alert(serve.match["http"], sid)
        api = HttpAccess(serve.match["http"])

        def delivery(name: str) -> dict:
            return next(d for d in api.list_alerts(sid)[0]["deliveries"] if d["webhook"] == receivers[name].url)

        yield receivers, alert_id, delivery
    finally:
        serve.stop()
        for r in receivers.values():
            r.close()


def test_a_4xx_refusal_is_posted_once_and_dead_lettered_with_status_and_body(delivered):
    receivers, _, delivery = delivered
    assert wait_until(lambda: delivery("refusing")["state"] == "dead"), delivery("refusing")
    time.sleep(0.6)  # more than twice the longest backoff: a retry would have come
    assert len(receivers["refusing"].received) == 1
    assert (delivery("refusing")["attempts"], delivery("refusing")["last_error"]) == (1, "HTTP 400: ok")


def test_retry_after_on_429_sets_the_next_try(delivered):
    receivers, _, delivery = delivered
    assert wait_until(lambda: delivery("rate_limited")["state"] == "delivered"), delivery("rate_limited")
    first, second = receivers["rate_limited"].received
    assert second["at"] - first["at"] >= RETRY_AFTER_S - 0.05
    assert second["body"] == first["body"]


def test_a_307_is_followed_as_a_post_with_the_same_body(delivered):
    receivers, alert_id, delivery = delivered
    assert wait_until(lambda: delivery("moved_307")["state"] == "delivered"), delivery("moved_307")
    original, moved = receivers["moved_307"].received  # do_POST is the only handler: both are POSTs
    assert (original["path"], moved["path"]) == ("/hook", "/moved")
    assert moved["body"] == original["body"] and moved["json"]["alert_id"] == alert_id
    assert moved["headers"]["webhook-signature"] == original["headers"]["webhook-signature"]


def test_a_301_is_a_failure_naming_its_location_and_not_followed(delivered):
    receivers, _, delivery = delivered
    assert wait_until(lambda: delivery("moved_301")["state"] == "dead"), delivery("moved_301")
    assert [r["path"] for r in receivers["moved_301"].received] == ["/hook"] * 3  # retried, never to /elsewhere
    assert delivery("moved_301")["last_error"].startswith(f"HTTP 301 to {receivers['moved_301'].base_url}/elsewhere")


def test_every_post_is_signed_as_standard_webhooks_verifies(delivered):
    receivers, alert_id, _ = delivered
    (hit,) = receivers["plain"].wait_for(lambda j: j.get("alert_id") == alert_id)
    headers = {k.lower(): v for k, v in hit["headers"].items()}
    assert Webhook(SECRET).verify(hit["body"], headers)["alert_id"] == alert_id
    assert (headers["webhook-id"], headers["idempotency-key"]) == (alert_id, alert_id)
    with pytest.raises(WebhookVerificationError):
        Webhook(OTHER_SECRET).verify(hit["body"], headers)
    tampered = hit["body"].replace(b'"alert_id"', b'"alert_id" ')
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(tampered, headers)


def test_backoff_is_full_jitter_below_the_exponential_bound():
    waits = [backoff_s(3, 0.25, 30.0) for _ in range(200)]  # bound min(30, 0.25 * 2**3) = 2 s
    assert all(0 <= w <= 2.0 for w in waits)
    assert min(waits) < 0.5 and max(waits) > 1.5  # spread over the whole range, not pinned to the bound
    assert all(0 <= backoff_s(20, 0.25, 30.0) <= 30.0 for _ in range(50))


def test_retry_after_reads_seconds_and_http_dates_within_the_cap():
    assert retry_after_s("1", cap=30) == 1.0
    assert retry_after_s("120", cap=30) == 30.0
    in_ten_s = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 10))
    assert 8 <= retry_after_s(in_ten_s, cap=30) <= 10
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", cap=30) == 0.0  # past: no wait
    assert retry_after_s("soon", cap=30) is None and retry_after_s(None, cap=30) is None
