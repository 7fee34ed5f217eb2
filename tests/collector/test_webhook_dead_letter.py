"""A webhook that keeps failing is tried `--webhook-max-attempts` times, then dead-lettered:
state 'dead' with its last error in GET /api/v1/alerts, and never tried again."""
from __future__ import annotations

import time

import procs
from collector_support import WebhookReceiver
from test_alerts import raise_alert, wait_until

from tracefix.collector.access import HttpAccess


def test_always_failing_webhook_is_tried_up_to_the_cap_then_dead_lettered(tmp_path):
    receiver = WebhookReceiver(status=500)
    db = tmp_path / "dead.duckdb"
    args = ("--webhook", receiver.url, "--alert-retry-max", "0.05", "--webhook-max-attempts", "3",
            "--diagnose", "off")
    serve = procs.start_serve(db, *args)
    try:
        sid = "always-500"
        alert_id = raise_alert(serve.match["http"], sid)
        api = HttpAccess(serve.match["http"])

        def delivery() -> dict:
            return api.list_alerts(sid)[0]["deliveries"][0]

        assert wait_until(lambda: delivery()["state"] == "dead"), delivery()
        dead = delivery()
        assert (dead["state"], dead["attempts"], dead["last_error"], dead["delivered_at"]) == ("dead", 3, "HTTP 500: ok", None)

        def tries() -> int:
            return len([r for r in receiver.received if r["json"].get("alert_id") == alert_id])

        assert tries() == 3
        time.sleep(0.5)  # ten times the longest retry wait: a retry of a dead delivery would be here
        assert tries() == 3
        serve.stop()
        serve = procs.start_serve(db, *args)  # a restart does not revive it either
        time.sleep(0.5)
        assert tries() == 3
        assert HttpAccess(serve.match["http"]).list_alerts(sid)[0]["deliveries"][0]["state"] == "dead"
    finally:
        serve.stop()
        receiver.close()
